// policy_dump OUT_DIR: for every encoder x core x action space (and a few extra cases) builds a
// models::Policy with a fixed seed, saves it as a run does (config.toml by create_run_dir,
// model.pt and policy.json by models::save_policy: the writers a run uses) in OUT_DIR/<case>/,
// runs fixed inputs through it and saves inputs and outputs to OUT_DIR/<case>/io.pt (a dict of
// tensors, torch::pickle_save: Python's torch.load reads it). tests/policy/test_policy_parity.py
// rebuilds each policy with python/mpirl_policy and compares.
//
// io.pt: obs [T, B, obs...] (float32 or uint8), is_init [T, B], state0 [B, S];
//   unroll_dist/unroll_value: unroll(obs, is_init, state0);
//   step_dist/step_value [T, ...] and step_state [T, B, S]: step() from state0, t = 0..T-1;
//   forward_dist/forward_value (feed-forward only): forward(obs);
//   greedy_actions [T, B] int64 or [T, B, A]: models::Acting (the actor's path) with greedy
//   actions from the zero state.
//
// twin.pt (the mlp cases: issue 42's built-in twins): the same policy in float64, a fixed loss
// L = mean(dist * w_dist) + mean((value - target)^2) on unroll(obs, is_init, state0), its value
// and the gradient of every parameter (grad.<name>), then K = 20 Adam updates (lr 1e-3) on K
// fixed batches (batch_obs [K, T, B, obs...], batch_init, batch_state0, batch_target), the loss
// before each update (losses [K]) and the parameters after the last (final.<name>).
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <torch/torch.h>

#include "core/config.h"
#include "core/run_dir.h"
#include "models/acting.h"
#include "models/policy.h"
#include "models/policy_file.h"

using namespace mpirl;

namespace {

struct Case {
  std::string name, encoder, core;
  bool discrete;
  std::vector<int64_t> obs_shape;
  bool uint8;
  std::string activation = "tanh";
  int64_t num_actions = 5;  // discrete
  std::string env_id = "ParityTest";
  bool obs_norm = false;  // model.obs_norm (clip 1.5, so that clipping happens) and non-trivial
                          // normalisation buffers: obs shift/scale and PopArt's value shift/scale
  std::string critic = "shared";  // model.critic
};

std::vector<Case> cases() {
  std::vector<Case> out;
  for (std::string enc : {"mlp", "nature_cnn", "impala_cnn"})
    for (std::string core : {"none", "gru", "lstm", "lru", "ssm", "mingru", "ffm"})
      for (bool discrete : {true, false}) {
        std::vector<int64_t> shape = enc == "mlp" ? std::vector<int64_t>{7}
                                     : enc == "nature_cnn" ? std::vector<int64_t>{3, 36, 36}
                                                           : std::vector<int64_t>{3, 9, 9};
        out.push_back({fmt::format("{}-{}-{}", enc, core, discrete ? "discrete" : "box"), enc, core, discrete,
                       shape, enc != "mlp"});
      }
  // The MLP on uint8 images (flattened) with ReLU; "auto" resolving to each kind.
  out.push_back({"mlp_pixels_relu-lru-discrete", "mlp", "lru", true, {2, 5, 6}, true, "relu"});
  out.push_back({"auto_vector-ffm-box", "auto", "ffm", false, {5}, false});
  // The MinAtar paper's CNN, fed-forward (R2D2's MinAtar config) and recurrent.
  out.push_back({"minatar_cnn-none-discrete", "minatar_cnn", "none", true, {4, 10, 10}, true});
  out.push_back({"minatar_cnn-lru-discrete", "minatar_cnn", "lru", true, {3, 7, 9}, false});
  out.push_back({"auto_small_image-gru-discrete", "auto", "gru", true, {1, 10, 10}, true});
  out.push_back({"auto_large_image-none-box", "auto", "none", false, {4, 40, 40}, true});
  // CartPole-v1's spaces (the config's default env): `mpirl export` can rebuild them without policy.json.
  out.push_back({"cartpole-mingru-discrete", "auto", "mingru", true, {4}, false, "tanh", 2, "CartPole-v1"});
  // Observation normalisation (the actor's allocation-free path too) and PopArt's value mapping.
  out.push_back({"obsnorm-none-discrete", "mlp", "none", true, {7}, false, "tanh", 5, "ParityTest", true});
  out.push_back({"obsnorm-gru-box", "mlp", "gru", false, {7}, false, "relu", 5, "ParityTest", true});
  out.push_back({"obsnorm_image-lru-discrete", "impala_cnn", "lru", true, {3, 9, 9}, false, "tanh", 5, "ParityTest", true});
  out.push_back({"obsnorm_pixels-none-discrete", "mlp", "none", true, {2, 5, 6}, true, "tanh", 5, "ParityTest", true});
  // The value's own MLP (model.critic = "separate"): on normalised observations, and on pixels.
  out.push_back({"critic-none-box", "mlp", "none", false, {7}, false, "tanh", 5, "ParityTest", true, "separate"});
  out.push_back({"critic_pixels-none-discrete", "mlp", "none", true, {2, 5, 6}, true, "relu", 5, "ParityTest", false,
                 "separate"});
  return out;
}

// A copy of `policy` (same parameters and buffers) in float64.
models::Policy float64_copy(const models::Policy& policy, const envs::EnvSpec& spec, const models::ModelOptions& opts) {
  models::Policy p(spec, opts);
  torch::NoGradGuard g;
  auto src = policy->named_parameters(), dst = p->named_parameters();
  for (auto& kv : src) dst[kv.key()].copy_(kv.value());
  auto srcb = policy->named_buffers(), dstb = p->named_buffers();
  for (auto& kv : srcb) dstb[kv.key()].copy_(kv.value());
  p->to(torch::kFloat64);
  return p;
}

torch::Tensor twin_loss(models::Policy& p, const torch::Tensor& obs, const torch::Tensor& is_init,
                        const torch::Tensor& state0, const torch::Tensor& w_dist, const torch::Tensor& target) {
  auto u = p->unroll(obs, is_init, state0);
  return (u.dist * w_dist).mean() + (u.value - target).pow(2).mean();
}

void twin_dump(const models::Policy& policy, const envs::EnvSpec& spec, const models::ModelOptions& opts,
               const std::string& dir, int64_t seed, int64_t T, int64_t B) {
  models::Policy p = float64_copy(policy, spec, opts);
  p->train();
  torch::manual_seed(seed + 7919);
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  const int64_t S = p->state_size(), K = 20;
  auto obs_shape = [&](std::vector<int64_t> lead) {
    lead.insert(lead.end(), spec.obs_shape.begin(), spec.obs_shape.end());
    return lead;
  };
  auto inits = [&](std::vector<int64_t> shape) {  // resets inside the sequences, and at t = 0 of one
    torch::Tensor i = (torch::rand(shape) < 0.3).to(torch::kFloat32);
    i.select(-2, 0).select(-1, 1).fill_(1);
    return i;
  };
  c10::Dict<std::string, at::Tensor> tw;
  torch::Tensor obs = torch::randn(obs_shape({T, B}), f64), is_init = inits({T, B});
  torch::Tensor state0 = torch::randn({B, S}, f64) * 0.5;
  torch::Tensor w_dist = torch::randn({T, B, spec.discrete ? spec.num_actions : 2 * spec.action_dim}, f64);
  torch::Tensor target = torch::randn({T, B}, f64);
  for (auto& kv : p->named_parameters()) kv.value().mutable_grad() = torch::Tensor();
  torch::Tensor loss = twin_loss(p, obs, is_init, state0, w_dist, target);
  loss.backward();
  for (auto& kv : p->named_parameters())
    tw.insert("grad." + kv.key(), kv.value().grad().defined() ? kv.value().grad().clone() : torch::zeros_like(kv.value()));
  {
    torch::NoGradGuard g;
    auto u = p->unroll(obs, is_init, state0);
    tw.insert("unroll_dist", u.dist);
    tw.insert("unroll_value", u.value);
  }
  tw.insert("obs", obs);
  tw.insert("is_init", is_init);
  tw.insert("state0", state0);
  tw.insert("w_dist", w_dist);
  tw.insert("target", target);
  tw.insert("loss", loss.detach());

  torch::Tensor bo = torch::randn(obs_shape({K, T, B}), f64), bi = inits({K, T, B});
  torch::Tensor bs = torch::randn({K, B, S}, f64) * 0.5, bt = torch::randn({K, T, B}, f64);
  torch::optim::Adam opt(p->parameters(), torch::optim::AdamOptions(1e-3));
  std::vector<double> losses;
  for (int64_t k = 0; k < K; ++k) {
    opt.zero_grad();
    torch::Tensor l = twin_loss(p, bo[k], bi[k], bs[k], w_dist, bt[k]);
    l.backward();
    opt.step();
    losses.push_back(l.item<double>());
  }
  tw.insert("batch_obs", bo);
  tw.insert("batch_init", bi);
  tw.insert("batch_state0", bs);
  tw.insert("batch_target", bt);
  tw.insert("losses", torch::tensor(losses, f64));
  for (auto& kv : p->named_parameters()) tw.insert("final." + kv.key(), kv.value().detach().clone());
  const std::vector<char> bytes = torch::pickle_save(c10::IValue(tw));
  std::ofstream(dir + "/twin.pt", std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
}

void run_case(const Case& c, const std::string& out_dir, int64_t seed) {
  const int64_t T = 6, B = 3;
  Config cfg = load_config("", {fmt::format("model.encoder=\"{}\"", c.encoder),
                                fmt::format("model.core=\"{}\"", c.core), "model.hidden=[16, 8]",
                                fmt::format("model.activation=\"{}\"", c.activation), "model.core_size=12",
                                "model.core_state=6", fmt::format("run.out_dir=\"{}\"", out_dir),
                                fmt::format("run.name=\"{}\"", c.name),
                                fmt::format("model.obs_norm={}", c.obs_norm ? "true" : "false"),
                                "model.obs_norm_clip=1.5", fmt::format("model.critic=\"{}\"", c.critic)});
  const std::string dir = create_run_dir(cfg);  // config.toml, as a run writes it
  envs::EnvSpec spec;
  spec.id = c.env_id;
  spec.obs_shape = c.obs_shape;
  spec.obs_uint8 = c.uint8;
  spec.discrete = c.discrete;
  spec.num_actions = c.discrete ? c.num_actions : 0;
  spec.action_dim = c.discrete ? 0 : 3;
  if (!c.discrete) {
    spec.action_low = {-1, -2, -3};
    spec.action_high = {1, 2, 3};
  }
  const auto opts = models::model_options(cfg);

  torch::manual_seed(seed);
  models::Policy policy(spec, opts);
  {  // Outputs of a useful size: undo the heads' 0.01 init scale, and a log-std per dimension.
    torch::NoGradGuard g;
    for (auto& p : policy->named_parameters()) {
      if (p.key() == "pi.weight") p.value().mul_(100);
      if (p.key() == "log_std") p.value().add_(torch::randn_like(p.value()) * 0.3);
    }
    if (c.obs_norm) {  // as a learner's normalisers leave them (uint8 observations have none)
      policy->obs_shift().copy_(torch::randn_like(policy->obs_shift()) * 0.5);
      policy->obs_scale().copy_(torch::rand_like(policy->obs_scale()) + 0.5);
      policy->value_shift().fill_(3.25);
      policy->value_scale().fill_(7.5);
    }
  }
  policy->eval();
  models::save_policy(dir, policy, spec, opts);  // model.pt and policy.json, as learner 0 writes them

  std::vector<int64_t> shape{T, B};
  shape.insert(shape.end(), c.obs_shape.begin(), c.obs_shape.end());
  torch::Tensor obs = c.uint8 ? torch::randint(0, 256, shape, torch::kUInt8) : torch::randn(shape);
  // Resets in the middle of the sequence and one at its start.
  torch::Tensor is_init = (torch::rand({T, B}) < 0.3).to(torch::kFloat32);
  is_init[0][1] = 1;
  is_init[3][0] = 1;
  const int64_t S = policy->state_size();
  torch::Tensor state0 = torch::randn({B, S}) * 0.5;

  if (c.encoder == "mlp" && !c.uint8) twin_dump(policy, spec, opts, dir, seed, T, B);

  torch::NoGradGuard no_grad;
  c10::Dict<std::string, at::Tensor> io;
  io.insert("obs", obs);
  io.insert("is_init", is_init);
  io.insert("state0", state0);
  auto u = policy->unroll(obs, is_init, state0);
  io.insert("unroll_dist", u.dist);
  io.insert("unroll_value", u.value);
  std::vector<torch::Tensor> dists, values, states;
  torch::Tensor state = state0.clone();
  for (int64_t t = 0; t < T; ++t) {
    auto o = policy->step(obs[t], is_init[t], state);
    dists.push_back(o.dist);
    values.push_back(o.value);
    states.push_back(S > 0 ? state.clone() : torch::zeros({B, 0}));
  }
  io.insert("step_dist", torch::stack(dists));
  io.insert("step_value", torch::stack(values));
  io.insert("step_state", torch::stack(states));
  if (!policy->recurrent()) {
    auto f = policy->forward(obs);
    io.insert("forward_dist", f.dist);
    io.insert("forward_value", f.value);
  }
  models::Acting acting(policy, B, uint64_t(seed));
  std::vector<torch::Tensor> actions;
  torch::Tensor init_bytes = is_init.to(torch::kUInt8).contiguous();
  for (int64_t t = 0; t < T; ++t) {
    torch::Tensor ot = obs[t].contiguous();
    acting.step(models::obs_rows(spec, ot.data_ptr(), B, spec.obs_size()), init_bytes[t].data_ptr<uint8_t>(), 1, {},
                /*greedy=*/true);
    auto* a = c.discrete ? static_cast<void*>(const_cast<int64_t*>(acting.discrete_actions()))
                         : static_cast<void*>(const_cast<float*>(acting.box_actions()));
    actions.push_back(c.discrete ? torch::from_blob(a, {B}, torch::kInt64).clone()
                                 : torch::from_blob(a, {B, spec.action_dim}, torch::kFloat32).clone());
  }
  io.insert("greedy_actions", torch::stack(actions));
  const std::vector<char> bytes = torch::pickle_save(c10::IValue(io));
  std::ofstream(dir + "/io.pt", std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: policy_dump OUT_DIR\n");
    return 2;
  }
  torch::set_num_threads(1);
  int64_t seed = 1000;
  for (const auto& c : cases()) {
    run_case(c, argv[1], seed++);
    std::printf("%s\n", c.name.c_str());
  }
  return 0;
}
