#pragma once
// Translating the config into what the modules take (no role logic here).
#include "envs/env.h"
#include "models/policy.h"
#include "runtime/config.h"

namespace mpirl {

envs::EnvOptions env_options(const Config& cfg);
models::ModelOptions model_options(const Config& cfg);
// The env spec of the configured env (builds one env); throws ConfigError for an unknown id.
envs::EnvSpec env_spec(const Config& cfg);

}  // namespace mpirl
