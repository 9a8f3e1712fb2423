#include "learner/gradient_reducer.h"

#include "core/error.h"

namespace mpirl::learner {

void MpiReducer::average(const std::vector<torch::Tensor>& params) {
  torch::NoGradGuard g;
  for (auto& p : params)
    if (!p.grad().defined()) const_cast<torch::Tensor&>(p).mutable_grad() = torch::zeros_like(p);
  std::vector<torch::Tensor> grads;
  grads.reserve(params.size());
  for (auto& p : params) grads.push_back(p.grad());
  auto flat = torch::nn::utils::parameters_to_vector(grads);
  if (!host_.defined() || host_.numel() != flat.numel()) host_ = torch::empty({flat.numel()}, torch::kFloat32);
  host_.copy_(flat);
  MPIRL_MPI(MPI_Allreduce(MPI_IN_PLACE, host_.data_ptr<float>(), int(host_.numel()), MPI_FLOAT, MPI_SUM, comm_));
  host_.div_(double(size_));
  // Copied back into the gradients in place: a CUDA graph that reads them (learner/graph_step.h)
  // keeps pointing at the same memory.
  auto back = host_.to(flat.device());
  int64_t off = 0;
  for (auto& g : grads) {
    g.copy_(back.narrow(0, off, g.numel()).view_as(g));
    off += g.numel();
  }
}

}  // namespace mpirl::learner
