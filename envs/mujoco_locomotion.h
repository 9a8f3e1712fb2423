#pragma once
// Gymnasium's MuJoCo locomotion envs, the -v4 versions of CleanRL's table (Ant, HalfCheetah,
// Hopper, Humanoid, Walker2d), in C++ on the MuJoCo library that the mujoco wheel ships
// (libmujoco and its headers; version pinned in scripts/versions.env). They load gymnasium's own
// XML files and repeat its Python step: frame_skip mj_step calls and mj_rnePostConstraint, the
// same rewards, termination, observations (float32 here) and reset noise, and a 1000-step
// truncation as gym.make's TimeLimit (a 1000th step that terminates is reported as terminated
// only, where gymnasium sets both flags: the same to the learner). A build whose CMake did not
// find the wheel lists the ids and refuses them with a message saying how to get it.
// tests/envs/mujoco_parity.py checks every reset and step against gymnasium's env. What differs:
// the reset noise comes from mpirl's generator (the same distributions, not numpy's stream), and
// there is no rendering. The binary links the wheel's versioned libmujoco: after changing the
// wheel, rebuild (a header/library mismatch is refused at the first env).
//
// Why: a MuJoCo run needs no Python in its actor ranks, and the step skips the Python layer. The
// physics is most of a step, so the gain is 1.1-1.45x (one process, a fixed action, on the AMD VM:
// HalfCheetah 33.5k steps/s against gymnasium's 23.2k, Hopper 15.7k / 11.1k, Walker2d 11.6k /
// 9.6k, Ant 6.0k / 5.5k, Humanoid 2.7k / 2.3k; bench/mujoco_speed.sh prints both).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "envs/env.h"

namespace mpirl::envs {

// "Ant-v4", "HalfCheetah-v4", "Hopper-v4", "Humanoid-v4", "Walker2d-v4".
const std::vector<std::string>& mujoco_env_ids();
// The folder the XML files are read from: $MPIRL_MUJOCO_ASSETS, else gymnasium's
// envs/mujoco/assets as CMake found it.
std::string mujoco_assets_dir();

class MujocoLocomotion final : public Env {
 public:
  // Throws ConfigError naming the id (unknown, or this build has no MuJoCo) or the XML file that
  // could not be loaded (and MuJoCo's message).
  MujocoLocomotion(const std::string& id, uint64_t seed);
  ~MujocoLocomotion() override;
  const EnvSpec& spec() const override { return spec_; }
  void reset(void* obs) override;
  StepResult step(const Action& a, void* obs) override;

  // For tests: the model's sizes, and a reset to given positions and velocities (what reset()
  // does after drawing its noise: mj_resetData, then gymnasium's set_state).
  int nq() const;
  int nv() const;
  void reset_to(const double* qpos, const double* qvel, void* obs);
  // The same state, then gymnasium's is_healthy (HalfCheetah: always); the episode restarts.
  bool healthy_at(const double* qpos, const double* qvel);
  std::vector<double> state() const;  // qpos then qvel

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  EnvSpec spec_;
};

}  // namespace mpirl::envs
