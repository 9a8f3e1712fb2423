#pragma once
// Asynchronous PPO: the clipped surrogate on V-trace advantages, several epochs over minibatches
// of each batch (learner.appo_epochs x learner.appo_minibatches optimizer steps).
#include "learner/algorithms/actor_critic.h"
#include "models/policy.h"

namespace mpirl::learner {

// Clipped surrogate min(r A, clip(r, 1-eps, 1+eps) A) with r = pi/mu and V-trace (or GAE)
// advantages A, plus the same value and entropy terms as IMPALA.
// With o.appo_proximal and b.proximal_logp (the policy at the start of the update, Appo::prepare),
// the decoupled objective of Hilton et al. 2021 ("Batch size-invariance for policy optimization"):
// r = pi/pi_prox, and each step's surrogate weighted by min(pi_prox/mu, vtrace.rho_bar). A stale
// batch (a policy lag of whole updates) then starts every update with r = 1, inside the clip.
// With learner.appo_minibatch = "steps" (Appo::prepare), PPO's order instead of whole sequences:
// the advantages and targets are computed once, from the policy as the update starts, and the loss
// takes them from the batch (TrainBatch::advantages, targets); the batch is flattened to one step
// per column, which the Trainer shuffles into new minibatches every epoch (shuffles()).
LossTerms appo_loss(const envs::EnvSpec& spec, const TrainBatch& b, const models::PolicyOutput& out,
                    const LossOptions& o);

class Appo final : public Algorithm {
 public:
  Appo(int epochs, int minibatches, bool steps = false) : epochs_(epochs), minibatches_(minibatches), steps_(steps) {}
  std::string name() const override { return "appo"; }
  int epochs() const override { return epochs_; }
  int minibatches() const override { return minibatches_; }
  bool shuffles() const override { return steps_; }
  LossTerms loss(const envs::EnvSpec& spec, const TrainBatch& b, const models::PolicyOutput& out,
                 const LossOptions& o) const override {
    return appo_loss(spec, b, out, o);
  }
  void prepare(const envs::EnvSpec& spec, models::PolicyModel& m, TrainBatch& b, const LossOptions& o) const override;
  // A Gaussian MLP policy's step over fixed advantages (appo_by_hand.cpp): the surrogate's, the
  // value loss's and the entropy bonus's gradients in closed form. Not with appo_proximal,
  // importance weights, masked sequences, a scheduled entropy coefficient, or a step that
  // computes the logging-only terms (o.stats): those take autograd.
  bool grad_by_hand(const envs::EnvSpec& spec, models::PolicyModel& m, const TrainBatch& b, const LossOptions& o,
                    LossTerms& l) const override;

 private:
  int epochs_, minibatches_;
  bool steps_;
  mutable models::MlpTape tape_;  // grad_by_hand's forward pass
};

}  // namespace mpirl::learner
