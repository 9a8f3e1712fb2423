#pragma once
// The five envs' constants as gymnasium's <env>_v4.py sets them, shared by the MuJoCo build
// (envs/mujoco_locomotion.cpp) and the build without it (envs/mujoco/unavailable.cpp).
#include <cstdint>
#include <string>

namespace mpirl::envs::mujoco_loco {

enum class Kind { Ant, HalfCheetah, Hopper, Humanoid, Walker2d };

// Each env's constants as gymnasium's <env>_v4.py sets them (its constructor's defaults).
struct Setup {
  const char* id;
  const char* xml;
  Kind kind;
  int frame_skip;
  double noise;       // reset_noise_scale
  bool normal_qvel;   // qvel noise: noise x N(0, 1) (HalfCheetah, Ant), else U(-noise, noise)
  double ctrl_cost;   // ctrl_cost_weight
  double forward;     // forward_reward_weight
  double healthy;     // healthy_reward
  const char* text;
};

constexpr int64_t kMaxEpisodeSteps = 1000;  // gymnasium's registration of every -v4 id

// The setup of `id`; throws ConfigError naming env.id and the known ids.
const Setup& setup_of(const std::string& id);

}  // namespace mpirl::envs::mujoco_loco
