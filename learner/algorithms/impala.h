#pragma once
// IMPALA (Espeholt et al. 2018): V-trace actor-critic, one optimizer step per batch.
#include "learner/algorithms/actor_critic.h"

namespace mpirl::learner {

// -logp * pg_adv + value_coef * 0.5 (vs - V)^2 - entropy_coef * H.
LossTerms impala_loss(const envs::EnvSpec& spec, const TrainBatch& b, const models::PolicyOutput& out,
                      const LossOptions& o);

class Impala final : public Algorithm {
 public:
  std::string name() const override { return "impala"; }
  LossTerms loss(const envs::EnvSpec& spec, const TrainBatch& b, const models::PolicyOutput& out,
                 const LossOptions& o) const override {
    return impala_loss(spec, b, out, o);
  }
};

}  // namespace mpirl::learner
