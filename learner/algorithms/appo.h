#pragma once
// Asynchronous PPO: the clipped surrogate on V-trace advantages, several epochs over minibatches
// of each batch (learner.appo_epochs x learner.appo_minibatches optimizer steps).
#include "learner/algorithms/actor_critic.h"

namespace mpirl::learner {

// Clipped surrogate min(r A, clip(r, 1-eps, 1+eps) A) with r = pi/mu and V-trace advantages A,
// plus the same value and entropy terms as IMPALA.
LossTerms appo_loss(const envs::EnvSpec& spec, const TrainBatch& b, const models::PolicyOutput& out,
                    const LossOptions& o);

class Appo final : public Algorithm {
 public:
  Appo(int epochs, int minibatches) : epochs_(epochs), minibatches_(minibatches) {}
  std::string name() const override { return "appo"; }
  int epochs() const override { return epochs_; }
  int minibatches() const override { return minibatches_; }
  LossTerms loss(const envs::EnvSpec& spec, const TrainBatch& b, const models::PolicyOutput& out,
                 const LossOptions& o) const override {
    return appo_loss(spec, b, out, o);
  }

 private:
  int epochs_, minibatches_;
};

}  // namespace mpirl::learner
