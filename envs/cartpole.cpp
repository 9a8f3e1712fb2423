#include <cmath>

#include "envs/builtin.h"

namespace mpirl::envs {
namespace {
constexpr double kGravity = 9.8, kMassCart = 1.0, kMassPole = 0.1, kTotalMass = kMassCart + kMassPole;
constexpr double kLength = 0.5, kPoleMassLength = kMassPole * kLength, kForceMag = 10.0, kTau = 0.02;
constexpr double kThetaThreshold = 12.0 * 2.0 * M_PI / 360.0, kXThreshold = 2.4;
}  // namespace

CartPole::CartPole(uint64_t seed) : rng_(seed) {
  spec_.id = "CartPole-v1";
  spec_.obs_shape = {4};
  spec_.discrete = true;
  spec_.num_actions = 2;
  spec_.max_episode_steps = 500;
  spec_.description = "Gym CartPole-v1: balance a pole on a cart; 2 actions, reward 1 per step, 500-step limit";
}

void CartPole::write_obs(float* obs) const {
  for (int i = 0; i < 4; ++i) obs[i] = float(state[i]);
}

void CartPole::reset(void* out) {
  float* obs = static_cast<float*>(out);
  std::uniform_real_distribution<double> u(-0.05, 0.05);
  for (auto& s : state) s = u(rng_);
  steps_ = 0;
  write_obs(obs);
}

StepResult CartPole::step(const Action& a, void* out) {
  float* obs = static_cast<float*>(out);
  double x = state[0], x_dot = state[1], theta = state[2], theta_dot = state[3];
  double force = a.index == 1 ? kForceMag : -kForceMag;
  double c = std::cos(theta), s = std::sin(theta);
  double temp = (force + kPoleMassLength * theta_dot * theta_dot * s) / kTotalMass;
  double theta_acc = (kGravity * s - c * temp) / (kLength * (4.0 / 3.0 - kMassPole * c * c / kTotalMass));
  double x_acc = temp - kPoleMassLength * theta_acc * c / kTotalMass;
  x += kTau * x_dot;
  x_dot += kTau * x_acc;
  theta += kTau * theta_dot;
  theta_dot += kTau * theta_acc;
  state[0] = x, state[1] = x_dot, state[2] = theta, state[3] = theta_dot;
  ++steps_;
  write_obs(obs);
  StepResult r;
  r.reward = 1.0f;
  r.terminated = x < -kXThreshold || x > kXThreshold || theta < -kThetaThreshold || theta > kThetaThreshold;
  r.truncated = !r.terminated && steps_ >= spec_.max_episode_steps;
  return r;
}

}  // namespace mpirl::envs
