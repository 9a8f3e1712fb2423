#include "envs/mujoco/setups.h"

#include <cstdlib>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "envs/mujoco_locomotion.h"

#ifndef MPIRL_MUJOCO_ASSETS
#define MPIRL_MUJOCO_ASSETS ""
#endif

namespace mpirl::envs {
namespace mujoco_loco {
namespace {
const Setup kSetups[] = {
    {"Ant-v4", "ant.xml", Kind::Ant, 5, 0.1, true, 0.5, 1.0, 1.0,
     "gymnasium Ant-v4 (MuJoCo, native): a quadruped runs forward; 8 torques, 27 observations, "
     "terminates when the torso leaves z in [0.2, 1.0], 1000-step limit"},
    {"HalfCheetah-v4", "half_cheetah.xml", Kind::HalfCheetah, 5, 0.1, true, 0.1, 1.0, 0.0,
     "gymnasium HalfCheetah-v4 (MuJoCo, native): a planar cheetah runs forward; 6 torques, "
     "17 observations, never terminates, 1000-step limit"},
    {"Hopper-v4", "hopper.xml", Kind::Hopper, 4, 5e-3, false, 1e-3, 1.0, 1.0,
     "gymnasium Hopper-v4 (MuJoCo, native): a one-legged hopper hops forward; 3 torques, "
     "11 observations, terminates when it falls, 1000-step limit"},
    {"Humanoid-v4", "humanoid.xml", Kind::Humanoid, 5, 1e-2, false, 0.1, 1.25, 5.0,
     "gymnasium Humanoid-v4 (MuJoCo, native): a humanoid walks forward; 17 torques, "
     "376 observations, terminates when the torso leaves z in (1, 2), 1000-step limit"},
    {"Walker2d-v4", "walker2d.xml", Kind::Walker2d, 4, 5e-3, false, 1e-3, 1.0, 1.0,
     "gymnasium Walker2d-v4 (MuJoCo, native): a planar biped walks forward; 6 torques, "
     "17 observations, terminates when it falls, 1000-step limit"},
};
}  // namespace

const Setup& setup_of(const std::string& id) {
  for (const Setup& s : kSetups)
    if (id == s.id) return s;
  throw ConfigError(fmt::format("config key 'env.id' = \"{}\": not a MuJoCo env (expected one of {})", id,
                                fmt::join(mujoco_env_ids(), ", ")));
}

}  // namespace mujoco_loco

using mujoco_loco::kSetups;
using mujoco_loco::Setup;

const std::vector<std::string>& mujoco_env_ids() {
  static const std::vector<std::string> ids = [] {
    std::vector<std::string> v;
    for (const Setup& s : kSetups) v.push_back(s.id);
    return v;
  }();
  return ids;
}

std::string mujoco_assets_dir() {
  const char* e = std::getenv("MPIRL_MUJOCO_ASSETS");
  return e && *e ? std::string(e) : std::string(MPIRL_MUJOCO_ASSETS);
}

}  // namespace mpirl::envs
