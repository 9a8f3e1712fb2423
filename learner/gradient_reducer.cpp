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
  // A fresh tensor: the gradients become views of it (never of the reused host buffer).
  torch::nn::utils::vector_to_parameters(host_.to(flat.device(), host_.scalar_type(), false, /*copy=*/true), grads);
}

std::unique_ptr<GradientReducer> make_gradient_reducer(MPI_Comm learners, int size) {
  if (size <= 1) return std::make_unique<NoReducer>();
  return std::make_unique<MpiReducer>(learners, size);
}

}  // namespace mpirl::learner
