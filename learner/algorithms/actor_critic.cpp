#include "learner/algorithms/actor_critic.h"

namespace mpirl::learner {

Targets compute_targets(const envs::EnvSpec& spec, const TrainBatch& b, const models::PolicyOutput& out,
                        const LossOptions& o) {
  const int64_t T = b.rewards.size(0);
  Targets t;
  auto dist = out.dist.slice(0, 0, T);
  t.logp = models::log_prob(spec, dist, b.actions);
  t.log_rhos = t.logp.detach() - b.behaviour_logp;
  // Fixed at the start of the update (Appo::prepare, appo_minibatch = "steps"): APPO's advantages
  // (IMPALA, whose policy gradient takes V-trace's pg_advantages, refuses such a batch).
  if (b.advantages.defined()) {
    t.vt.vs = b.targets;
    t.vt.advantages = b.advantages;
    t.vt.pg_advantages = b.advantages;
    return t;
  }
  auto values = out.value.detach();
  auto next_values = torch::where(b.truncated > 0.5, b.trunc_value, values.slice(0, 1, T + 1));
  auto discounts = o.gamma * (1.0 - b.terminated);
  auto cont = (1.0 - b.terminated) * (1.0 - b.truncated);
  torch::Tensor rewards = b.rewards;
  if (o.reward_scale != 1.0) rewards = rewards * o.reward_scale;
  if (o.reward_clip > 0) rewards = rewards.clamp(-o.reward_clip, o.reward_clip);
  if (o.gae) {
    auto g = kernels::gae(discounts, cont, rewards, values.slice(0, 0, T), next_values, o.vtrace.lambda);
    t.vt.vs = g.targets;
    t.vt.advantages = g.advantages;
    t.vt.pg_advantages = g.advantages;
  } else {
    t.vt = kernels::vtrace(t.log_rhos, discounts, cont, rewards, values.slice(0, 0, T), next_values, o.vtrace);
  }
  return t;
}

namespace {
// Mean over the kept sequences' steps of x [T, B] (every step without a mask; an all-masked batch
// gives 0, never a division by 0).
torch::Tensor kept_mean(const torch::Tensor& x, const torch::Tensor& keep) {
  if (!keep.defined()) return x.mean();
  return (x * keep.unsqueeze(0)).sum() / (keep.sum().clamp_min(1.0) * double(x.size(0)));
}
}  // namespace

torch::Tensor normalize_over_kept(const torch::Tensor& x, const torch::Tensor& keep) {
  torch::Tensor mean, var;
  {
    torch::NoGradGuard g;
    mean = kept_mean(x, keep);
    var = kept_mean((x - mean).square(), keep);
  }
  return (x - mean) / (var.sqrt() + 1e-8);
}

namespace actor_critic {

torch::Tensor weighted_mean(const torch::Tensor& x, const TrainBatch& b) {
  return kept_mean(b.weights.defined() ? x * b.weights.unsqueeze(0) : x, b.keep);
}

// With PopArt too the advantages stay in return units: dividing them by sigma as PopArt-IMPALA
// does was tried and learned RepeatPreviousEasy no better (0.66/0.86 at 2M steps).
torch::Tensor advantages(const torch::Tensor& adv, const TrainBatch& b, const LossOptions& o) {
  return o.normalize_advantages ? normalize_over_kept(adv, b.keep) : adv;
}

LossTerms finish(const envs::EnvSpec& spec, const TrainBatch& b, const models::PolicyOutput& out,
                 const LossOptions& o, const Targets& t, torch::Tensor policy_loss) {
  const int64_t T = b.rewards.size(0);
  LossTerms l;
  l.policy = policy_loss;
  auto td = t.vt.vs - out.value.slice(0, 0, T);
  // With PopArt the head learns (vs - mu) / sigma: the same error divided by sigma.
  auto scaled = o.value_scale.defined() ? td / o.value_scale : td;
  l.value = 0.5 * weighted_mean(scaled.pow(2), b);
  // Without a coefficient the entropy is only logged: no term in the loss (its gradient was 0 x
  // the entropy's), and none at all on a step whose statistics nobody reads.
  const bool entropy_in_loss = o.entropy_coef_t.defined() || o.entropy_coef != 0;
  const auto dist = out.dist.slice(0, 0, T);
  if (entropy_in_loss || o.stats)
    l.entropy = weighted_mean(models::entropy(spec, entropy_in_loss ? dist : dist.detach()), b);
  l.total = l.policy + o.value_coef * l.value;
  if (entropy_in_loss)
    l.total = l.total - (o.entropy_coef_t.defined() ? o.entropy_coef_t * l.entropy : o.entropy_coef * l.entropy);
  if (!o.stats) return l;
  l.priorities = td.detach().abs().mean(0);
  auto vs = t.vt.vs.detach();
  l.target_mean = kept_mean(vs, b.keep);  // the value targets' moments: no importance weights
  l.target_sq_mean = kept_mean(vs.square(), b.keep);
  l.mean_rho = t.log_rhos.exp().mean();
  return l;
}

}  // namespace actor_critic
}  // namespace mpirl::learner
