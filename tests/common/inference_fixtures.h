#pragma once
// Env specs for the inference and acting tests (tests/unit/test_inference_*.cpp, test_acting.cpp).
#include <cstdint>
#include <utility>
#include <vector>

#include "envs/env.h"

namespace mpirl::testing {

inline envs::EnvSpec spec_of(std::vector<int64_t> shape, bool discrete, int64_t n, bool uint8 = false) {
  envs::EnvSpec s;
  s.id = "test";
  s.obs_shape = std::move(shape);
  s.obs_uint8 = uint8;
  s.discrete = discrete;
  (discrete ? s.num_actions : s.action_dim) = n;
  return s;
}

}  // namespace mpirl::testing
