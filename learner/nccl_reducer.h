#pragma once
// Gradient averaging with NCCL between learners that each own a GPU (learner/gradient_reducer.h
// chooses it). Raw NCCL, not c10d::ProcessGroupNCCL: MPI already connects the learners, so the
// unique id travels by MPI_Bcast and no TCP store or rendezvous is needed, and the reducer keeps
// direct hold of the communicator for async-error polling and abort.
//
// average(): the gradients are packed into one flat device bucket (allocated once), all-reduced
// with ncclAvg on the current CUDA stream and unpacked, with no host synchronisation: completion
// is checked one call later (a CUDA event), by which time it has normally long finished. While
// waiting, the communicator's async error is polled; after learner.collective_timeout_s the
// communicator is aborted and mpirl::Error names the rank and host.
#include <memory>
#include <string>

#include "learner/gradient_reducer.h"

namespace mpirl::learner {

// True when mpirl was built with NCCL (MPIRL_WITH_NCCL).
bool nccl_available();
// The NCCL library's version ("2.27.3"), or "none" in a build without NCCL.
std::string nccl_version();

// Collective over `learners`. Throws mpirl::Error (naming the rank and host) if NCCL cannot start,
// or when built without NCCL.
std::unique_ptr<GradientReducer> make_nccl_reducer(MPI_Comm learners, int size, const ReducerRequest& req);

}  // namespace mpirl::learner
