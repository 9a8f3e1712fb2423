// The MuJoCo envs in a build whose CMake did not find the mujoco wheel: listed, and refused with
// a message saying how to get them.
#include "envs/mujoco_locomotion.h"

#ifndef MPIRL_WITH_MUJOCO
#define MPIRL_WITH_MUJOCO 0
#endif
#if !MPIRL_WITH_MUJOCO

#include <fmt/format.h>

#include "core/error.h"
#include "envs/mujoco/setups.h"

namespace mpirl::envs {

struct MujocoLocomotion::Impl {};

MujocoLocomotion::MujocoLocomotion(const std::string& id, uint64_t) {
  mujoco_loco::setup_of(id);
  throw ConfigError(fmt::format("config key 'env.id' = \"{}\": this mpirl was built without MuJoCo (CMake did not "
                                "find the mujoco wheel's libmujoco and headers, or gymnasium's MuJoCo XML files, in "
                                "{}'s site-packages): run scripts/setup.sh, which installs gymnasium[mujoco], then "
                                "scripts/build.sh; or use \"gym:{}\"",
                                id, MPIRL_PYTHON_EXECUTABLE, id));
}
MujocoLocomotion::~MujocoLocomotion() = default;
int MujocoLocomotion::nq() const { return 0; }
int MujocoLocomotion::nv() const { return 0; }
void MujocoLocomotion::reset_to(const double*, const double*, void*) {}
bool MujocoLocomotion::healthy_at(const double*, const double*) { return false; }
std::vector<double> MujocoLocomotion::state() const { return {}; }
void MujocoLocomotion::reset(void*) {}
StepResult MujocoLocomotion::step(const Action&, void*) { return {}; }

}  // namespace mpirl::envs

#endif
