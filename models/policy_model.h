#pragma once
// The policy contract: what learners (unroll, value_after), actors and inference ranks (step)
// need of a policy, over a flat recurrent state [B, S]. The built-in PolicyImpl (models/policy.h)
// implements it; so will a Python nn.Module run by the embedded interpreter (issue 42), with the
// same shapes, so that losses, actors, inference, checkpoints and export see no difference.
// `dist` is categorical logits [..., L], or a diagonal Gaussian's mean ++ log-std [..., 2A].
#include <torch/torch.h>

#include "envs/env.h"

namespace mpirl::models {

struct PolicyOutput {
  torch::Tensor dist;   // [..., L]: logits, or (mean, log_std)
  torch::Tensor value;  // [...] in return units
};

class PolicyModel : public torch::nn::Module {
 public:
  // Sequence mode: obs [T, B, obs...], is_init [T, B] (1 = the core resets before this step),
  // state0 [B, S] (ignored when state_size() is 0).
  virtual PolicyOutput unroll(const torch::Tensor& obs, const torch::Tensor& is_init, const torch::Tensor& state0) = 0;
  // Step mode: obs [B, obs...], is_init [B]; `state` [B, S] is advanced in place of the caller's.
  // unroll over T steps equals T calls of step, resets included.
  virtual PolicyOutput step(const torch::Tensor& obs, const torch::Tensor& is_init, torch::Tensor& state) = 0;
  // Value of obs [B, obs...] continuing from `state` without changing it (truncation bootstrap).
  virtual torch::Tensor value_after(const torch::Tensor& obs, const torch::Tensor& state) = 0;
  virtual int64_t state_size() const = 0;
  virtual torch::Tensor initial_state(int64_t B) const = 0;
};

// Distribution helpers over `dist` (models/distributions.cpp).
torch::Tensor log_prob(const envs::EnvSpec& spec, const torch::Tensor& dist, const torch::Tensor& actions);
torch::Tensor entropy(const envs::EnvSpec& spec, const torch::Tensor& dist);
// Samples actions ([...] int64, or [..., A] float32) with `gen`.
torch::Tensor sample(const envs::EnvSpec& spec, const torch::Tensor& dist, at::Generator& gen);

}  // namespace mpirl::models
