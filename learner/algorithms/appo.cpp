#include "learner/algorithms/appo.h"

namespace mpirl::learner {

LossTerms appo_loss(const envs::EnvSpec& spec, const TrainBatch& b, const models::PolicyOutput& out,
                    const LossOptions& o) {
  Targets t = compute_targets(spec, b, out, o);
  auto ratio = torch::exp(t.logp - b.behaviour_logp);
  auto adv = actor_critic::advantages(t.vt.advantages, b, o);
  auto clipped = ratio.clamp(1.0 - o.appo_clip, 1.0 + o.appo_clip);
  auto surrogate = torch::min(ratio * adv, clipped * adv);
  auto l = actor_critic::finish(spec, b, out, o, t, -actor_critic::weighted_mean(surrogate, b));
  l.clip_fraction = ((ratio - 1.0).abs() > o.appo_clip).to(ratio.scalar_type()).mean().detach();
  return l;
}

}  // namespace mpirl::learner
