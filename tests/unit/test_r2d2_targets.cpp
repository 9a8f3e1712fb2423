// R2D2's targets (learner/algorithms/r2d2/targets.h): the value rescaling and its inverse, n-step
// returns against a float64 loop written apart from the tensor code and against hand-computed
// values, the sequence priority.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "learner/algorithms/r2d2/targets.h"

using namespace mpirl::learner;

namespace {
// G_t walked step by step: the definition in targets.h, one (t, b) at a time.
double naive_return(const torch::Tensor& r, const torch::Tensor& term, const torch::Tensor& trunc,
                    const torch::Tensor& tv, const torch::Tensor& boot, int64_t t, int64_t b, double gamma, int n) {
  const int64_t T = r.size(0);
  auto at = [&](const torch::Tensor& x, int64_t i) { return x[i][b].item<double>(); };
  double g = 0, disc = 1;
  for (int k = 0; k < n; ++k) {
    const int64_t i = t + k;
    g += disc * at(r, i);
    if (at(term, i) > 0.5) return g;
    if (at(trunc, i) > 0.5) return g + disc * gamma * at(tv, i);
    disc *= gamma;
    if (i == T - 1) return g + disc * at(boot, T);
  }
  return g + disc * at(boot, t + n);
}
}  // namespace

TEST(R2D2, ValueRescalingHandValuesAndInverse) {
  const double eps = 1e-3;
  auto x = torch::tensor({0.0, 3.0, -8.0}, torch::kFloat64);
  auto y = r2d2::rescale(x, eps);
  EXPECT_DOUBLE_EQ(y[0].item<double>(), 0.0);
  EXPECT_NEAR(y[1].item<double>(), 1.003, 1e-15);   // sqrt(4) - 1 + 0.003
  EXPECT_NEAR(y[2].item<double>(), -2.008, 1e-15);  // -(sqrt(9) - 1) - 0.008
  for (double e : {1e-3, 1e-2, 0.0}) {
    auto v = torch::linspace(-1e4, 1e4, 2001, torch::kFloat64);
    auto back = r2d2::unrescale(r2d2::rescale(v, e), e);
    EXPECT_LT(((back - v).abs() / (v.abs() + 1)).max().item<double>(), 1e-9) << "eps " << e;
    auto w = torch::linspace(-300, 300, 601, torch::kFloat64);  // and the other way round
    EXPECT_LT(((r2d2::rescale(r2d2::unrescale(w, e), e) - w).abs()).max().item<double>(), 1e-9) << "eps " << e;
    // float32, as the learner computes it: h^-1 of small values keeps float32's precision
    auto w32 = torch::linspace(-3, 3, 601);
    auto want = r2d2::unrescale(w32.to(torch::kFloat64), e);
    EXPECT_LT(((r2d2::unrescale(w32, e).to(torch::kFloat64) - want).abs() / (want.abs() + 1)).max().item<double>(), 1e-6)
        << "eps " << e;
  }
}

TEST(R2D2, NStepReturnsByHand) {
  // Three columns, T = 4, n = 2, gamma = 0.5: a termination at t = 1; a truncation at t = 1 (value 8);
  // no episode end (bootstraps at t + n, or at the sequence's end, boot[4]).
  const auto f = torch::kFloat64;
  auto r = torch::tensor({1.0, 1.0, 1.0, 2.0, 1.0, 1.0, 3.0, 1.0, 1.0, 4.0, 1.0, 1.0}, f).reshape({4, 3});
  auto term = torch::zeros({4, 3}, f), trunc = torch::zeros({4, 3}, f), tv = torch::zeros({4, 3}, f);
  term[1][0] = 1;
  trunc[1][1] = 1;
  tv[1][1] = 8;
  auto boot = torch::tensor({0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 6.0, 6.0, 6.0, 0.0, 0.0, 0.0, 50.0, 4.0, 4.0}, f).reshape({5, 3});
  auto g = r2d2::n_step_returns(r, term, trunc, tv, boot, 0.5, 2);
  const double want[4][3] = {{2.0, 3.5, 3.0},     // 1 + .5*2 (ends); 1 + .5 + .25*8; 1 + .5 + .25*6
                             {2.0, 5.0, 1.5},     // 2 (ends); 1 + .5*8; 1 + .5 + .25*boot[3]=0
                             {17.5, 2.5, 2.5},    // 3 + .5*4 + .25*50; 1 + .5 + .25*4
                             {29.0, 3.0, 3.0}};   // 4 + .5*50; 1 + .5*4
  for (int t = 0; t < 4; ++t)
    for (int b = 0; b < 3; ++b) EXPECT_DOUBLE_EQ(g[t][b].item<double>(), want[t][b]) << "t " << t << " b " << b;
}

TEST(R2D2, NStepReturnsAgainstALoop) {
  torch::manual_seed(3);
  const auto f = torch::kFloat64;
  const int64_t T = 11, B = 16;
  for (int n : {1, 2, 5, 13}) {
    SCOPED_TRACE(n);
    auto r = torch::randn({T, B}, f);
    auto term = (torch::rand({T, B}, f) < 0.15).to(f), trunc = (torch::rand({T, B}, f) < 0.15).to(f);
    auto tv = torch::randn({T, B}, f) * 10, boot = torch::randn({T + 1, B}, f) * 10;
    auto g = r2d2::n_step_returns(r, term, trunc, tv, boot, 0.97, n);
    ASSERT_GT((term * trunc).sum().item<double>(), 0) << "some steps are both terminated and truncated";
    double worst = 0;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t b = 0; b < B; ++b)
        worst = std::max(worst, std::abs(g[t][b].item<double>() - naive_return(r, term, trunc, tv, boot, t, b, 0.97, n)));
    EXPECT_LT(worst, 1e-12);
  }
}

TEST(R2D2, SequencePrioritiesByHand) {
  auto d = torch::tensor({1.0, -2.0, -3.0, 0.5, 0.5, 0.5}, torch::kFloat64).reshape({3, 2});
  auto p = r2d2::sequence_priorities(d, 0.9);
  EXPECT_NEAR(p[0].item<double>(), 0.9 * 3 + 0.1 * 1.5, 1e-15);
  EXPECT_NEAR(p[1].item<double>(), 0.9 * 2 + 0.1 * 1.0, 1e-15);
}
