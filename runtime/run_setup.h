#pragma once
// Translating the config into what the modules take (no role logic here).
#include "envs/env.h"
#include "models/policy.h"
#include "runtime/config.h"
#include "runtime/rollout.h"

namespace mpirl {

envs::EnvOptions env_options(const Config& cfg);
models::ModelOptions model_options(const Config& cfg);
// The env spec of the configured env (builds one env); throws ConfigError for an unknown id.
envs::EnvSpec env_spec(const Config& cfg);
// The sequence layout of the run: T from actor.rollout_len, the recurrent state size from model.
SeqLayout seq_layout(const Config& cfg, const envs::EnvSpec& spec);

}  // namespace mpirl
