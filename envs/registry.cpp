#include "envs/registry.h"

#include <algorithm>
#include <functional>
#include <map>

#include "envs/builtin.h"
#include "runtime/error.h"

namespace mpirl::envs {
namespace {
using Factory = std::function<std::unique_ptr<Env>(uint64_t, const EnvOptions&)>;
const std::map<std::string, Factory>& registry() {
  static const std::map<std::string, Factory> r = {
      {"CartPole-v1", [](uint64_t s, const EnvOptions&) { return std::make_unique<CartPole>(s); }},
      {"Pendulum-v1", [](uint64_t s, const EnvOptions&) { return std::make_unique<Pendulum>(s); }},
      {"Synthetic", [](uint64_t s, const EnvOptions& o) { return std::make_unique<Synthetic>(s, o); }},
  };
  return r;
}
}  // namespace

std::unique_ptr<Env> make_env(const std::string& id, uint64_t seed, const EnvOptions& opts) {
  auto it = registry().find(id);
  if (it == registry().end())
    throw ConfigError(fmt::format("config key 'env.id' = \"{}\": expected one of \"{}\"", id, fmt::join(env_ids(), "\", \"")));
  return it->second(seed, opts);
}

std::vector<std::string> env_ids() {
  std::vector<std::string> ids;
  for (auto& [k, _] : registry()) ids.push_back(k);
  return ids;
}

}  // namespace mpirl::envs
