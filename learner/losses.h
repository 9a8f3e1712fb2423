#pragma once
// IMPALA (V-trace actor-critic) and async-PPO losses over a time-major batch.
#include <torch/torch.h>

#include "envs/env.h"
#include "kernels/returns.h"
#include "models/policy.h"

namespace mpirl::learner {

// One learner batch, time-major, on the learner's device.
struct TrainBatch {
  torch::Tensor obs;          // [T+1, B, obs...] float32, or uint8 pixels (the policy converts)
  torch::Tensor actions;      // [T, B] int64 or [T, B, A] float
  torch::Tensor rewards;      // [T, B] float
  torch::Tensor terminated;   // [T, B] float 0/1
  torch::Tensor truncated;    // [T, B] float 0/1
  torch::Tensor behaviour_logp;  // [T, B]
  torch::Tensor trunc_value;  // [T, B]
  torch::Tensor is_init;      // [T+1, B] float 0/1: the observation starts an episode (core reset)
  torch::Tensor state0;       // [B, S] recurrent state before step 0 (undefined without a core)
  torch::Tensor weights;      // [B] importance weights of a prioritized replay (undefined = 1)
  torch::Tensor keep;         // [B] 1 = trained on, 0 = masked out (too old); undefined = all kept.
                              // Losses are means over the kept sequences of each (mini)batch.
  TrainBatch slice_batch(int64_t begin, int64_t end) const;  // columns [begin, end)
};

struct LossOptions {
  double gamma = 0.99, value_coef = 0.5, entropy_coef = 0.01, appo_clip = 0.2;
  kernels::VTraceOptions vtrace;
  double reward_scale = 1, reward_clip = 0;  // rewards * scale, clipped to +-clip (0 = no clip)
  bool normalize_advantages = false;         // zero mean, unit std over the kept steps of the (mini)batch
  torch::Tensor entropy_coef_t;  // scalar on the device (a scheduled coefficient); undefined = entropy_coef
  torch::Tensor value_scale;     // [1] PopArt's sigma: the value loss in normalised units; undefined = 1
};

struct LossTerms {
  torch::Tensor total, policy, value, entropy;  // scalars (entropy: mean entropy, not its loss)
  torch::Tensor clip_fraction;                  // APPO only: share of clipped ratios
  torch::Tensor mean_rho;                       // mean exp(log rho)
  torch::Tensor priorities;                     // [B] new replay priorities: mean |vs - V| per sequence
  torch::Tensor target_mean, target_sq_mean;    // mean and mean square of the value targets vs (kept steps)
};

// (x - mean) / (std + 1e-8) over the kept sequences' steps of x [T, B] (all steps without keep);
// the mean and std are population statistics, computed without gradient.
torch::Tensor normalize_over_kept(const torch::Tensor& x, const torch::Tensor& keep);

// Value-head targets, advantages and log-rhos for the batch given the policy's outputs.
struct Targets {
  torch::Tensor logp, log_rhos;
  kernels::VTraceReturns vt;
};
Targets compute_targets(const envs::EnvSpec& spec, const TrainBatch& b, const models::PolicyOutput& out,
                        const LossOptions& o);

// IMPALA: -logp * pg_adv + value_coef * 0.5 (vs - V)^2 - entropy_coef * H.
LossTerms impala_loss(const envs::EnvSpec& spec, const TrainBatch& b, const models::PolicyOutput& out,
                      const LossOptions& o);
// APPO: clipped surrogate min(r A, clip(r, 1-eps, 1+eps) A) with r = pi/mu and V-trace advantages A,
// plus the same value and entropy terms.
LossTerms appo_loss(const envs::EnvSpec& spec, const TrainBatch& b, const models::PolicyOutput& out,
                    const LossOptions& o);

}  // namespace mpirl::learner
