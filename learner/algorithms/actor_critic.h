#pragma once
// What the actor-critic algorithms (IMPALA, APPO) share: V-trace targets and advantages over a
// time-major batch, means over the kept (not too old) sequences weighted by importance weights,
// and the value and entropy terms. An algorithm adds its policy-gradient term (impala.h, appo.h).
#include <torch/torch.h>

#include "envs/env.h"
#include "kernels/returns.h"
#include "learner/algorithms/algorithm.h"
#include "learner/train_batch.h"
#include "models/policy_model.h"

namespace mpirl::learner {

// (x - mean) / (std + 1e-8) over the kept sequences' steps of x [T, B] (all steps without keep);
// the mean and std are population statistics, computed without gradient.
torch::Tensor normalize_over_kept(const torch::Tensor& x, const torch::Tensor& keep);

// Value-head targets, advantages and log-rhos for the batch given the policy's outputs; a batch
// with fixed advantages and targets (TrainBatch::advantages) keeps them.
struct Targets {
  torch::Tensor logp, log_rhos;
  kernels::VTraceReturns vt;
};
Targets compute_targets(const envs::EnvSpec& spec, const TrainBatch& b, const models::PolicyOutput& out,
                        const LossOptions& o);

namespace actor_critic {
// Mean over the kept steps of x [T, B], each sequence weighted by its importance weight when the
// batch has them.
torch::Tensor weighted_mean(const torch::Tensor& x, const TrainBatch& b);
// The policy gradient's advantages, in return units, or normalised per (mini)batch.
torch::Tensor advantages(const torch::Tensor& adv, const TrainBatch& b, const LossOptions& o);
// The loss terms around `policy_loss`: value (0.5 (vs - V)^2, in PopArt's units with it), entropy,
// total, priorities (mean |vs - V| per sequence), the targets' moments and the mean rho.
LossTerms finish(const envs::EnvSpec& spec, const TrainBatch& b, const models::PolicyOutput& out,
                 const LossOptions& o, const Targets& t, torch::Tensor policy_loss);
}  // namespace actor_critic

}  // namespace mpirl::learner
