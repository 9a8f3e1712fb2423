#include "learner/reducer_choice.h"

#include "core/error.h"
#include "learner/nccl_reducer.h"

namespace mpirl::learner {

ReducerChoice choose_reducer(int learners, bool any_cpu, bool any_shared, bool nccl_built) {
  if (learners <= 1) return {ReducerKind::None, "one learner: nothing to average"};
  if (any_cpu) return {ReducerKind::Mpi, "learners on CPU: MPI_Allreduce over host memory"};
  if (any_shared)
    return {ReducerKind::Mpi, "learners share a GPU (NCCL cannot join two ranks on one device): MPI_Allreduce "
                              "over host memory"};
  if (!nccl_built) return {ReducerKind::Mpi, "this build has no NCCL: MPI_Allreduce over host memory"};
  return {ReducerKind::Nccl, "one GPU per learner: NCCL all-reduce on the compute stream"};
}

std::unique_ptr<GradientReducer> make_gradient_reducer(MPI_Comm learners, int size, const ReducerRequest& req,
                                                       std::string* why) {
  int flags[2] = {req.device.is_cpu() ? 1 : 0, req.shared_gpu ? 1 : 0};
  if (size > 1) MPIRL_MPI(MPI_Allreduce(MPI_IN_PLACE, flags, 2, MPI_INT, MPI_MAX, learners));
  const ReducerChoice c = choose_reducer(size, flags[0] != 0, flags[1] != 0, nccl_available());
  if (why) *why = c.why;
  switch (c.kind) {
    case ReducerKind::None: return std::make_unique<NoReducer>();
    case ReducerKind::Mpi: return std::make_unique<MpiReducer>(learners, size);
    case ReducerKind::Nccl: return make_nccl_reducer(learners, size, req);
  }
  return nullptr;
}

}  // namespace mpirl::learner
