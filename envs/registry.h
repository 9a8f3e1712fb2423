#pragma once
// Environments by id: the built-ins, and Python envs ("gym:<id>", "py:<module>:<factory>", see
// envs/python/py_vector_env.h), which exist only as vector envs.
#include <memory>
#include <string>
#include <vector>

#include "core/config.h"
#include "envs/env.h"
#include "envs/vector_env.h"

namespace mpirl::envs {

// Creates built-in env `id` seeded with `seed`; throws mpirl::Error naming the id and the known ones.
std::unique_ptr<Env> make_env(const std::string& id, uint64_t seed, const EnvOptions& opts = {});
// E envs of the configured env.id (built-in or Python), seeded from `seed`.
std::unique_ptr<VectorEnv> make_vector_env(const Config& cfg, int num_envs, uint64_t seed);
// Every registered built-in id, sorted.
std::vector<std::string> env_ids();

// What the config says about envs: the options the built-ins read (Synthetic's numbers, MinAtar's
// env.kwargs; the others refuse kwargs), and the spec of the
// configured env (builds one; throws ConfigError naming env.id for an unknown id, a Python env
// that cannot be made, or an unsupported space).
EnvOptions env_options(const Config& cfg);
EnvSpec env_spec(const Config& cfg);

}  // namespace mpirl::envs
