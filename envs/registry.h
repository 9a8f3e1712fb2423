#pragma once
// Built-in environments by id.
#include <memory>
#include <string>
#include <vector>

#include "core/config.h"
#include "envs/env.h"

namespace mpirl::envs {

// Creates env `id` seeded with `seed`; throws mpirl::Error naming the id and the known ones.
std::unique_ptr<Env> make_env(const std::string& id, uint64_t seed, const EnvOptions& opts = {});
// Every registered id, sorted.
std::vector<std::string> env_ids();

// What the config says about envs: the options the Synthetic env reads, and the spec of the
// configured env (builds one; throws ConfigError naming env.id for an unknown id).
EnvOptions env_options(const Config& cfg);
EnvSpec env_spec(const Config& cfg);

}  // namespace mpirl::envs
