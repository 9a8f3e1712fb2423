#pragma once
// The actor's per-step inference, shared by the actor rank, `mpirl eval` and bench_actor_ceiling:
// the policy's distribution head only (PolicyImpl::act: no value head, preallocated outputs), then
// sampling and log-probabilities in plain C++ over the E rows, written straight into the caller's
// rollout rows. Per step, an MLP policy, with or without a recurrent core, runs its addmm kernels
// and plain loops and nothing else: no tensor is allocated (tests/unit/test_acting.cpp counts
// them). CNN encoders still allocate their intermediate outputs inside their modules.
//
// Sampling uses its own counter-free generator (xoshiro256**, seeded by the caller), so a run's
// actions depend only on its seed. Discrete: Gumbel-max over the logits; log pi(a) = l_a - logsumexp(l).
// Box: mean + exp(log_std) * N(0, 1) (Box-Muller); log pi(a) = sum(-z^2/2 - log_std - log(2 pi)/2).
#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "models/policy.h"

namespace mpirl::models {

class Acting {
 public:
  Acting(Policy policy, int64_t num_envs, uint64_t seed);

  // Where one step's per-env outputs go: row e of the distribution at dist + e * dist_stride
  // (dist_size() floats), its log-probability at logp[e * logp_stride]. nullptr skips a field.
  struct Rows {
    float* dist = nullptr;
    int64_t dist_stride = 0;
    float* logp = nullptr;
    int64_t logp_stride = 0;
  };
  // obs: [E, obs...] (a view into the rollout, any row stride); is_init: E bytes, `init_stride`
  // apart. Samples one action per env (greedy: the mode, with logp of the mode) into actions().
  void step(const torch::Tensor& obs, const uint8_t* is_init, int64_t init_stride, const Rows& out,
            bool greedy = false);
  // The last step's actions: E int64 (discrete) or E x A float32 (box), contiguous.
  const int64_t* discrete_actions() const { return discrete_.data(); }
  const float* box_actions() const { return box_.data(); }
  // Copies them into step t of an env-major rollout of T steps: int64 [E, T] or float32 [E, T, A].
  void write_actions(void* rollout, int64_t t, int64_t T) const;
  // [E, S] recurrent state after the last step (undefined for feed-forward policies).
  const torch::Tensor& state() const { return state_; }

 private:
  struct Rng {
    uint64_t s[4];
    explicit Rng(uint64_t seed);
    uint64_t next();
    double uniform();  // in (0, 1)
    double normal();
    double spare = 0;
    bool has_spare = false;
  };
  void discrete_rows(const float* head, const Rows& out, bool greedy);
  void box_rows(const float* mean, const Rows& out, bool greedy);

  Policy policy_;
  envs::EnvSpec spec_;
  int64_t E_;
  ActBuffers buf_;
  torch::Tensor state_;
  Rng rng_;
  std::vector<int64_t> discrete_;
  std::vector<float> box_;
  std::vector<double> scratch_;
};

}  // namespace mpirl::models
