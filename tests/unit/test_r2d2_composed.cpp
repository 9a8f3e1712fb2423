// R2D2's loss composed end to end (learner/algorithms/r2d2/r2d2.cpp) against a float64 walk written
// apart from it: random online and target networks, a burn-in, n = 3, terminations and truncations
// inside the sequences. The test takes only the networks' raw outputs (logits and value) from the
// code; the duelling Q, the double-Q choice, h^-1 (by bisection on h), the n-step returns, h, the
// TD errors, the priorities and the loss are its own. test_r2d2.cpp has a hand-computed batch with
// constant Q-values (n = 1); this one has Q-values that differ per step, so a target chosen by the
// target network's own argmax, a missed burn-in shift or a bootstrap one step off would show.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <vector>

#include "core/config.h"
#include "envs/registry.h"
#include "learner/algorithms/r2d2/r2d2.h"
#include "learner/trainer.h"
#include "models/policy.h"
#include "r2d2_reference.h"

using namespace mpirl;
using namespace mpirl::learner;

namespace r2d2_walk {  // named: the unity build merges this file with test_r2d2.cpp's helpers
// Q = V + A - mean A, per row, in float64. dist [T1, B, A], value [T1, B] -> [T1][B][A]
std::vector<std::vector<std::vector<double>>> duelling(const torch::Tensor& dist, const torch::Tensor& value) {
  auto d = dist.to(torch::kFloat64).contiguous(), v = value.to(torch::kFloat64).contiguous();
  const int64_t T1 = d.size(0), B = d.size(1), A = d.size(2);
  std::vector<std::vector<std::vector<double>>> q(T1, std::vector<std::vector<double>>(B, std::vector<double>(A)));
  for (int64_t t = 0; t < T1; ++t)
    for (int64_t b = 0; b < B; ++b) {
      double mean = 0;
      for (int64_t a = 0; a < A; ++a) mean += d[t][b][a].item<double>() / A;
      for (int64_t a = 0; a < A; ++a) q[t][b][a] = v[t][b].item<double>() + d[t][b][a].item<double>() - mean;
    }
  return q;
}

int64_t argmax(const std::vector<double>& x) {
  int64_t best = 0;
  for (int64_t a = 1; a < static_cast<int64_t>(x.size()); ++a)
    if (x[a] > x[best]) best = a;
  return best;
}
}  // namespace r2d2_walk

TEST(R2D2, ComposedLossAgainstAFloat64Walk) {
  const int64_t T = 10, B = 6, bi = 2;
  const int n = 3;
  const double gamma = 0.9, eps = 1e-3, eta = 0.9;
  Config cfg = load_config("", {"learner.algo=\"r2d2\"", "learner.value_norm=\"none\"", "actor.rollout_len=10",
                                "r2d2.burn_in=2", "r2d2.n_step=3", "learner.gamma=0.9", "r2d2.rescale_eps=0.001",
                                "r2d2.priority_eta=0.9", "model.hidden=[16]", "env.id=\"CartPole-v1\""});
  auto spec = envs::env_spec(cfg);
  NoReducer none;
  torch::manual_seed(11);
  Trainer tr(cfg, spec, torch::kCPU, none, StepMode::Eager);
  R2D2 algo(cfg.r2d2);
  algo.attach(tr.policy().ptr(), [&] { return models::Policy(spec, models::model_options(cfg)).ptr(); });
  {  // the target network: the online one moved, so the two disagree on some argmaxes
    torch::NoGradGuard g;
    for (auto& p : algo.target().parameters()) p.add_(torch::randn_like(p) * 0.5);
  }
  TrainBatch b;
  b.obs = torch::randn({T + 1, B, spec.obs_size()}) * 2;
  b.is_init = torch::zeros({T + 1, B});
  b.actions = torch::randint(0, spec.num_actions, {T, B}, torch::kInt64);
  b.rewards = torch::randn({T, B});
  b.terminated = (torch::rand({T, B}) < 0.15).to(torch::kFloat32);
  b.truncated = (torch::rand({T, B}) < 0.15).to(torch::kFloat32);
  b.trunc_value = torch::randn({T, B}) * 5;
  b.behaviour_logp = torch::zeros({T, B});
  ASSERT_GT(b.terminated.slice(0, bi).sum().item<double>(), 0);
  ASSERT_GT(b.truncated.slice(0, bi).sum().item<double>(), 0);

  auto out = algo.forward(*tr.policy(), b);
  auto l = algo.loss(spec, b, out, loss_options(cfg));

  // The walk: both networks' raw outputs over the steps after the burn-in (an MLP: no state).
  torch::Tensor on_dist, on_value, tg_dist, tg_value;
  {
    torch::NoGradGuard g;
    auto on = tr.policy()->unroll(b.obs.slice(0, bi), b.is_init.slice(0, bi), torch::Tensor());
    auto tg = algo.target().unroll(b.obs.slice(0, bi), b.is_init.slice(0, bi), torch::Tensor());
    on_dist = on.dist, on_value = on.value, tg_dist = tg.dist, tg_value = tg.value;
  }
  const auto qo = r2d2_walk::duelling(on_dist, on_value), qt = r2d2_walk::duelling(tg_dist, tg_value);
  const int64_t L = T - bi;  // trained steps per sequence
  std::vector<std::vector<double>> boot(L + 1, std::vector<double>(B));
  int disagree = 0;
  for (int64_t t = 0; t <= L; ++t)
    for (int64_t c = 0; c < B; ++c) {
      const int64_t a = r2d2_walk::argmax(qo[t][c]);  // double Q: the online network picks, the target values
      disagree += a != r2d2_walk::argmax(qt[t][c]);
      boot[t][c] = r2d2_reference::h_inverse(qt[t][c][a], eps);
    }
  ASSERT_GT(disagree, 0) << "the networks agree everywhere: double Q would not be told from max Q";
  auto at = [](const torch::Tensor& x, int64_t t, int64_t c) { return x[t][c].item<double>(); };
  double loss = 0;
  for (int64_t c = 0; c < B; ++c) {
    double max_abs = 0, sum_abs = 0;
    for (int64_t t = 0; t < L; ++t) {
      double g = 0, disc = 1;
      bool done = false;
      for (int k = 0; k < n && !done; ++k) {
        const int64_t i = t + k, s = bi + i;  // s: the step in the batch, after the burn-in
        g += disc * at(b.rewards, s, c);
        disc *= gamma;
        if (at(b.terminated, s, c) > 0.5) {
          done = true;
        } else if (at(b.truncated, s, c) > 0.5) {
          g += disc * at(b.trunc_value, s, c);
          done = true;
        } else if (i == L - 1) {
          g += disc * boot[L][c];
          done = true;
        } else if (k == n - 1) {
          g += disc * boot[i + 1][c];
        }
      }
      const double delta = qo[t][c][b.actions[bi + t][c].item<int64_t>()] - r2d2_reference::h(g, eps);
      loss += 0.5 * delta * delta / (L * B);
      max_abs = std::max(max_abs, std::abs(delta));
      sum_abs += std::abs(delta);
    }
    EXPECT_NEAR(l.priorities[c].item<double>(), eta * max_abs + (1 - eta) * sum_abs / L, 1e-4) << "sequence " << c;
  }
  EXPECT_NEAR(l.total.item<double>(), loss, 1e-4 * std::max(1.0, loss));
}
