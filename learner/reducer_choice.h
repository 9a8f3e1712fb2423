#pragma once
// Which gradient reducer the learners take (every learner the same kind, a collective choice):
// none for one learner, NCCL when each owns a GPU and the build has NCCL, MPI over host memory
// otherwise. Above gradient_reducer.h and nccl_reducer.h, which know nothing of the choice.
#include <memory>
#include <string>

#include <mpi.h>

#include "learner/gradient_reducer.h"

namespace mpirl::learner {

struct ReducerChoice {
  ReducerKind kind;
  std::string why;  // logged by learner 0
};
// The choice from every learner's situation (any_cpu / any_shared: over all learners).
ReducerChoice choose_reducer(int learners, bool any_cpu, bool any_shared, bool nccl_built);

// Collective over `learners`: every learner gets the same kind of reducer.
std::unique_ptr<GradientReducer> make_gradient_reducer(MPI_Comm learners, int size, const ReducerRequest& req,
                                                       std::string* why = nullptr);

}  // namespace mpirl::learner
