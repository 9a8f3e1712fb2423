#include "models/policy_file.h"

#include <sstream>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "core/run_dir.h"

namespace mpirl::models {

nlohmann::json policy_spec_json(const envs::EnvSpec& spec, const ModelOptions& opts, int64_t state_size) {
  nlohmann::json action = spec.discrete ? nlohmann::json{{"type", "discrete"}, {"n", spec.num_actions}}
                                        : nlohmann::json{{"type", "box"},
                                                         {"dim", spec.action_dim},
                                                         {"low", spec.action_low},
                                                         {"high", spec.action_high}};
  nlohmann::json head = {{"format", "mpirl-policy"},
                         {"version", kPolicyFileVersion},
                         {"env",
                          {{"id", spec.id},
                           {"obs_shape", spec.obs_shape},
                           {"obs_dtype", spec.obs_uint8 ? "uint8" : "float32"},
                           {"action", action},
                           {"max_episode_steps", spec.max_episode_steps}}}};
  // Keys every policy has; a Python module's encoder/core keys would not build it: none recorded.
  nlohmann::json model = {{"obs_norm", opts.obs_norm && !spec.obs_uint8},
                          {"obs_norm_clip", opts.obs_norm_clip},
                          {"dist_size", spec.dist_size()}};
  if (!opts.python.empty()) {
    model["encoder"] = "python";
    model["python"] = opts.python;
    model["state_size"] = state_size >= 0 ? state_size : python_state_size(spec, opts);
  } else {
    const CoreOptions defaults;  // the core options the config does not set
    const std::string encoder = resolve_encoder(opts.encoder, spec.obs_shape);
    const int64_t torso_out = encoder_out_size(encoder, opts.hidden, spec.obs_size());
    model.update({{"encoder", encoder},
                  {"hidden", opts.hidden},
                  {"activation", opts.activation},
                  {"core", opts.core},
                  {"core_size", opts.core_size},
                  {"core_state", opts.core_state},
                  {"ffm_context", defaults.ffm_context},
                  {"state_size", core_state_size(core_options(opts, torso_out))},
                  {"critic", opts.critic}});
  }
  head["model"] = std::move(model);
  return head;
}

void save_policy(const std::string& dir, Policy& policy, const envs::EnvSpec& spec, const ModelOptions& opts,
                 const std::string& model_file) {
  // A CPU copy, so that `mpirl eval` and Python load it anywhere.
  std::vector<float> flat(size_t(num_params(policy)));
  write_flat(policy, flat.data());
  Policy cpu(spec, opts);
  read_flat(cpu, flat.data());
  std::ostringstream os;
  torch::save(cpu, os);
  write_json_atomic(dir + "/policy.json", policy_spec_json(spec, opts, policy->state_size()));
  write_file_atomic(dir + "/" + model_file, os.str());
}

namespace {
// Module::load's walk (parameters, buffers, then each child's own archive), with the rules above.
void load_module(torch::nn::Module& m, torch::serialize::InputArchive& ar, const std::string& prefix,
                 const std::string& what) {
  for (auto& p : m.named_parameters(/*recurse=*/false)) {
    const std::string name = prefix + p.key();
    torch::Tensor t;
    if (!ar.try_read(p.key(), t))
      throw Error(fmt::format("{}: no parameter '{}': written for another model (config [model] or env spaces)", what,
                              name));
    if (t.sizes() != p.value().sizes())
      throw Error(fmt::format("{}: parameter '{}' has shape [{}], this model's is [{}]", what, name,
                              fmt::join(t.sizes(), ", "), fmt::join(p.value().sizes(), ", ")));
    if (t.scalar_type() != p.value().scalar_type())
      throw Error(fmt::format("{}: parameter '{}' is {}, this model's is {} (not written by mpirl)", what, name,
                              c10::toString(t.scalar_type()), c10::toString(p.value().scalar_type())));
    p.value().copy_(t);
  }
  for (auto& b : m.named_buffers(/*recurse=*/false)) {
    const std::string name = prefix + b.key();
    torch::Tensor t;
    if (!ar.try_read(b.key(), t, /*is_buffer=*/true)) {
      if (b.value().numel() > 0 && (name == "obs_shift" || name == "obs_scale"))
        throw Error(fmt::format("{}: no observation statistics ('{}') although model.obs_norm is on: trained "
                                "without observation normalisation? set model.obs_norm = false",
                                what, name));
      continue;  // an older file: the identity value mapping it was trained with
    }
    if (t.sizes() != b.value().sizes())
      throw Error(fmt::format("{}: '{}' has shape [{}], this model's is [{}] (model.obs_norm differs?)", what, name,
                              fmt::join(t.sizes(), ", "), fmt::join(b.value().sizes(), ", ")));
    if (t.scalar_type() != b.value().scalar_type())
      throw Error(fmt::format("{}: '{}' is {}, this model's is {} (not written by mpirl)", what, name,
                              c10::toString(t.scalar_type()), c10::toString(b.value().scalar_type())));
    b.value().copy_(t);
  }
  for (auto& c : m.named_children()) {
    if (!c.value()->is_serializable()) continue;  // Module::save skips these too
    torch::serialize::InputArchive sub;
    if (!ar.try_read(c.key(), sub))
      throw Error(fmt::format("{}: no module '{}{}': written for another model (config [model] or env spaces)", what,
                              prefix, c.key()));
    load_module(*c.value(), sub, prefix + c.key() + ".", what);
  }
}
}  // namespace

void load_policy_archive(Policy& policy, torch::serialize::InputArchive& ar, const std::string& what) {
  torch::NoGradGuard g;
  load_module(*policy, ar, "", what);
}

namespace {
// A LibTorch archive file read onto the CPU; errors name the file.
void read_archive(torch::serialize::InputArchive& ar, const std::string& path) {
  try {
    ar.load_from(path, torch::Device(torch::kCPU));
  } catch (const std::exception& e) {
    throw Error(fmt::format("cannot read '{}': {}", path, e.what()));
  }
}
}  // namespace

void load_policy_file(Policy& policy, const std::string& path) {
  torch::serialize::InputArchive ar;
  read_archive(ar, path);
  load_policy_archive(policy, ar, path);
}

namespace {
std::string first_nonfinite(torch::serialize::InputArchive& ar, const std::string& prefix) {
  for (const auto& key : ar.keys()) {
    torch::Tensor t;
    if (ar.try_read(key, t)) {
      if (!t.is_floating_point()) continue;
      const int64_t bad = (~torch::isfinite(t)).sum().item<int64_t>();
      if (bad > 0) return fmt::format("{}{} ({} of {} values)", prefix, key, bad, t.numel());
      continue;
    }
    torch::serialize::InputArchive child;
    if (!ar.try_read(key, child)) continue;
    if (auto r = first_nonfinite(child, prefix + key + "."); !r.empty()) return r;
  }
  return "";
}
}  // namespace

std::string nonfinite_policy_tensor(const std::string& path, const std::string& sub) {
  torch::serialize::InputArchive ar;
  read_archive(ar, path);
  if (sub.empty()) return first_nonfinite(ar, "");
  torch::serialize::InputArchive child;
  if (!ar.try_read(sub, child)) throw Error(fmt::format("'{}' holds no '{}'", path, sub));
  return first_nonfinite(child, sub + ".");
}

}  // namespace mpirl::models
