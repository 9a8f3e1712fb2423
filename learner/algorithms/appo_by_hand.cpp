// APPO's step over fixed advantages for a Gaussian MLP policy, its gradient by hand (appo.h:
// Appo::grad_by_hand): the same loss as appo_loss + actor_critic::finish without importance
// weights or masks, differentiated in closed form per step, then the policy's layers by hand
// (PolicyImpl::tape_backward). With N steps, A action dimensions, z = (a - mean) exp(-log_std):
//   log pi = sum_a -z^2/2 - log_std - log(2 pi)/2, r = exp(log pi - log mu),
//   policy loss = -mean_n min(r A, clip(r) A), A normalised over the minibatch or not (no gradient);
//   d log pi / d mean = z exp(-log_std), d log pi / d log_std = z^2 - 1, d r / d log pi = r;
//   min splits its gradient in halves on a tie and the clip passes it inside [1 - eps, 1 + eps]
//   (autograd's minimum and clamp), so inside the clip d/dr = A and outside it the unclipped side
//   only where it is the smaller;
//   value loss = mean_n ((vs - V) / sigma)^2 / 2 (sigma: PopArt's scale, else 1), entropy =
//   sum_a log_std + const: d/d log_std = 1.
// tests/unit/test_grad_by_hand.cpp checks every parameter's gradient against autograd's.
#include <algorithm>
#include <cmath>
#include <vector>

#include "learner/algorithms/appo.h"

namespace mpirl::learner {

namespace {
torch::Tensor flat_float(const torch::Tensor& t, std::vector<int64_t> shape) {
  return t.reshape(shape).to(torch::kFloat32).contiguous();
}
}  // namespace

bool Appo::grad_by_hand(const envs::EnvSpec& spec, models::PolicyModel& m, const TrainBatch& b, const LossOptions& o,
                        LossTerms& l) const {
  auto* policy = dynamic_cast<models::PolicyImpl*>(&m);
  if (!steps_ || !policy || !policy->by_hand() || spec.discrete || !b.advantages.defined() || o.appo_proximal ||
      o.stats || b.weights.defined() || b.keep.defined() || o.entropy_coef_t.defined())
    return false;
  torch::NoGradGuard g;
  policy->tape_forward(b.obs, tape_);
  const int64_t N = tape_.head.size(0), A = spec.action_dim;
  const auto mean_t = tape_.head.contiguous(), value_t = tape_.value.contiguous();
  const auto log_std_t = policy->log_std().detach().contiguous();
  const auto act_t = flat_float(b.actions, {N, A}), mu_t = flat_float(b.behaviour_logp, {N});
  const auto adv_t = flat_float(b.advantages, {N}), vs_t = flat_float(b.targets, {N});
  const float *mean = mean_t.data_ptr<float>(), *value = value_t.data_ptr<float>(), *ls = log_std_t.data_ptr<float>();
  const float *act = act_t.data_ptr<float>(), *mu = mu_t.data_ptr<float>(), *adv = adv_t.data_ptr<float>();
  const float* vs = vs_t.data_ptr<float>();
  auto d_mean_t = torch::empty({N, A}), d_value_t = torch::empty({N});
  float *d_mean = d_mean_t.data_ptr<float>(), *d_value = d_value_t.data_ptr<float>();

  std::vector<float> inv_std(static_cast<size_t>(A));
  for (int64_t a = 0; a < A; ++a) inv_std[size_t(a)] = std::exp(-ls[a]);
  // learner.normalize_advantages: zero mean, unit (population) std over the minibatch.
  float adv_mean_f = 0, adv_den = 1;
  if (o.normalize_advantages) {
    double sum = 0, sq = 0;
    for (int64_t n = 0; n < N; ++n) sum += adv[n];
    const double adv_mean = sum / double(N);
    for (int64_t n = 0; n < N; ++n) sq += (adv[n] - adv_mean) * (adv[n] - adv_mean);
    adv_mean_f = float(adv_mean);
    adv_den = float(std::sqrt(sq / double(N))) + 1e-8f;
  }
  const float half_log_2pi = float(0.5 * std::log(2 * M_PI));
  const float lo = float(1.0 - o.appo_clip), hi = float(1.0 + o.appo_clip), g_n = -1.0f / float(N);
  const float value_coef = float(o.value_coef);
  // PopArt: the value loss in its normalised units, (vs - V) / sigma, with V = mu + sigma v.
  const float sigma = o.value_scale.defined() ? o.value_scale.item<float>() : 1.0f;
  double policy_sum = 0, value_sum = 0;
  std::vector<double> d_ls(static_cast<size_t>(A), 0.0);
  for (int64_t n = 0; n < N; ++n) {
    const float *mn = mean + n * A, *an = act + n * A;
    float logp = 0;
    for (int64_t a = 0; a < A; ++a) {
      const float z = (an[a] - mn[a]) * inv_std[size_t(a)];
      logp += -0.5f * z * z - ls[a] - half_log_2pi;
    }
    const float r = std::exp(logp - mu[n]), advn = (adv[n] - adv_mean_f) / adv_den;
    const float u = r * advn, w = std::clamp(r, lo, hi) * advn;
    policy_sum += (u <= w || std::isnan(u)) ? u : w;
    float du = g_n, dw = 0;  // d loss / d u, d loss / d w (u < w, or a NaN: carried through r)
    if (u == w) du = dw = 0.5f * g_n;
    else if (u > w) du = 0, dw = g_n;
    const float dr = du * advn + (r >= lo && r <= hi ? dw * advn : 0.0f);
    const float dlogp = dr * r;
    for (int64_t a = 0; a < A; ++a) {
      const float z = (an[a] - mn[a]) * inv_std[size_t(a)];
      d_mean[n * A + a] = dlogp * z * inv_std[size_t(a)];
      d_ls[size_t(a)] += double(dlogp) * (double(z) * z - 1.0);
    }
    const float td = (vs[n] - value[n]) / sigma;
    value_sum += double(td) * td;
    d_value[n] = -value_coef * td / sigma / float(N);
  }
  double entropy = 0;
  for (int64_t a = 0; a < A; ++a) {
    entropy += double(ls[a]) + 0.5 + double(half_log_2pi);
    d_ls[size_t(a)] -= o.entropy_coef;  // the bonus: - coef x mean_n entropy
  }
  auto d_log_std = torch::empty({A});
  for (int64_t a = 0; a < A; ++a) d_log_std.data_ptr<float>()[a] = float(d_ls[size_t(a)]);
  policy->tape_backward(tape_, d_mean_t, d_value_t, d_log_std);

  const double policy_loss = -policy_sum / double(N), value_loss = 0.5 * value_sum / double(N);
  l.policy = torch::scalar_tensor(policy_loss, torch::kFloat32);
  l.value = torch::scalar_tensor(value_loss, torch::kFloat32);
  double total = policy_loss + o.value_coef * value_loss;
  if (o.entropy_coef != 0) {
    l.entropy = torch::scalar_tensor(entropy, torch::kFloat32);
    total -= o.entropy_coef * entropy;
  }
  l.total = torch::scalar_tensor(total, torch::kFloat32);
  return true;
}

}  // namespace mpirl::learner
