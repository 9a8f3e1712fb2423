#include "learner/algorithms/impala.h"

#include "core/error.h"

namespace mpirl::learner {

LossTerms impala_loss(const envs::EnvSpec& spec, const TrainBatch& b, const models::PolicyOutput& out,
                      const LossOptions& o) {
  MPIRL_CHECK(!b.advantages.defined(), "IMPALA: a batch with fixed advantages (APPO's appo_minibatch = \"steps\")");
  Targets t = compute_targets(spec, b, out, o);
  auto adv = actor_critic::advantages(t.vt.pg_advantages, b, o);
  auto l = actor_critic::finish(spec, b, out, o, t, -actor_critic::weighted_mean(t.logp * adv, b));
  l.clip_fraction = torch::zeros({}, l.total.options());
  return l;
}

}  // namespace mpirl::learner
