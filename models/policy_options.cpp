// The [model] section read into ModelOptions, checked at start, and the state size it gives
// (models/policy.h, models/state_size.h).
#include "models/policy.h"

#include <fmt/format.h>

#include "core/error.h"

namespace mpirl::models {

CoreOptions core_options(const ModelOptions& o, int64_t input) {
  CoreOptions c;
  c.kind = o.core;
  c.input = input;
  c.hidden = o.core_size;
  c.state = o.core_state;
  return c;
}

void validate_model_config(const Config& cfg, const envs::EnvSpec& spec) {
  if (cfg.learner.algo == "r2d2" && !spec.discrete)
    throw ConfigError(fmt::format("config key 'learner.algo' = \"r2d2\": expected an env with discrete actions (env "
                                  "'{}' has a Box of {}); R2D2 takes the largest of a finite set of Q-values",
                                  spec.id, spec.action_dim));
  if (!cfg.model.python.empty()) {
    if (cfg.learner.value_norm == "popart")
      throw ConfigError(fmt::format("config key 'model.python' = \"{}\" with learner.value_norm = \"popart\": PopArt "
                                    "rescales the built-in value head's weights, which a Python module does not have; "
                                    "set learner.value_norm = \"none\"",
                                    cfg.model.python));
    PythonModel(spec, model_options(cfg)).check();  // rank 0, before any rank trains
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
  o.act_q = cfg.learner.algo == "r2d2" && cfg.r2d2.initial_priority == "actor";
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
