// The [model] section read into ModelOptions, checked at start, and the state size it gives
// (models/policy.h, models/state_size.h).
#include "models/policy.h"

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/r2d2_options.h"

namespace mpirl::models {

CoreOptions core_options(const ModelOptions& o, int64_t input) {
  CoreOptions c;
  c.kind = o.core;
  c.input = input;
  c.hidden = o.core_size;
  c.state = o.core_state;
  return c;
}

namespace {

// learner.value_norm = "popart" with model.python: PopArt (learner/normalizers.h) rescales the
// weight and bias of the layer whose output is the value, so the module must name it value_head
// (an nn.Linear(F, 1)), its value must be that layer's output with nothing after it, and nothing
// else may read value_head. Checked on the module's own step and unroll (the learner's path) by
// four probes, each from the original parameters: bias + 1 and bias - c (c large enough to cross
// any clamp or relu) shift every value by as much, weight x 2 gives 2 v - b and weight x -1 gives
// 2 b - v; and none of them moves dist.
void check_popart_head(PythonModel& m, const envs::EnvSpec& spec, const std::string& file) {
  const std::string where = fmt::format("config key 'model.python' = \"{}\" with learner.value_norm = \"popart\"", file);
  const std::string fix = "name the last layer of the value `self.value_head = nn.Linear(features, 1)`, with the value "
                          "its output squeezed, nothing after it and nothing else reading it, or set "
                          "learner.value_norm = \"none\"";
  torch::Tensor w, b;
  for (auto& [name, t] : m.parameters()) {
    if (name == "value_head.weight") w = t;
    if (name == "value_head.bias") b = t;
  }
  if (!w.defined() || !b.defined())
    throw ConfigError(fmt::format("{}: PopArt rescales the weight and bias of the value's last layer, and the module has "
                                  "no parameter {} (a tensor registered first under another name counts under that "
                                  "name); {}", where,
                                  !w.defined() && !b.defined() ? "value_head.weight or value_head.bias"
                                  : !w.defined()               ? "value_head.weight"
                                                               : "value_head.bias",
                                  fix));
  if (w.dim() != 2 || w.size(0) != 1 || b.dim() != 1 || b.size(0) != 1)
    throw ConfigError(fmt::format("{}: value_head.weight is {} and value_head.bias {}, expected [1, features] and [1] "
                                  "(an nn.Linear(features, 1)); {}", where, w.sizes().vec(), b.sizes().vec(), fix));
  torch::NoGradGuard g;
  const int64_t B = 16;
  std::vector<int64_t> shape{B};
  shape.insert(shape.end(), spec.obs_shape.begin(), spec.obs_shape.end());
  auto gen = at::make_generator<at::CPUGeneratorImpl>(2024);  // not the global RNG: rank 0 builds its policy next
  const auto obs = spec.obs_uint8 ? torch::rand(shape, gen) : torch::randn(shape, gen);
  const auto init = torch::ones({B});
  // The learner reads the value from unroll: a 3-step sequence (a reset at its start and one
  // inside) is probed beside step, its values and dists concatenated after step's.
  const int64_t T = 3;
  std::vector<int64_t> seq_shape{T, B};
  seq_shape.insert(seq_shape.end(), spec.obs_shape.begin(), spec.obs_shape.end());
  const auto seq_obs = spec.obs_uint8 ? torch::rand(seq_shape, gen) : torch::randn(seq_shape, gen);
  auto seq_init = torch::zeros({T, B});
  seq_init[0].fill_(1.0);
  seq_init[2].slice(0, 0, B / 2).fill_(1.0);
  auto run = [&] {
    torch::Tensor state = torch::zeros({B, m.state_size()});
    const auto seq = m.unroll(seq_obs, seq_init, state);
    const auto one = m.step(obs, init, state);
    auto flat = [](const torch::Tensor& a, const torch::Tensor& b) {
      return torch::cat({a.reshape({-1}), b.reshape({-1})}).to(torch::kFloat64);
    };
    return std::make_pair(flat(one.value, seq.value), flat(one.dist, seq.dist));
  };
  const auto w0 = w.clone(), b0 = b.clone();
  const auto base = run();
  const torch::Tensor& v0 = base.first;
  const torch::Tensor& d0 = base.second;
  const double bias = b0.item<double>(), vmax = v0.abs().max().item<double>();
  const double c = 2.0 * (vmax + std::abs(bias)) + 1.0;
  const double tol = 1e-4 * (1.0 + vmax + std::abs(bias) + c), dtol = 1e-5 * (1.0 + d0.abs().max().item<double>());
  std::vector<std::string> off;
  double dist_moved = 0;
  auto probe = [&](const std::string& what, const std::string& want_text, const torch::Tensor& want) {
    const auto out = run();
    w.copy_(w0);
    b.copy_(b0);
    const double dv = (out.first - want).abs().max().item<double>();
    const double dd = (out.second - d0).abs().max().item<double>();
    if (!(dv <= tol))
      off.push_back(fmt::format("{} must give {}, and the value was off by {:.3g} (tolerance {:.3g})", what, want_text,
                                dv, tol));
    dist_moved = std::max(dist_moved, dd);
  };
  b.add_(1.0);
  probe("adding 1 to value_head.bias", "v + 1", v0 + 1.0);
  b.sub_(c);
  probe(fmt::format("subtracting {:.3g} from value_head.bias", c), fmt::format("v - {:.3g}", c), v0 - c);
  w.mul_(2.0);
  probe("doubling value_head.weight", "2 v - b", 2.0 * v0 - bias);
  w.neg_();
  probe("negating value_head.weight", "2 b - v", 2.0 * bias - v0);
  if (!(dist_moved <= dtol))
    off.push_back(fmt::format("changing value_head moved dist by up to {:.3g}: something besides the value reads it",
                              dist_moved));
  if (!off.empty())
    throw ConfigError(fmt::format("{}: the value is not value_head's output alone ({}). PopArt keeps the value in "
                                  "return units only when nothing follows value_head; {}",
                                  where, fmt::join(off, "; "), fix));
}

}  // namespace

void validate_model_config(const Config& cfg, const envs::EnvSpec& spec) {
  if (cfg.learner.algo == "r2d2" && !spec.discrete)
    throw ConfigError(fmt::format("config key 'learner.algo' = \"r2d2\": expected an env with discrete actions (env "
                                  "'{}' has a Box of {}); R2D2 takes the largest of a finite set of Q-values",
                                  spec.id, spec.action_dim));
  if (!cfg.model.python.empty()) {
    PythonModel m(spec, model_options(cfg));
    m.check();  // rank 0, before any rank trains
    if (cfg.learner.value_norm == "popart") check_popart_head(m, spec, cfg.model.python);
    return;
  }
  const std::string encoder = resolve_encoder(cfg.model.encoder, spec.obs_shape);
  if (cfg.model.critic == "separate" && (encoder != "mlp" || cfg.model.core != "none"))
    throw ConfigError(fmt::format("config key 'model.critic' = \"separate\": expected the mlp encoder without a core "
                                  "(encoder \"{}\", core \"{}\"); a recurrent or CNN policy shares its features with "
                                  "the value head",
                                  encoder, cfg.model.core));
}

ModelOptions model_options(const Config& cfg) {
  ModelOptions o;
  o.encoder = cfg.model.encoder;
  o.hidden = cfg.model.hidden;
  o.activation = cfg.model.activation;
  o.core = cfg.model.core;
  o.core_size = cfg.model.core_size;
  o.core_state = cfg.model.core_state;
  o.obs_norm = cfg.model.obs_norm;
  o.obs_norm_clip = cfg.model.obs_norm_clip;
  o.critic = cfg.model.critic;
  o.init = cfg.model.init;
  o.log_std_init = cfg.model.log_std_init;
  o.python = cfg.model.python;
  o.act_q = r2d2_actor_priorities(cfg);
  o.sparse_input = cfg.model.sparse_input;
  return o;
}

int64_t state_size(const Config& cfg, const envs::EnvSpec& spec) {
  auto m = model_options(cfg);
  if (!m.python.empty()) return python_state_size(spec, m);
  const std::string encoder = resolve_encoder(m.encoder, spec.obs_shape);
  const int64_t torso_out = encoder_out_size(encoder, m.hidden, spec.obs_size());
  return core_state_size(core_options(m, torso_out));
}

}  // namespace mpirl::models
