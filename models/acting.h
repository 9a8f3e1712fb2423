#pragma once
// The actor's per-step inference, shared by the actor rank, `mpirl eval` and bench_actor_ceiling:
// the policy's distribution head only (PolicyImpl::act: no value head, preallocated outputs), then
// sampling and log-probabilities in plain C++ over the E rows, written straight into the caller's
// rollout rows. Per step, an MLP policy, with or without a recurrent core, runs its addmm kernels
// and plain loops and nothing else: no tensor is allocated (tests/unit/test_acting.cpp counts
// them). CNN encoders still allocate their intermediate outputs inside their modules. R2D2 with
// r2d2.initial_priority = "actor" (ModelOptions::act_q) runs the value head too and writes Q-value
// rows, allocating a few small tensors per step.
//
// Sampling and log-probabilities: models/sampler.h (seeded by the caller).
#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "models/policy.h"
#include "models/sampler.h"

namespace mpirl::models {

class Acting {
 public:
  Acting(Policy policy, int64_t num_envs, uint64_t seed);

  // Where one step's per-env outputs go (models/sampler.h).
  using Rows = Sampler::Rows;
  // obs: [E, obs...] (a view into the rollout, any row stride); is_init: E bytes, `init_stride`
  // apart. Samples one action per env (greedy: the mode, with logp of the mode) into actions().
  void step(const torch::Tensor& obs, const uint8_t* is_init, int64_t init_stride, const Rows& out,
            bool greedy = false);
  // R2D2's actors: env e acts epsilon-greedily with eps[e] (models/sampler.h); empty: samples the softmax.
  void set_epsilons(std::vector<double> eps) {
    TORCH_CHECK(eps.empty() || int64_t(eps.size()) == E_, "Acting: ", eps.size(), " epsilons for ", E_, " envs");
    eps_ = std::move(eps);
  }
  // The last step's actions: E int64 (discrete) or E x A float32 (box), contiguous.
  const int64_t* discrete_actions() const { return discrete_.data(); }
  const float* box_actions() const { return box_.data(); }
  // Copies them into step t of an env-major rollout of T steps: int64 [E, T] or float32 [E, T, A].
  void write_actions(void* rollout, int64_t t, int64_t T) const;
  // [E, S] recurrent state after the last step (undefined for feed-forward policies).
  const torch::Tensor& state() const { return state_; }
  int64_t num_envs() const { return E_; }

 private:
  Policy policy_;
  envs::EnvSpec spec_;
  int64_t E_;
  ActBuffers buf_;
  torch::Tensor state_;
  Sampler sampler_;
  std::vector<int64_t> discrete_;
  std::vector<float> box_;
  std::vector<double> eps_;  // per env (R2D2), or empty
};

}  // namespace mpirl::models
