// The env specs the fuzz targets and their seed corpus share: a CartPole layout (float32
// observations of 4) and a small pixel one (uint8 [4, 10, 10]).
#pragma once

#include "envs/env.h"

namespace mpirl::fuzz {

inline envs::EnvSpec cartpole() {
  envs::EnvSpec s;
  s.id = "CartPole-v1";
  s.obs_shape = {4};
  s.discrete = true;
  s.num_actions = 2;
  s.max_episode_steps = 500;
  return s;
}

inline envs::EnvSpec pixels() {
  envs::EnvSpec s;
  s.id = "pixels";
  s.obs_shape = {4, 10, 10};
  s.obs_uint8 = true;
  s.discrete = true;
  s.num_actions = 3;
  return s;
}

// fuzz_obs's shape: sequences of 6 frames of 4 planes of 10 x 10 (the pixel spec's, T = 5).
inline constexpr int64_t kObsFrames = 6, kObsPlanes = 4, kObsPlaneBytes = 100;

}  // namespace mpirl::fuzz
