#include <algorithm>
#include <chrono>
#include <thread>

#include "envs/builtin.h"

namespace mpirl::envs {

Synthetic::Synthetic(uint64_t seed, const EnvOptions& opts) : opts_(opts), rng_(seed) {
  spec_.id = "Synthetic";
  spec_.obs_shape = {opts.obs_dim};
  spec_.discrete = true;
  spec_.num_actions = opts.num_actions;
  spec_.max_episode_steps = opts.episode_length;
  spec_.description =
      "throughput env: env.obs_dim features, env.num_actions actions, reward 1 for the argmax action, "
      "env.episode_length steps, env.step_cost_us per step (env.cost_mode busy|sleep)";
}

void Synthetic::fill(float* obs) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int i = 0; i < opts_.obs_dim; ++i) obs[i] = u(rng_);
  int k = std::min(opts_.obs_dim, opts_.num_actions);
  target_ = std::max_element(obs, obs + k) - obs;
}

void Synthetic::reset(void* out) {
  float* obs = static_cast<float*>(out);
  steps_ = 0;
  fill(obs);
}

StepResult Synthetic::step(const Action& a, void* out) {
  float* obs = static_cast<float*>(out);
  if (opts_.step_cost_us > 0) {
    auto cost = std::chrono::nanoseconds(int64_t(opts_.step_cost_us * 1000.0));
    if (opts_.cost_sleep) {
      std::this_thread::sleep_for(cost);
    } else {
      auto until = std::chrono::steady_clock::now() + cost;
      while (std::chrono::steady_clock::now() < until) {
      }
    }
  }
  StepResult r;
  r.reward = a.index == target_ ? 1.0f : 0.0f;
  ++steps_;
  fill(obs);
  r.truncated = steps_ >= opts_.episode_length;
  return r;
}

}  // namespace mpirl::envs
