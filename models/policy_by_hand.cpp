// A feed-forward MLP policy's forward and backward passes without autograd (models/policy.h:
// PolicyImpl::by_hand). The backward pass is the chain rule per layer, y = act(x W^T + b):
// dA = act'(dY), dW = dA^T x, db = sum over rows of dA, dX = dA W. The activations' derivatives
// read their outputs, as autograd's tanh_backward and threshold_backward do.
#include "models/policy.h"

#include "core/error.h"

namespace mpirl::models {

bool PolicyImpl::by_hand() const {
  return !py_ && !cnn_ && !core_ && !act_q_ && obs_rank_ == 1 && !spec_.obs_uint8 && pi_->weight.device().is_cpu() &&
         pi_->weight.scalar_type() == torch::kFloat32;
}

namespace {
// act(x W^T + b) for each layer, each output kept.
torch::Tensor layers_forward(const std::vector<torch::nn::Linear>& layers, torch::Tensor x, bool relu,
                             std::vector<torch::Tensor>& outs) {
  outs.clear();
  for (const auto& l : layers) {
    x = at::addmm(l->bias, x, l->weight.t());
    relu ? x.relu_() : x.tanh_();
    outs.push_back(x);
  }
  return x;
}

// The gradient of a linear layer y = x W^T + b from dy [N, out], into its parameters' grads;
// returns dx [N, in] (undefined when !want_dx).
torch::Tensor linear_backward(const torch::nn::Linear& l, const torch::Tensor& x, const torch::Tensor& dy,
                              bool want_dx) {
  l->weight.mutable_grad() = dy.t().mm(x);
  l->bias.mutable_grad() = dy.sum(0);
  return want_dx ? dy.mm(l->weight) : torch::Tensor();
}

// Back through `layers` (their outputs `outs`, their input x) from d, the gradient with respect to
// the last output, into the layers' parameters' grads (none with respect to x: the observations).
void layers_backward(const std::vector<torch::nn::Linear>& layers, const std::vector<torch::Tensor>& outs,
                     const torch::Tensor& x, torch::Tensor d, bool relu) {
  for (size_t i = layers.size(); i-- > 0;) {
    const auto da = relu ? at::threshold_backward(d, outs[i], 0) : at::tanh_backward(d, outs[i]);
    d = linear_backward(layers[i], i > 0 ? outs[i - 1] : x, da, i > 0);
  }
}
}  // namespace

void PolicyImpl::tape_forward(const torch::Tensor& obs, MlpTape& t) {
  MPIRL_CHECK(by_hand(), "PolicyImpl::tape_forward: not an MLP policy on the CPU without a core");
  torch::NoGradGuard g;
  t.x = normalize_obs(obs).reshape({-1, spec_.obs_size()});
  const auto h = layers_forward(torso_, t.x, relu_, t.h);
  t.head = at::addmm(pi_->bias, h, pi_->weight.t());
  const auto vh = separate_critic_ ? layers_forward(critic_, t.x, relu_, t.c) : h;
  if (!separate_critic_) t.c.clear();
  t.value = torch::addcmul(value_shift_, at::addmm(v_->bias, vh, v_->weight.t()).squeeze(-1), value_scale_);
}

void PolicyImpl::tape_backward(const MlpTape& t, const torch::Tensor& d_head, const torch::Tensor& d_value,
                               const torch::Tensor& d_log_std) {
  MPIRL_CHECK(by_hand(), "PolicyImpl::tape_backward: not an MLP policy on the CPU without a core");
  torch::NoGradGuard g;
  const auto& h = t.h.empty() ? t.x : t.h.back();
  torch::Tensor dh = linear_backward(pi_, h, d_head, !torso_.empty());
  const auto dv = (d_value * value_scale_).unsqueeze(-1);  // value = shift + v * scale
  if (separate_critic_) {
    const auto& c = t.c.empty() ? t.x : t.c.back();
    const auto dc = linear_backward(v_, c, dv, !critic_.empty());
    if (!critic_.empty()) layers_backward(critic_, t.c, t.x, dc, relu_);
  } else {
    const auto dvh = linear_backward(v_, h, dv, !torso_.empty());
    if (!torso_.empty()) dh.add_(dvh);
  }
  if (!torso_.empty()) layers_backward(torso_, t.h, t.x, dh, relu_);
  if (log_std_.defined()) {
    MPIRL_CHECK(d_log_std.defined(), "PolicyImpl::tape_backward: a Gaussian policy needs d_log_std");
    log_std_.mutable_grad() = d_log_std;
  }
}

}  // namespace mpirl::models
