// `mpirl envs`: the built-in envs and their specs, and the prefixes that name Python envs.
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
               fmt::format("{}[{}]", s.obs_uint8 ? "uint8" : "float32", fmt::join(s.obs_shape, ",")), act, s.max_episode_steps, s.description);
  }
  fmt::print(
      "\nPython envs (an embedded interpreter in each actor rank; see docs/environments.md):\n"
      "  gym:<id>               gymnasium.make_vec(<id>, num_envs, vectorization_mode=\"sync\"), e.g. gym:CartPole-v1\n"
      "  py:<module>:<factory>  <module>.<factory>(num_envs=, seed=, **kwargs) returning a Gymnasium vector env\n"
      "                         with autoreset_mode SAME_STEP (or DISABLED); <module> is found on PYTHONPATH\n"
      "                         or in the working directory\n"
      "  ale:<game>             ale-py's C++ AtariVectorEnv, e.g. ale:breakout: 84x84 grey, frame-skip 4,\n"
      "                         a stack of 4, sticky actions p = 0.25, unclipped rewards (uint8 [4, 84, 84])\n"
      "  envpool:<task>         envpool.make(<task>, \"gymnasium\"), e.g. envpool:Breakout-v5; ended envs are\n"
      "                         reset at once, so no rollout step is an auto-reset step\n"
      "  minatar:<game>         MinAtar, e.g. minatar:breakout (uint8 [C, 10, 10] of 0/255, minimal actions)\n"
      "  env.kwargs = '{{...}}'   a JSON object of extra keyword arguments for any of them, and for the\n"
      "                         built-in <Game>-MinAtar ports: sticky_action_prob (0.1), difficulty_ramping\n"
      "                         (true), max_episode_steps (0 = none), and preset \"gymnax\" (no sticky\n"
      "                         actions, gymnax's cap per game: 1000, Freeway 2500)\n"
      "  Spaces: observations a float32/float64 Box [D] or [C, H, W], or a uint8 Box [C, H, W] / [H, W]\n"
      "  (pixels stay uint8 up to the learner's device); actions Discrete(n) or a flat float Box.\n"
      "  model.encoder = \"auto\" picks nature_cnn for images of at least 36x36, impala_cnn for smaller ones.\n");
  return 0;
}

}  // namespace mpirl
