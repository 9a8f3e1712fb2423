// Parameters and buffers as one flat float32 vector (what actors, learners and model.pt share), and
// observation rows as a view (models/policy.h).
#include "models/policy.h"

#include <cstring>

namespace mpirl::models {

torch::Tensor obs_rows(const envs::EnvSpec& spec, void* first, int64_t rows, int64_t row_stride) {
  std::vector<int64_t> shape{rows}, strides{row_stride};
  shape.insert(shape.end(), spec.obs_shape.begin(), spec.obs_shape.end());
  for (size_t i = 0; i < spec.obs_shape.size(); ++i) {
    int64_t st = 1;
    for (size_t j = i + 1; j < spec.obs_shape.size(); ++j) st *= spec.obs_shape[j];
    strides.push_back(st);
  }
  return torch::from_blob(first, shape, strides, spec.obs_uint8 ? torch::kUInt8 : torch::kFloat32);
}

bool all_finite(Policy& p) {
  torch::NoGradGuard g;
  std::vector<torch::Tensor> ok;
  for (auto& t : p->parameters()) ok.push_back(torch::isfinite(t).all());
  for (auto& t : p->buffers()) ok.push_back(torch::isfinite(t).all());
  return ok.empty() || torch::stack(ok).all().item<bool>();
}

int64_t num_params(Policy& p) {
  int64_t n = 0;
  for (auto& t : p->parameters()) n += t.numel();
  for (auto& t : p->buffers()) n += t.numel();
  return n;
}

void write_flat(Policy& p, float* dst) {
  torch::NoGradGuard g;
  std::vector<torch::Tensor> all;  // one concatenation on the device, one copy to the host
  for (auto& t : p->parameters()) all.push_back(t.detach().reshape({-1}));
  for (auto& t : p->buffers()) all.push_back(t.detach().reshape({-1}));
  auto v = torch::cat(all).to(torch::kCPU, torch::kFloat32).contiguous();
  std::memcpy(dst, v.data_ptr<float>(), size_t(v.numel()) * sizeof(float));
}

void read_flat(Policy& p, const float* src) {
  torch::NoGradGuard g;
  auto params = p->parameters();
  auto device = params.empty() ? torch::Device(torch::kCPU) : params[0].device();
  int64_t np = 0;
  for (auto& t : params) np += t.numel();
  // A fresh tensor: the parameters become views of it, never of the caller's buffer.
  auto v = torch::from_blob(const_cast<float*>(src), {num_params(p)}, torch::kFloat32).to(device, torch::kFloat32, false, true);
  torch::nn::utils::vector_to_parameters(v.narrow(0, 0, np), params);
  int64_t off = np;
  for (auto& b : p->buffers()) {  // in place: the learner's normalisers hold these tensors
    b.copy_(v.narrow(0, off, b.numel()).view_as(b));
    off += b.numel();
  }
}

}  // namespace mpirl::models
