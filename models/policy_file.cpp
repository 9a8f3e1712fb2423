#include "models/policy_file.h"

#include <sstream>
#include <vector>

#include "core/run_dir.h"

namespace mpirl::models {

nlohmann::json policy_spec_json(const envs::EnvSpec& spec, const ModelOptions& opts) {
  nlohmann::json action = spec.discrete ? nlohmann::json{{"type", "discrete"}, {"n", spec.num_actions}}
                                        : nlohmann::json{{"type", "box"},
                                                         {"dim", spec.action_dim},
                                                         {"low", spec.action_low},
                                                         {"high", spec.action_high}};
  const CoreOptions defaults;  // the core options the config does not set
  const std::string encoder = resolve_encoder(opts.encoder, spec.obs_shape);
  const int64_t torso_out = encoder == "nature_cnn"   ? 512
                            : encoder == "impala_cnn" ? 256
                            : opts.hidden.empty()     ? spec.obs_size()
                                                      : opts.hidden.back();
  return {{"format", "mpirl-policy"},
          {"version", kPolicyFileVersion},
          {"env",
           {{"id", spec.id},
            {"obs_shape", spec.obs_shape},
            {"obs_dtype", spec.obs_uint8 ? "uint8" : "float32"},
            {"action", action},
            {"max_episode_steps", spec.max_episode_steps}}},
          {"model",
           {{"encoder", encoder},
            {"hidden", opts.hidden},
            {"activation", opts.activation},
            {"core", opts.core},
            {"core_size", opts.core_size},
            {"core_state", opts.core_state},
            {"ffm_context", defaults.ffm_context},
            {"state_size", core_state_size(core_options(opts, torso_out))},
            {"dist_size", spec.dist_size()}}}};
}

void save_policy(const std::string& dir, Policy& policy, const envs::EnvSpec& spec, const ModelOptions& opts) {
  // A CPU copy, so that `mpirl eval` and Python load it anywhere.
  std::vector<float> flat(size_t(num_params(policy)));
  write_flat(policy, flat.data());
  Policy cpu(spec, opts);
  read_flat(cpu, flat.data());
  std::ostringstream os;
  torch::save(cpu, os);
  write_json_atomic(dir + "/policy.json", policy_spec_json(spec, opts));
  write_file_atomic(dir + "/model.pt", os.str());
}

}  // namespace mpirl::models
