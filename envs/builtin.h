#pragma once
// The built-in environments. Each is deterministic under its seed.
#include <random>

#include "envs/env.h"

namespace mpirl::envs {

// CartPole-v1 with Gym's dynamics and constants (Euler integration, tau = 0.02, force 10 N,
// termination at |x| > 2.4 or |theta| > 12 degrees, reward 1 per step, truncation at 500 steps).
// A step that terminates is never also reported as truncated.
class CartPole final : public Env {
 public:
  explicit CartPole(uint64_t seed);
  const EnvSpec& spec() const override { return spec_; }
  void reset(void* obs) override;
  StepResult step(const Action& a, void* obs) override;
  // Direct access to the state for tests: x, x_dot, theta, theta_dot.
  double state[4] = {0, 0, 0, 0};
  void write_obs(float* obs) const;

 private:
  EnvSpec spec_;
  std::mt19937_64 rng_;
  int steps_ = 0;
};

// Pendulum-v1 with Gym's dynamics (g = 10, dt = 0.05, max torque 2, max speed 8), truncated at 200.
class Pendulum final : public Env {
 public:
  explicit Pendulum(uint64_t seed);
  const EnvSpec& spec() const override { return spec_; }
  void reset(void* obs) override;
  StepResult step(const Action& a, void* obs) override;
  double th = 0, thdot = 0;
  void write_obs(float* obs) const;

 private:
  EnvSpec spec_;
  std::mt19937_64 rng_;
  int steps_ = 0;
};

// Synthetic env for throughput studies: obs_dim uniform(-1, 1) features; reward 1 when the action
// is the argmax of the first min(obs_dim, num_actions) features (so it is learnable), else 0;
// truncated after episode_length steps; each step costs step_cost_us (spinning or sleeping).
class Synthetic final : public Env {
 public:
  Synthetic(uint64_t seed, const EnvOptions& opts);
  const EnvSpec& spec() const override { return spec_; }
  void reset(void* obs) override;
  StepResult step(const Action& a, void* obs) override;

 private:
  void fill(float* obs);
  EnvSpec spec_;
  EnvOptions opts_;
  std::mt19937_64 rng_;
  int steps_ = 0;
  int64_t target_ = 0;
};

}  // namespace mpirl::envs
