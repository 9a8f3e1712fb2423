#include "runtime/run_setup.h"

#include "envs/registry.h"

namespace mpirl {

envs::EnvOptions env_options(const Config& cfg) {
  envs::EnvOptions o;
  o.obs_dim = cfg.env.obs_dim;
  o.num_actions = cfg.env.num_actions;
  o.episode_length = cfg.env.episode_length;
  o.step_cost_us = cfg.env.step_cost_us;
  o.cost_sleep = cfg.env.cost_mode == "sleep";
  return o;
}

models::ModelOptions model_options(const Config& cfg) {
  models::ModelOptions o;
  o.hidden = cfg.model.hidden;
  o.activation = cfg.model.activation;
  o.core = cfg.model.core;
  o.core_size = cfg.model.core_size;
  o.core_state = cfg.model.core_state;
  return o;
}

envs::EnvSpec env_spec(const Config& cfg) { return envs::make_env(cfg.env.id, 0, env_options(cfg))->spec(); }

SeqLayout seq_layout(const Config& cfg, const envs::EnvSpec& spec) {
  auto m = model_options(cfg);
  int64_t torso_out = m.hidden.empty() ? spec.obs_size() : m.hidden.back();
  return SeqLayout(spec, cfg.actor.rollout_len, models::core_state_size(models::core_options(m, torso_out)));
}

}  // namespace mpirl
