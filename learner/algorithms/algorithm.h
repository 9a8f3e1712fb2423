#pragma once
// An algorithm behind one small interface: its targets and loss over a (mini)batch, and how one
// update splits a batch into optimizer steps; an algorithm with networks of its own (R2D2's target
// network) builds them in attach(), keeps them in step with after_step() and saves them with the
// learner's checkpoint. The Trainer (learner/trainer.h) owns what every
// algorithm shares: the policy's unroll, backward, the gradient all-reduce, clipping, the finite
// guard, the optimizer and the CUDA graph. An algorithm is a file (or a folder) of its own in
// learner/algorithms/, entered in make_algorithm's table (make_algorithm.cpp); the actor-critic ones
// share their V-trace targets (actor_critic.h).
#include <functional>
#include <memory>
#include <string>

#include <torch/torch.h>

#include "core/config.h"
#include "envs/env.h"
#include "kernels/returns.h"
#include "learner/train_batch.h"
#include "models/policy_model.h"

namespace mpirl::learner {

struct LossOptions {
  double gamma = 0.99, value_coef = 0.5, entropy_coef = 0.01, appo_clip = 0.2;
  bool appo_proximal = false;  // APPO: the ratio against TrainBatch::proximal_logp (appo.h)
  kernels::VTraceOptions vtrace;
  double reward_scale = 1, reward_clip = 0;  // rewards * scale, clipped to +-clip (0 = no clip)
  bool normalize_advantages = false;         // zero mean, unit std over the kept steps of the (mini)batch
  bool gae = false;  // targets and advantages by GAE(vtrace.lambda) instead of V-trace (APPO: the ratio
                     // clip does the off-policy part, as in PPO)
  torch::Tensor entropy_coef_t;  // scalar on the device (a scheduled coefficient); undefined = entropy_coef
  torch::Tensor value_scale;     // [1] PopArt's sigma: the value loss in normalised units; undefined = 1
  // Whether the loss computes the terms only logs and PopArt read (LossTerms: entropy without a
  // coefficient, clip_fraction, mean_rho, priorities, the targets' moments); false leaves them
  // undefined. The trainer sets it per step (Trainer::update).
  bool stats = true;
};
// The options of the config's [learner] section (the device tensors above stay undefined).
LossOptions loss_options(const Config& cfg);

struct LossTerms {
  torch::Tensor total, policy, value, entropy;  // scalars (entropy: mean entropy, not its loss; R2D2: value only)
  torch::Tensor clip_fraction;                  // APPO only: share of clipped ratios
  torch::Tensor mean_rho;                       // mean exp(log rho)
  torch::Tensor priorities;                     // [B] new replay priorities: mean |vs - V| per sequence
  torch::Tensor target_mean, target_sq_mean;    // mean and mean square of the value targets vs (kept steps)
  torch::Tensor q_mean;                         // R2D2 only: mean Q of the actions taken, in return units
};

class Algorithm {
 public:
  virtual ~Algorithm() = default;
  virtual std::string name() const = 0;
  // Optimizer steps per update: `epochs()` passes over `minibatches()` equal column slices of the
  // batch (the config checks that they divide it). The replay's new priorities come from the first
  // pass, or from prepare() where it sets TrainBatch::priorities.
  virtual int epochs() const { return 1; }
  virtual int minibatches() const { return 1; }
  // Whether each epoch takes the batch's columns in a new random order (APPO over steps).
  virtual bool shuffles() const { return false; }
  // The loss of one (mini)batch from the policy's outputs over it (differentiable through `out`).
  // Runs inside the (possibly captured) optimizer step: device work only, no host sync.
  virtual LossTerms loss(const envs::EnvSpec& spec, const TrainBatch& b, const models::PolicyOutput& out,
                         const LossOptions& o) const = 0;

  // One optimizer step's gradient without autograd, where the algorithm has it in closed form for
  // this policy and batch (APPO over steps, an MLP policy that PolicyImpl::by_hand runs): sets every
  // parameter's .grad() as loss(forward()).total.backward() would, fills l.total, l.policy and
  // l.value, and returns true. False: the caller runs forward, loss and backward. Eager CPU steps
  // only (learner.grad_by_hand).
  virtual bool grad_by_hand(const envs::EnvSpec& spec, models::PolicyModel& m, const TrainBatch& b,
                            const LossOptions& o, LossTerms& l) const {
    return false;
  }
  // The policy's outputs that loss() takes: the unroll over the whole sequence, obs [T+1, B] (R2D2:
  // from the end of its burn-in). Runs inside the optimizer step, as loss() does.
  virtual models::PolicyOutput forward(models::PolicyModel& m, const TrainBatch& b) const {
    return m.unroll(b.obs, b.is_init, b.state0);
  }
  // Once per update, before its optimizer steps, outside them and without gradient: what the
  // algorithm needs of the policy as it stands (APPO with appo_proximal: b.proximal_logp; over steps:
  // the advantages and targets, then the batch flattened to one step per column).
  virtual void prepare(const envs::EnvSpec& spec, models::PolicyModel& m, TrainBatch& b, const LossOptions& o) const {}
  // Where a truncated episode bootstraps, in return units: obs [m, obs...] continuing from state
  // [m, S] (undefined without a core). Outside the optimizer step, without gradient.
  virtual torch::Tensor bootstrap_value(models::PolicyModel& m, const torch::Tensor& obs, const torch::Tensor& state) const {
    return m.value_after(obs, state);
  }
  // Once, beside the trainer's policy: `make` builds another policy of the same shape on its device.
  using MakeModel = std::function<std::shared_ptr<models::PolicyModel>()>;
  virtual void attach(const std::shared_ptr<models::PolicyModel>& online, const MakeModel& make) {}
  // After every optimizer step (skipped ones included, so that every learner counts the same).
  virtual void after_step() {}
  // Tensors of its own that a non-finite rollback (Trainer::snapshot/restore) must restore with the
  // parameters (R2D2: the target network's).
  virtual std::vector<torch::Tensor> state_tensors() const { return {}; }
  // State of its own in the learner's checkpoint (learner.pt's "algorithm"); has_state() false: none.
  virtual bool has_state() const { return false; }
  virtual void save(torch::serialize::OutputArchive&) const {}
  virtual void load(torch::serialize::InputArchive&) {}
};

}  // namespace mpirl::learner
