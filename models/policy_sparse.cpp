// The policy's layer stacks and its pass over sparse uint8 observations (model.sparse_input).
#include "models/policy.h"

namespace mpirl::models {

torch::Tensor PolicyImpl::mlp(std::vector<torch::nn::Linear>& layers, torch::Tensor h) {
  for (size_t i = 0; i < layers.size(); ++i) {
    auto a = i == 0 && sparse_ ? sparse_linear(*sparse_, layers[0]->weight, layers[0]->bias) : layers[i](h);
    h = relu_ ? torch::relu(a) : torch::tanh(a);
  }
  return h;
}

bool PolicyImpl::sparse_ok(const torch::Tensor& obs) const {
  return sparse_input_ && obs.scalar_type() == torch::kUInt8 && obs.device().is_cpu();
}

namespace {
// sparse_ for the length of one pass
struct SparseScope {
  const SparseRows*& slot;
  SparseScope(const SparseRows*& p, const SparseRows* s) : slot(p) { slot = s; }
  ~SparseScope() { slot = nullptr; }
};
}  // namespace

PolicyOutput PolicyImpl::sparse_pass(const torch::Tensor& obs, const torch::Tensor& is_init, const torch::Tensor& state0) {
  std::vector<int64_t> lead(obs.sizes().begin(), obs.sizes().end() - obs_rank_);  // [N] or [T, B]
  const SparseRows s = sparse_rows(obs.reshape({-1, spec_.obs_size()}));
  SparseScope scope(sparse_, &s);
  auto h = torso(torch::Tensor());
  if (core_) h = core_->sequence(h.view({lead[0], lead[1], h.size(-1)}), state0, is_init).first.flatten(0, 1);
  return unflatten(heads(h, torch::Tensor()), lead);
}

}  // namespace mpirl::models
