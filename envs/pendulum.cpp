#include <algorithm>
#include <cmath>

#include "envs/builtin.h"

namespace mpirl::envs {
namespace {
constexpr double kMaxSpeed = 8.0, kMaxTorque = 2.0, kDt = 0.05, kG = 10.0, kM = 1.0, kL = 1.0;
double angle_normalize(double x) { return std::fmod(std::fmod(x + M_PI, 2 * M_PI) + 2 * M_PI, 2 * M_PI) - M_PI; }
}  // namespace

Pendulum::Pendulum(uint64_t seed) : rng_(seed) {
  spec_.id = "Pendulum-v1";
  spec_.obs_shape = {3};
  spec_.discrete = false;
  spec_.action_dim = 1;
  spec_.action_low = {float(-kMaxTorque)};
  spec_.action_high = {float(kMaxTorque)};
  spec_.max_episode_steps = 200;
  spec_.description = "Gym Pendulum-v1: swing up a pendulum; 1-D torque in [-2, 2], 200-step limit";
}

void Pendulum::write_obs(float* obs) const {
  obs[0] = float(std::cos(th));
  obs[1] = float(std::sin(th));
  obs[2] = float(thdot);
}

void Pendulum::reset(void* out) {
  float* obs = static_cast<float*>(out);
  th = std::uniform_real_distribution<double>(-M_PI, M_PI)(rng_);
  thdot = std::uniform_real_distribution<double>(-1.0, 1.0)(rng_);
  steps_ = 0;
  write_obs(obs);
}

StepResult Pendulum::step(const Action& a, void* out) {
  float* obs = static_cast<float*>(out);
  double u = std::clamp(double(a.values[0]), -kMaxTorque, kMaxTorque);
  double cost = angle_normalize(th) * angle_normalize(th) + 0.1 * thdot * thdot + 0.001 * u * u;
  double newthdot = thdot + (3.0 * kG / (2.0 * kL) * std::sin(th) + 3.0 / (kM * kL * kL) * u) * kDt;
  newthdot = std::clamp(newthdot, -kMaxSpeed, kMaxSpeed);
  th = th + newthdot * kDt;
  thdot = newthdot;
  ++steps_;
  write_obs(obs);
  StepResult r;
  r.reward = float(-cost);
  r.truncated = steps_ >= spec_.max_episode_steps;
  return r;
}

}  // namespace mpirl::envs
