#include "learner/algorithms/appo.h"

#include "core/error.h"

namespace mpirl::learner {

LossTerms appo_loss(const envs::EnvSpec& spec, const TrainBatch& b, const models::PolicyOutput& out,
                    const LossOptions& o) {
  Targets t = compute_targets(spec, b, out, o);
  auto adv = actor_critic::advantages(t.vt.advantages, b, o);
  MPIRL_CHECK(!o.appo_proximal || b.proximal_logp.defined(),
              "learner.appo_proximal: the batch has no proximal_logp (Algorithm::prepare did not run)");
  const bool proximal = o.appo_proximal;
  // Decoupled: r = pi / pi_prox, each step weighted by pi_prox / mu truncated at rho_bar (no gradient).
  auto ratio = torch::exp(t.logp - (proximal ? b.proximal_logp : b.behaviour_logp));
  auto clipped = ratio.clamp(1.0 - o.appo_clip, 1.0 + o.appo_clip);
  auto surrogate = torch::min(ratio * adv, clipped * adv);
  if (proximal) surrogate = surrogate * (b.proximal_logp - b.behaviour_logp).exp().clamp_max(o.vtrace.rho_bar);
  auto l = actor_critic::finish(spec, b, out, o, t, -actor_critic::weighted_mean(surrogate, b));
  if (o.stats) l.clip_fraction = ((ratio - 1.0).abs() > o.appo_clip).to(ratio.scalar_type()).mean().detach();
  return l;
}

void Appo::prepare(const envs::EnvSpec& spec, models::PolicyModel& m, TrainBatch& b, const LossOptions& o) const {
  if (!o.appo_proximal && !steps_) return;
  torch::NoGradGuard g;
  const int64_t T = b.rewards.size(0);
  const auto out = forward(m, b);
  if (o.appo_proximal)
    b.proximal_logp = models::log_prob(spec, out.dist.slice(0, 0, T), b.actions).to(b.behaviour_logp.scalar_type());
  if (!steps_) return;
  // PPO's order: advantages and targets from the policy as the update starts, then steps shuffled
  // into minibatches (Trainer::update), each step's loss against these fixed values.
  const Targets t = compute_targets(spec, b, out, o);
  b.priorities = (t.vt.vs - out.value.slice(0, 0, T)).abs().mean(0);
  b.advantages = t.vt.advantages;
  b.targets = t.vt.vs;
  b = b.flatten_steps();
}

}  // namespace mpirl::learner
