#include "models/policy.h"

#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "core/error.h"

namespace mpirl::models {

namespace {
// Registers a Python module's tensor "a.b.c" under `root` as submodules a, b and parameter (or
// buffer) c: the same tensor, so that C++ and Python see one set of parameters, and C++ names
// "py.a.b.c" (LibTorch refuses dots in one name).
void register_tree(torch::nn::Module& root, const std::string& name, const torch::Tensor& t, bool buffer) {
  torch::nn::Module* m = &root;
  size_t start = 0;
  for (size_t dot = name.find('.'); dot != std::string::npos; start = dot + 1, dot = name.find('.', start)) {
    const std::string part = name.substr(start, dot - start);
    auto children = m->named_children();
    if (auto* child = children.find(part)) {
      m = child->get();
    } else {
      m = m->register_module(part, std::make_shared<torch::nn::Module>()).get();
    }
  }
  const std::string leaf = name.substr(start);
  if (buffer) {
    m->register_buffer(leaf, t);
  } else {
    m->register_parameter(leaf, t, t.requires_grad());  // a frozen parameter of the module stays frozen
  }
}
}  // namespace

PolicyImpl::PolicyImpl(const envs::EnvSpec& spec, const ModelOptions& opts)
    : spec_(spec), relu_(opts.activation == "relu"), act_q_(opts.act_q && spec.discrete), obs_rank_(int64_t(spec.obs_shape.size())), obs_clip_(opts.obs_norm_clip) {
  const int64_t norm = opts.obs_norm && !spec.obs_uint8 ? spec.obs_size() : 0;  // pixels are scaled, not normalised
  if (!opts.python.empty()) {
    py_ = std::make_shared<PythonModel>(spec, opts);
    auto root = register_module("py", std::make_shared<torch::nn::Module>());
    for (auto& [name, t] : py_->parameters()) register_tree(*root, name, t, false);
    for (auto& [name, t] : py_->buffers()) register_tree(*root, name, t, true);
    obs_shift_ = register_buffer("obs_shift", torch::zeros({norm}));
    obs_scale_ = register_buffer("obs_scale", torch::ones({norm}));
    value_shift_ = register_buffer("value_shift", torch::zeros({1}));
    value_scale_ = register_buffer("value_scale", torch::ones({1}));
    return;
  }
  int64_t in = spec.obs_size();
  const std::string encoder = resolve_encoder(opts.encoder, spec.obs_shape);
  if (encoder != "mlp") {
    cnn_ = register_module("encoder", ConvEncoder(encoder, spec.obs_shape));
    in = cnn_->out_size();
  } else {
    for (size_t i = 0; i < opts.hidden.size(); ++i) {
      torso_.push_back(register_module("torso" + std::to_string(i), torch::nn::Linear(in, opts.hidden[i])));
      in = opts.hidden[i];
    }
  }
  separate_critic_ = opts.critic == "separate";
  if (separate_critic_) {
    TORCH_CHECK(encoder == "mlp" && opts.core == "none", "model.critic = \"separate\" needs the mlp encoder without a core");
    int64_t c_in = spec.obs_size();
    for (size_t i = 0; i < opts.hidden.size(); ++i) {
      critic_.push_back(register_module("critic" + std::to_string(i), torch::nn::Linear(c_in, opts.hidden[i])));
      c_in = opts.hidden[i];
    }
  }
  const int64_t v_in = separate_critic_ ? (opts.hidden.empty() ? spec.obs_size() : opts.hidden.back()) : -1;
  core_ = make_core(core_options(opts, in));
  if (core_) {
    register_module("core", core_);
    in = core_->output_size();
  }
  sparse_input_ = opts.sparse_input && spec.obs_uint8 && !cnn_ && !torso_.empty() &&
                  (!separate_critic_ || !critic_.empty());
  int64_t out = spec.discrete ? spec.num_actions : spec.action_dim;
  pi_ = register_module("pi", torch::nn::Linear(in, out));
  v_ = register_module("v", torch::nn::Linear(v_in > 0 ? v_in : in, 1));
  torch::NoGradGuard g;
  if (opts.init == "orthogonal") {
    auto ortho = [](torch::nn::Linear& l, double gain) {
      torch::nn::init::orthogonal_(l->weight, gain);
      l->bias.zero_();
    };
    for (auto* layers : {&torso_, &critic_})
      for (auto& l : *layers) ortho(l, std::sqrt(2.0));
    ortho(pi_, 0.01);
    ortho(v_, 1.0);
  } else {
    // Near-uniform initial policy: small output weights (as in common PPO/IMPALA set-ups).
    pi_->weight.mul_(0.01);
    pi_->bias.zero_();
  }
  if (!spec.discrete) log_std_ = register_parameter("log_std", torch::full({out}, opts.log_std_init));
  obs_shift_ = register_buffer("obs_shift", torch::zeros({norm}));
  obs_scale_ = register_buffer("obs_scale", torch::ones({norm}));
  value_shift_ = register_buffer("value_shift", torch::zeros({1}));
  value_scale_ = register_buffer("value_scale", torch::ones({1}));
}

torch::Tensor PolicyImpl::normalize_obs(const torch::Tensor& obs) const {
  if (!normalizes_obs()) return obs;
  auto flat = obs.reshape({-1, obs_shift_.size(0)});
  return ((flat - obs_shift_) * obs_scale_).clamp_(-obs_clip_, obs_clip_).view(obs.sizes());
}

torch::Tensor PolicyImpl::input(const torch::Tensor& raw) const {
  // uint8 pixels travel as uint8 up to here and become floats in [0, 1] on the policy's device.
  return raw.scalar_type() == torch::kUInt8 ? raw.to(torch::kFloat32).mul_(1.0 / 255) : normalize_obs(raw);
}

torch::Tensor PolicyImpl::torso(const torch::Tensor& obs) {
  if (cnn_) {  // [..., C, H, W] -> [N, C, H, W] -> [..., features]
    std::vector<int64_t> lead(obs.sizes().begin(), obs.sizes().end() - obs_rank_);
    auto h = cnn_(obs.reshape({-1, obs.size(-3), obs.size(-2), obs.size(-1)}));
    lead.push_back(h.size(-1));
    return h.reshape(lead);
  }
  // the MLP takes images flattened: [..., C, H, W] -> [..., C*H*W]
  return mlp(torso_, sparse_ || obs_rank_ == 1 ? obs : obs.flatten(obs.dim() - obs_rank_));
}

torch::Tensor PolicyImpl::value_of(const torch::Tensor& h, const torch::Tensor& obs) {
  torch::Tensor vh = h;
  if (separate_critic_) {
    // The separate critic: its own MLP over the observations as the torso sees them (input():
    // pixels scaled, float observations normalised; flattened here).
    vh = mlp(critic_, sparse_ || obs_rank_ == 1 ? obs : obs.flatten(obs.dim() - obs_rank_));
  }
  // In return units (PopArt keeps the head's output normalised): exact 1 * v + 0 without it.
  return torch::addcmul(value_shift_, v_(vh).squeeze(-1), value_scale_);
}

PolicyOutput PolicyImpl::heads(const torch::Tensor& h, const torch::Tensor& obs) {
  torch::Tensor head = pi_(h);
  if (!spec_.discrete) head = torch::cat({head, log_std_.expand_as(head)}, -1);
  return {head, value_of(h, obs)};
}

torch::Tensor PolicyImpl::py_obs(const torch::Tensor& raw) const {
  if (raw.scalar_type() == torch::kUInt8) return raw.to(torch::kFloat32).mul_(1.0 / 255);
  return normalize_obs(raw.to(torch::kFloat32));
}

torch::Tensor PolicyImpl::py_value(const torch::Tensor& v) const { return torch::addcmul(value_shift_, v, value_scale_); }

PolicyOutput PolicyImpl::forward(const torch::Tensor& obs) {
  if (py_) {  // [..., obs...] as one batch of steps from a zero state
    TORCH_CHECK(py_->state_size() == 0, "Policy::forward is for feed-forward policies; use step() or unroll()");
    std::vector<int64_t> lead(obs.sizes().begin(), obs.sizes().end() - obs_rank_);
    std::vector<int64_t> flat{-1};
    flat.insert(flat.end(), obs.sizes().end() - obs_rank_, obs.sizes().end());
    torch::Tensor x = obs.reshape(flat);
    torch::Tensor state = torch::zeros({x.size(0), 0}, x.options().dtype(torch::kFloat32));
    PolicyOutput o = step(x, torch::zeros({x.size(0)}, state.options()), state);
    std::vector<int64_t> dshape = lead;
    dshape.push_back(o.dist.size(-1));
    return {o.dist.reshape(dshape), o.value.reshape(lead)};
  }
  TORCH_CHECK(!core_, "Policy::forward is for feed-forward policies; use step() or unroll() with a recurrent core");
  if (sparse_ok(obs)) return sparse_pass(obs, torch::Tensor(), torch::Tensor());
  const auto x = input(obs);
  if (obs_rank_ != 1 || x.dim() <= 2) return heads(torso(x), x);
  // [..., D] -> [N, D]: the linear layers then run on 2-D inputs, one addmm each (autograd records
  // one node, not the matmul, view and bias add of a 3-D input), as act() computes them.
  std::vector<int64_t> lead(x.sizes().begin(), x.sizes().end() - 1);
  const auto xf = x.reshape({-1, x.size(-1)});
  return unflatten(heads(torso(xf), xf), lead);
}

PolicyOutput PolicyImpl::unflatten(const PolicyOutput& o, std::vector<int64_t> lead) {
  auto value = o.value.view(lead);
  lead.push_back(o.dist.size(-1));
  return {o.dist.view(lead), value};
}

torch::Tensor PolicyImpl::initial_state(int64_t B) const {
  if (py_) return py_->state_size() > 0 ? torch::zeros({B, py_->state_size()}, value_shift_.options()) : torch::Tensor();
  return core_ ? core_->initial_state(B, torch::TensorOptions().device(pi_->weight.device())) : torch::Tensor();
}

PolicyOutput PolicyImpl::unroll(const torch::Tensor& obs, const torch::Tensor& is_init, const torch::Tensor& state0) {
  if (py_) {
    const auto f = value_shift_.options();
    torch::Tensor s0 = state0.defined() && py_->state_size() > 0 ? state0 : torch::zeros({obs.size(1), py_->state_size()}, f);
    PolicyOutput o = py_->unroll(py_obs(obs), is_init.to(torch::kFloat32), s0);
    return {o.dist, py_value(o.value)};
  }
  if (sparse_ok(obs)) return sparse_pass(obs, is_init, state0);
  const auto x = input(obs);  // [T, B, obs...]
  if (obs_rank_ != 1) {
    auto h = torso(x);
    if (core_) h = core_->sequence(h, state0, is_init).first;
    return heads(h, x);
  }
  const int64_t T = x.size(0), B = x.size(1);
  const auto xf = x.reshape({T * B, x.size(-1)});  // as forward(): 2-D linear layers
  auto h = torso(xf);
  if (core_) h = core_->sequence(h.view({T, B, h.size(-1)}), state0, is_init).first.flatten(0, 1);
  return unflatten(heads(h, xf), {T, B});
}

PolicyOutput PolicyImpl::step(const torch::Tensor& obs, const torch::Tensor& is_init, torch::Tensor& state) {
  if (py_) {
    torch::Tensor s = state.defined() && py_->state_size() > 0 ? state
                                                                : torch::zeros({obs.size(0), py_->state_size()}, value_shift_.options());
    PolicyOutput o = py_->step(py_obs(obs), is_init.to(torch::kFloat32), s);
    if (py_->state_size() > 0) state = s;
    return {o.dist, py_value(o.value)};
  }
  const auto x = input(obs);
  auto h = torso(x);
  if (core_) {
    auto [y, next] = core_->step(h, state, is_init);
    h = y;
    state = next;
  }
  return heads(h, x);
}

ActBuffers PolicyImpl::act_buffers(int64_t B) const {
  if (py_) {  // act() returns the module's rows in head: logits, or mean ++ log-std
    ActBuffers b;
    b.init = torch::zeros({B}, value_shift_.options());
    b.head = torch::zeros({B, spec_.discrete ? spec_.num_actions : 2 * spec_.action_dim}, value_shift_.options());
    return b;
  }
  auto f = torch::TensorOptions().dtype(torch::kFloat32).device(pi_->weight.device());
  ActBuffers b;
  b.init = torch::zeros({B}, f);
  if (spec_.obs_uint8) {
    std::vector<int64_t> shape{B};
    shape.insert(shape.end(), spec_.obs_shape.begin(), spec_.obs_shape.end());
    b.pixels = torch::empty(shape, f);
  }
  if (!cnn_)
    for (auto& l : torso_) b.h.push_back(torch::empty({B, l->weight.size(0)}, f));
  if (core_) b.core = core_->act_buffers(B);
  if (normalizes_obs() && !cnn_) b.normed = torch::empty({B, obs_shift_.size(0)}, f);
  b.head = torch::empty({B, pi_->weight.size(0)}, f);
  return b;
}

const torch::Tensor& PolicyImpl::act(const torch::Tensor& raw, torch::Tensor& state, ActBuffers& buf) {
  torch::NoGradGuard no_grad;  // out= ops refuse inputs that require grad while grad mode is on
  if (py_) {  // whole distribution rows; the state advanced in the caller's tensor
    torch::Tensor s = state;
    PolicyOutput o = step(raw, buf.init, s);
    if (py_->state_size() > 0) state.copy_(s);
    buf.head = acting_rows(o).to(torch::kFloat32).contiguous();
    return buf.head;
  }
  torch::Tensor obs = raw;
  if (raw.scalar_type() == torch::kUInt8) obs = buf.pixels.copy_(raw).mul_(1.0 / 255);
  torch::Tensor h;
  if (cnn_) {
    h = torso(raw.scalar_type() == torch::kUInt8 ? obs : normalize_obs(obs));  // pixels: scaled above
  } else {
    h = obs_rank_ > 1 ? obs.flatten(1) : obs;
    if (normalizes_obs()) h = at::sub_out(buf.normed, h, obs_shift_).mul_(obs_scale_).clamp_(-obs_clip_, obs_clip_);
    for (size_t i = 0; i < torso_.size(); ++i) {
      at::addmm_out(buf.h[i], torso_[i]->bias, h, torso_[i]->weight.t());
      h = relu_ ? buf.h[i].relu_() : buf.h[i].tanh_();
    }
  }
  if (core_) h = core_->act(h, state, buf.init, buf.core);
  at::addmm_out(buf.head, pi_->bias, h, pi_->weight.t());
  if (act_q_) buf.head.sub_(buf.head.mean(-1, true)).add_(value_of(h, input(raw)).unsqueeze(-1));
  return buf.head;
}

torch::Tensor PolicyImpl::acting_rows(const PolicyOutput& out) const {
  return act_q_ ? out.value.unsqueeze(-1) + out.dist - out.dist.mean(-1, true) : out.dist;
}

torch::Tensor PolicyImpl::value_after(const torch::Tensor& obs, const torch::Tensor& state) {
  if (py_) {
    torch::Tensor s = state.defined() ? state.clone() : state;
    return step(obs, torch::zeros({obs.size(0)}, value_shift_.options()), s).value;
  }
  const auto x = input(obs);
  if (separate_critic_) return value_of(torch::Tensor(), x);  // the policy's torso is not needed
  auto h = torso(x);
  if (core_) h = core_->step(h, state, torch::zeros({obs.size(0)}, h.options())).first;
  return value_of(h, x);
}

}  // namespace mpirl::models
