// `mpirl envs`: the built-in envs and their specs.
#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "app/commands.h"
#include "envs/registry.h"

namespace mpirl {

int envs_main() {
  size_t w = 0;
  for (auto& id : envs::env_ids()) w = std::max(w, id.size());
  for (auto& id : envs::env_ids()) {
    auto env = envs::make_env(id, 0);
    const auto& s = env->spec();
    std::string act = s.discrete ? fmt::format("Discrete({})", s.num_actions)
                                 : fmt::format("Box({}, [{}, {}])", s.action_dim, fmt::join(s.action_low, ","),
                                               fmt::join(s.action_high, ","));
    fmt::print("{:<{}}  obs {:<13} action {:<18} max_episode_steps {:<5} {}\n", id, w,
               fmt::format("float32[{}]", fmt::join(s.obs_shape, ",")), act, s.max_episode_steps, s.description);
  }
  return 0;
}

}  // namespace mpirl
