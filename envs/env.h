#pragma once
// The environment interface. An Env knows its spec before anything is allocated (as in EnvPool),
// and writes observations straight into a caller-owned row of the batch buffer.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mpirl::envs {

struct EnvSpec {
  std::string id;
  std::vector<int64_t> obs_shape;  // [D], or [C, H, W] for images (channels first)
  bool obs_uint8 = false;          // observations are uint8 (pixels; the policy scales them by 1/255) or float32
  bool discrete = true;
  int64_t num_actions = 0;         // discrete: number of actions
  int64_t action_dim = 0;          // box: action dimensions
  std::vector<float> action_low, action_high;  // box bounds (actions are clipped into them)
  int64_t max_episode_steps = 0;   // truncation limit: 0 = never truncates; -1 = may truncate, but
                                   // declares no limit (a Python env without one)
  std::string description;

  int64_t obs_size() const;  // elements per observation
  int64_t obs_elem_bytes() const { return obs_uint8 ? 1 : 4; }
  int64_t obs_bytes() const { return obs_size() * obs_elem_bytes(); }
  // Floats per step in the policy's distribution parameters: logits, or mean and log-std.
  int64_t dist_size() const { return discrete ? num_actions : 2 * action_dim; }
  // Action slots per step in a rollout: 1 index, or action_dim floats.
  int64_t action_size() const { return discrete ? 1 : action_dim; }
};

struct StepResult {
  float reward = 0;
  bool terminated = false;  // the episode reached a terminal state: no bootstrap
  bool truncated = false;   // cut by a time limit: bootstrap from the value of the last state
};

// One action: `index` for discrete spaces, `values` (action_dim floats) for boxes.
struct Action {
  int64_t index = 0;
  const float* values = nullptr;
};

class Env {
 public:
  virtual ~Env() = default;
  virtual const EnvSpec& spec() const = 0;
  // Starts an episode and writes its first observation to obs: obs_size() elements of float32 or,
  // for an obs_uint8 spec, of uint8.
  virtual void reset(void* obs) = 0;
  // Applies an action; writes the next observation (the last state of the episode when it ended).
  virtual StepResult step(const Action& action, void* obs) = 0;
};

// Parameters an env may read from the config (the Synthetic env uses the numbers; the MinAtar
// ports read env.kwargs, a JSON object, see envs/minatar.h; other built-ins take none).
struct EnvOptions {
  int obs_dim = 64, num_actions = 4, episode_length = 200;
  double step_cost_us = 0;
  bool cost_sleep = false;
  std::string kwargs;  // env.kwargs as written ("" = none)
};

}  // namespace mpirl::envs
