#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>

#include "envs/env.h"
#include "kernels/returns.h"
#include "learner/algorithms/appo.h"
#include "learner/algorithms/impala.h"

using namespace mpirl;

namespace {
// Naive double-precision V-trace straight from the paper's sum, one (t, b) at a time; an episode
// boundary ends the sum after the step that ended it.
torch::Tensor naive_vs(const torch::Tensor& log_rhos, const torch::Tensor& term, const torch::Tensor& trunc,
                       const torch::Tensor& r, const torch::Tensor& v, const torch::Tensor& nv, double gamma,
                       double rho_bar, double c_bar, double lambda) {
  const int64_t T = r.size(0), B = r.size(1);
  auto vs = torch::zeros({T, B}, torch::kFloat64);
  auto a = [](const torch::Tensor& x, int64_t t, int64_t b) { return x[t][b].item<double>(); };
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      double acc = 0, prod = 1;
      for (int64_t k = t; k < T; ++k) {
        double rho = std::exp(a(log_rhos, k, b));
        double disc = gamma * (1 - a(term, k, b));
        double delta = std::min(rho_bar, rho) * (a(r, k, b) + disc * a(nv, k, b) - a(v, k, b));
        acc += prod * delta;
        if (a(term, k, b) > 0 || a(trunc, k, b) > 0) break;
        prod *= gamma * lambda * std::min(c_bar, rho);
      }
      vs[t][b] = a(v, t, b) + acc;
    }
  return vs;
}

kernels::VTraceReturns run(const torch::Tensor& log_rhos, const torch::Tensor& term, const torch::Tensor& trunc,
                           const torch::Tensor& r, const torch::Tensor& v, const torch::Tensor& nv, double gamma,
                           kernels::VTraceOptions o = {}) {
  return kernels::vtrace(log_rhos, gamma * (1 - term), (1 - term) * (1 - trunc), r, v, nv, o);
}

torch::Tensor col(std::vector<double> x) { return torch::tensor(x, torch::kFloat64).unsqueeze(1); }
}  // namespace

TEST(VTrace, HandComputedOnPolicyCases) {
  auto zero = col({0, 0, 0}), r = col({1, 1, 1}), v = col({1, 2, 3});
  // No boundary: vs_0 = 1 + .9 + .81 + .729 * 4 = 5.626.
  auto a = run(zero, zero, zero, r, v, col({2, 3, 4}), 0.9);
  EXPECT_NEAR(a.vs[0][0].item<double>(), 5.626, 1e-12);
  EXPECT_NEAR(a.vs[1][0].item<double>(), 5.14, 1e-12);
  EXPECT_NEAR(a.vs[2][0].item<double>(), 4.6, 1e-12);
  // Termination at t=1: no bootstrap, nothing flows back across the boundary.
  auto b = run(zero, col({0, 1, 0}), zero, r, v, col({2, 999, 4}), 0.9);
  EXPECT_NEAR(b.vs[0][0].item<double>(), 1.9, 1e-12);
  EXPECT_NEAR(b.vs[1][0].item<double>(), 1.0, 1e-12);
  EXPECT_NEAR(b.vs[2][0].item<double>(), 4.6, 1e-12);
  // Truncation at t=1 bootstraps from the last state's value (10).
  auto c = run(zero, zero, col({0, 1, 0}), r, v, col({2, 10, 4}), 0.9);
  EXPECT_NEAR(c.vs[0][0].item<double>(), 10.0, 1e-12);
  EXPECT_NEAR(c.vs[1][0].item<double>(), 10.0, 1e-12);
  EXPECT_NEAR(c.vs[2][0].item<double>(), 4.6, 1e-12);
  EXPECT_NEAR(c.advantages[0][0].item<double>(), 9.0, 1e-12);
  EXPECT_NEAR(c.advantages[1][0].item<double>(), 8.0, 1e-12);
  EXPECT_NEAR(c.advantages[2][0].item<double>(), 1.6, 1e-12);
}

TEST(VTrace, HandComputedOffPolicyClipping) {
  // rho = [2, 0.5], rho_bar = c_bar = 1: deltas use min(1, rho), traces c = min(1, rho).
  auto lr = col({std::log(2.0), std::log(0.5)}), z = col({0, 0});
  auto out = run(lr, z, z, col({1, 1}), col({0, 0}), col({0, 2}), 1.0);
  // delta_1 = 0.5 * (1 + 2 - 0) = 1.5; delta_0 = 1 * (1 + 0 - 0) = 1; vs_0 = 1 + 1 * 1 * 1.5 = 2.5
  EXPECT_NEAR(out.vs[1][0].item<double>(), 1.5, 1e-12);
  EXPECT_NEAR(out.vs[0][0].item<double>(), 2.5, 1e-12);
  // pg advantage at 0: min(1, 2) * (1 + vs_1 - 0) = 2.5; at 1: 0.5 * (1 + 2) = 1.5
  EXPECT_NEAR(out.pg_advantages[0][0].item<double>(), 2.5, 1e-12);
  EXPECT_NEAR(out.pg_advantages[1][0].item<double>(), 1.5, 1e-12);
}

TEST(VTrace, MatchesNaiveLoopWithRandomBoundaries) {
  torch::manual_seed(3);
  const int64_t T = 40, B = 7;
  for (auto [rho_bar, c_bar, lambda] : {std::tuple{1.0, 1.0, 1.0}, {0.8, 1.2, 0.95}, {2.0, 0.5, 0.9}}) {
    auto d = torch::kFloat64;
    auto log_rhos = torch::randn({T, B}, d) * 0.7;
    auto u = torch::rand({T, B}, d);
    auto term = (u < 0.07).to(d), trunc = ((u >= 0.07) & (u < 0.12)).to(d);
    auto r = torch::randn({T, B}, d), v = torch::randn({T, B}, d), nv = torch::randn({T, B}, d);
    kernels::VTraceOptions o{rho_bar, c_bar, lambda, 1.0};
    auto got = run(log_rhos, term, trunc, r, v, nv, 0.97, o);
    auto want = naive_vs(log_rhos, term, trunc, r, v, nv, 0.97, rho_bar, c_bar, lambda);
    EXPECT_LT((got.vs - want).abs().max().item<double>(), 1e-6);
    // float32 inputs agree with the double reference too
    auto got32 = run(log_rhos.to(torch::kFloat32), term.to(torch::kFloat32), trunc.to(torch::kFloat32),
                     r.to(torch::kFloat32), v.to(torch::kFloat32), nv.to(torch::kFloat32), 0.97, o);
    EXPECT_LT((got32.vs.to(d) - want).abs().max().item<double>(), 1e-4);
    // advantage = r + disc * (next vs of the same episode, or bootstrap) - v
    auto cont = (1 - term) * (1 - trunc);
    auto next_err = torch::cat({(want - v).slice(0, 1, T), torch::zeros({1, B}, d)});
    auto adv = r + 0.97 * (1 - term) * (nv + cont * next_err) - v;
    EXPECT_LT((got.advantages - adv).abs().max().item<double>(), 1e-6);
  }
}

namespace {
// The header's per-step definitions (kernels/returns.h), evaluated in plain doubles one (t, b) at a
// time, each column walked backwards from err_T = 0: the reference for vs, adv and pg_adv.
struct NaiveVTrace {
  torch::Tensor vs, adv, pg_adv;
};

NaiveVTrace naive_vtrace_steps(const torch::Tensor& log_rhos, const torch::Tensor& term, const torch::Tensor& trunc,
                               const torch::Tensor& r, const torch::Tensor& v, const torch::Tensor& nv, double gamma,
                               const kernels::VTraceOptions& o) {
  const int64_t T = r.size(0), B = r.size(1);
  auto a = [](const torch::Tensor& x, int64_t t, int64_t b) { return x[t][b].item<double>(); };
  NaiveVTrace out{torch::zeros({T, B}, torch::kFloat64), torch::zeros({T, B}, torch::kFloat64),
                  torch::zeros({T, B}, torch::kFloat64)};
  for (int64_t b = 0; b < B; ++b) {
    double err_next = 0;  // err_{t+1}
    for (int64_t t = T - 1; t >= 0; --t) {
      const double rho = std::exp(a(log_rhos, t, b));
      const bool ended = a(term, t, b) > 0 || a(trunc, t, b) > 0;
      const double discount = a(term, t, b) > 0 ? 0.0 : gamma;
      const double cont = ended ? 0.0 : 1.0;
      const double c = o.lambda * std::min(o.c_bar, rho);
      const double delta = std::min(o.rho_bar, rho) * (a(r, t, b) + discount * a(nv, t, b) - a(v, t, b));
      const double err = delta + discount * c * cont * err_next;
      const double adv = a(r, t, b) + discount * (a(nv, t, b) + cont * err_next) - a(v, t, b);
      out.vs[t][b] = a(v, t, b) + err;
      out.adv[t][b] = adv;
      out.pg_adv[t][b] = std::min(o.pg_rho_bar, rho) * adv;
      err_next = err;
    }
  }
  return out;
}
}  // namespace

TEST(VTrace, HandComputedPolicyGradientClipping) {
  // The case of HandComputedOffPolicyClipping (rho = [2, 0.5], rho_bar = c_bar = 1): the advantages
  // are [1 + vs_1, 1 + 2] = [2.5, 3], and only pg_rho_bar scales pg_adv: min(pg_rho_bar, rho) * adv.
  auto lr = col({std::log(2.0), std::log(0.5)}), z = col({0, 0});
  struct Want {
    double pg_rho_bar, pg0, pg1;
  };
  for (auto w : {Want{1.5, 1.5 * 2.5, 0.5 * 3.0}, Want{0.25, 0.25 * 2.5, 0.25 * 3.0}, Want{4.0, 2 * 2.5, 0.5 * 3.0}}) {
    auto out = run(lr, z, z, col({1, 1}), col({0, 0}), col({0, 2}), 1.0, {1.0, 1.0, 1.0, w.pg_rho_bar});
    EXPECT_NEAR(out.vs[0][0].item<double>(), 2.5, 1e-12) << w.pg_rho_bar;
    EXPECT_NEAR(out.vs[1][0].item<double>(), 1.5, 1e-12) << w.pg_rho_bar;
    EXPECT_NEAR(out.advantages[0][0].item<double>(), 2.5, 1e-12) << w.pg_rho_bar;
    EXPECT_NEAR(out.advantages[1][0].item<double>(), 3.0, 1e-12) << w.pg_rho_bar;
    EXPECT_NEAR(out.pg_advantages[0][0].item<double>(), w.pg0, 1e-12) << w.pg_rho_bar;
    EXPECT_NEAR(out.pg_advantages[1][0].item<double>(), w.pg1, 1e-12) << w.pg_rho_bar;
  }
}

// All three clipping levels apart (rho_bar != c_bar != pg_rho_bar != 1, lambda < 1), with
// terminations and truncations inside the sequence (at its first and last step, back to back, and
// one of each in the same column), against the step-by-step reference above.
TEST(VTrace, ClippedPolicyGradientMatchesNaiveStepLoop) {
  torch::manual_seed(11);
  const auto d = torch::kFloat64;
  const int64_t T = 11, B = 5;
  const double gamma = 0.93;
  // Episode ends per column: (t, 't'erminated or t'r'uncated); column 4 has none.
  const std::vector<std::vector<std::pair<int, char>>> ends = {
      {{3, 't'}}, {{0, 'r'}, {6, 't'}}, {{4, 'r'}, {5, 't'}, {10, 'r'}}, {{2, 't'}, {8, 'r'}, {10, 't'}}, {}};
  auto term = torch::zeros({T, B}, d), trunc = torch::zeros({T, B}, d);
  for (int64_t b = 0; b < B; ++b)
    for (auto [t, kind] : ends[size_t(b)]) (kind == 't' ? term : trunc)[t][b] = 1.0;
  auto log_rhos = torch::randn({T, B}, d) * 0.9;
  auto r = torch::randn({T, B}, d), v = torch::randn({T, B}, d);
  // next_value of a terminated step is never used: a large value there must not leak in.
  auto nv = torch::where(term > 0, torch::full({T, B}, 1e3, d), torch::randn({T, B}, d));
  const auto rhos = log_rhos.exp();
  for (auto o : {kernels::VTraceOptions{1.3, 0.7, 0.9, 0.6}, kernels::VTraceOptions{0.8, 1.6, 0.75, 1.9}}) {
    // Each clip is active somewhere and inactive somewhere, so swapping two of them is visible.
    for (double bar : {o.rho_bar, o.c_bar, o.pg_rho_bar}) {
      ASSERT_GT((rhos > bar).sum().item<int64_t>(), 3) << bar;
      ASSERT_GT((rhos < bar).sum().item<int64_t>(), 3) << bar;
    }
    auto want = naive_vtrace_steps(log_rhos, term, trunc, r, v, nv, gamma, o);
    // The step loop agrees with the paper's truncated sum (naive_vs above) on vs.
    auto want_sum = naive_vs(log_rhos, term, trunc, r, v, nv, gamma, o.rho_bar, o.c_bar, o.lambda);
    ASSERT_LT((want.vs - want_sum).abs().max().item<double>(), 1e-12);
    auto got = run(log_rhos, term, trunc, r, v, nv, gamma, o);
    EXPECT_LT((got.vs - want.vs).abs().max().item<double>(), 1e-12) << o.pg_rho_bar;
    EXPECT_LT((got.advantages - want.adv).abs().max().item<double>(), 1e-12) << o.pg_rho_bar;
    EXPECT_LT((got.pg_advantages - want.pg_adv).abs().max().item<double>(), 1e-12) << o.pg_rho_bar;
    // float32 inputs as well.
    auto f = [](const torch::Tensor& x) { return x.to(torch::kFloat32); };
    auto got32 = run(f(log_rhos), f(term), f(trunc), f(r), f(v), f(nv), gamma, o);
    EXPECT_LT((got32.vs.to(d) - want.vs).abs().max().item<double>(), 1e-4);
    EXPECT_LT((got32.pg_advantages.to(d) - want.pg_adv).abs().max().item<double>(), 1e-4);
  }
}

namespace {
envs::EnvSpec two_actions() {
  envs::EnvSpec s;
  s.id = "test", s.obs_shape = {1}, s.num_actions = 2;
  return s;
}
}  // namespace

TEST(Losses, AppoClipsRatioByAdvantageSign) {
  auto spec = two_actions();
  // T = 1, B = 2; target pi(a) = 0.5 (equal logits), behaviour mu(a) = 0.25 -> ratio 2.
  learner::TrainBatch b;
  b.obs = torch::zeros({2, 2, 1});
  b.actions = torch::zeros({1, 2}, torch::kInt64);
  b.rewards = torch::tensor({{1.0f, -1.0f}});
  b.terminated = torch::ones({1, 2});
  b.truncated = torch::zeros({1, 2});
  b.behaviour_logp = torch::full({1, 2}, std::log(0.25f));
  b.trunc_value = torch::zeros({1, 2});
  auto logits = torch::zeros({2, 2, 2}, torch::requires_grad());
  models::PolicyOutput out{logits, torch::zeros({2, 2}, torch::requires_grad())};
  learner::LossOptions o;
  o.appo_clip = 0.2;
  auto l = learner::appo_loss(spec, b, out, o);
  // A = +1: min(2, 1.2) = 1.2 (clipped); A = -1: min(-2, -1.2) = -2 -> loss = -(1.2 - 2) / 2 = 0.4
  EXPECT_NEAR(l.policy.item<float>(), 0.4f, 1e-6);
  EXPECT_NEAR(l.clip_fraction.item<float>(), 1.0f, 1e-6);
  l.policy.backward();
  auto g = logits.grad();
  EXPECT_EQ(g[0][0].abs().sum().item<float>(), 0.0f);  // clipped column: no gradient
  EXPECT_GT(g[0][1].abs().sum().item<float>(), 0.0f);  // unclipped column learns
  // Value loss: targets are the rewards (terminated, V = 0) -> 0.5 * mean(1, 1) = 0.5
  EXPECT_NEAR(l.value.item<float>(), 0.5f, 1e-6);
  EXPECT_NEAR(l.entropy.item<float>(), std::log(2.0f), 1e-6);
}

TEST(Losses, ImpalaPolicyTermIsRhoWeightedAdvantage) {
  auto spec = two_actions();
  learner::TrainBatch b;
  b.obs = torch::zeros({2, 1, 1});
  b.actions = torch::ones({1, 1}, torch::kInt64);
  b.rewards = torch::tensor({{2.0f}});
  b.terminated = torch::ones({1, 1});
  b.truncated = torch::zeros({1, 1});
  b.behaviour_logp = torch::full({1, 1}, std::log(0.25f));  // rho = 0.5 / 0.25 = 2 -> clipped to 1
  b.trunc_value = torch::zeros({1, 1});
  models::PolicyOutput out{torch::zeros({2, 1, 2}), torch::tensor({{0.5f}, {0.0f}})};
  learner::LossOptions o;
  auto l = learner::impala_loss(spec, b, out, o);
  // pg_adv = min(1, 2) * (2 - 0.5) = 1.5; loss = -log(0.5) * 1.5
  EXPECT_NEAR(l.policy.item<float>(), -std::log(0.5f) * 1.5f, 1e-5);
  // vs = 0.5 + 1 * (2 - 0.5) = 2 -> value loss 0.5 * 1.5^2
  EXPECT_NEAR(l.value.item<float>(), 0.5f * 2.25f, 1e-5);
  EXPECT_NEAR(l.mean_rho.item<float>(), 2.0f, 1e-5);
}
