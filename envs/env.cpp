#include "envs/env.h"

namespace mpirl::envs {

int64_t EnvSpec::obs_size() const {
  int64_t n = 1;
  for (auto d : obs_shape) n *= d;
  return n;
}

}  // namespace mpirl::envs
