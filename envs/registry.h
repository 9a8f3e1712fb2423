#pragma once
// Built-in environments by id.
#include <memory>
#include <string>
#include <vector>

#include "envs/env.h"

namespace mpirl::envs {

// Creates env `id` seeded with `seed`; throws mpirl::Error naming the id and the known ones.
std::unique_ptr<Env> make_env(const std::string& id, uint64_t seed, const EnvOptions& opts = {});
// Every registered id, sorted.
std::vector<std::string> env_ids();

}  // namespace mpirl::envs
