// Every recurrent core: sequence mode equals repeated step mode, with resets anywhere, and
// gradients flow through sequence mode.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>

#include "models/core.h"
#include "models/policy.h"

using namespace mpirl;

class CoreCase : public ::testing::TestWithParam<std::string> {};

TEST_P(CoreCase, SequenceEqualsRepeatedSteps) {
  torch::manual_seed(3);
  models::CoreOptions o;
  o.kind = GetParam();
  o.input = 6;
  o.hidden = 10;
  o.state = 8;
  auto core = models::make_core(o);
  ASSERT_TRUE(core);
  EXPECT_EQ(core->state_size(), models::core_state_size(o));
  const int64_t T = 23, B = 5;
  auto x = torch::randn({T, B, o.input});
  auto is_init = (torch::rand({T, B}) < 0.15).to(torch::kFloat32);
  is_init[0][0] = 1;
  // A non-trivial starting state: run some steps first.
  auto s0 = core->initial_state(B);
  for (int i = 0; i < 4; ++i) s0 = core->step(torch::randn({B, o.input}), s0, torch::zeros({B})).second;
  s0 = s0.detach();
  auto [ys, sT] = core->sequence(x, s0, is_init);
  ASSERT_EQ(ys.sizes(), (std::vector<int64_t>{T, B, core->output_size()}));
  auto s = s0;
  double worst = 0;
  for (int64_t t = 0; t < T; ++t) {
    auto [y, next] = core->step(x[t], s, is_init[t]);
    worst = std::max(worst, (y - ys[t]).abs().max().item<double>());
    s = next;
  }
  EXPECT_LT(worst, 1e-5) << o.kind;
  EXPECT_LT((s - sT).abs().max().item<double>(), 1e-5) << o.kind;
  // A reset makes the output independent of everything before it.
  auto x2 = x.clone();
  x2.slice(0, 0, 10).add_(1.0);
  auto init2 = is_init.clone();
  init2[10].fill_(1);
  auto a = core->sequence(x, s0, init2).first.slice(0, 10);
  auto b = core->sequence(x2, torch::randn_like(s0), init2).first.slice(0, 10);
  EXPECT_LT((a - b).abs().max().item<double>(), 1e-5) << o.kind;
  // Gradients reach every parameter through sequence mode.
  core->zero_grad();
  ys.pow(2).sum().backward();
  for (auto& p : core->named_parameters()) {
    ASSERT_TRUE(p.value().grad().defined()) << o.kind << " " << p.key();
    EXPECT_TRUE(torch::isfinite(p.value().grad()).all().item<bool>()) << o.kind << " " << p.key();
  }
}

INSTANTIATE_TEST_SUITE_P(Cores, CoreCase, ::testing::Values("gru", "lstm", "lru", "ssm", "mingru", "ffm"),
                         [](const auto& info) { return info.param; });

// Autograd through sequence mode against central finite differences, in float64: resets inside the
// sequence (and one at t = 0), a nonzero state0, L = sum(y * Wy) + sum(state_T * Ws) with fixed
// random Wy, Ws; every element of the input sequence, of state0 and of every parameter.
namespace {

// dL/dt[i] by central differences, perturbing t's storage in place (t: contiguous float64).
torch::Tensor finite_difference(const torch::Tensor& t, const std::function<double()>& loss, double eps) {
  torch::NoGradGuard ng;
  auto g = torch::zeros_like(t);
  double* p = t.data_ptr<double>();
  double* gp = g.data_ptr<double>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double orig = p[i];
    p[i] = orig + eps;
    const double up = loss();
    p[i] = orig - eps;
    const double down = loss();
    p[i] = orig;
    gp[i] = (up - down) / (2 * eps);
  }
  return g;
}

// Largest |autograd - numeric| / max(|numeric|, 1e-2): relative, absolute for tiny gradients.
double worst_error(const torch::Tensor& autograd, const torch::Tensor& numeric) {
  return ((autograd - numeric).abs() / numeric.abs().clamp_min(1e-2)).max().item<double>();
}

}  // namespace

class CoreGradCase : public ::testing::TestWithParam<std::string> {};

TEST_P(CoreGradCase, SequenceGradientsMatchFiniteDifferences) {
  torch::manual_seed(17);
  models::CoreOptions o;
  o.kind = GetParam();
  o.input = 3;
  o.hidden = 4;
  o.state = 3;
  o.ffm_context = 2;
  auto core = models::make_core(o);
  ASSERT_TRUE(core);
  core->to(torch::kFloat64);
  const auto d = torch::kFloat64;
  const int64_t T = 7, B = 3, S = core->state_size();
  auto x = torch::randn({T, B, o.input}, d);
  auto s0 = torch::randn({B, S}, d) * 0.5;
  // Column 0 resets at t = 3, column 1 at t = 0 (state0 unused) and t = 5, column 2 never.
  auto is_init = torch::zeros({T, B}, d);
  is_init[3][0] = 1;
  is_init[0][1] = 1;
  is_init[5][1] = 1;
  auto probe = core->sequence(x, s0, is_init);
  ASSERT_EQ(probe.first.scalar_type(), d) << o.kind;
  ASSERT_EQ(probe.second.sizes(), s0.sizes()) << o.kind;
  auto Wy = torch::randn_like(probe.first), Ws = torch::randn_like(probe.second);
  auto loss_of = [&](const torch::Tensor& xs, const torch::Tensor& st0) {
    auto [y, sT] = core->sequence(xs, st0, is_init);
    return (y * Wy).sum() + (sT * Ws).sum();
  };
  auto numeric_loss = [&] { return loss_of(x, s0).item<double>(); };

  auto xg = x.clone().requires_grad_(true), sg = s0.clone().requires_grad_(true);
  core->zero_grad();
  loss_of(xg, sg).backward();
  ASSERT_TRUE(xg.grad().defined() && sg.grad().defined()) << o.kind;

  const double eps = 1e-6, tol = 1e-5;
  EXPECT_LT(worst_error(xg.grad(), finite_difference(x, numeric_loss, eps)), tol) << o.kind << " dL/dx";
  auto gs_num = finite_difference(s0, numeric_loss, eps);
  EXPECT_LT(worst_error(sg.grad(), gs_num), tol) << o.kind << " dL/dstate0";
  // The reset at t = 0 cuts column 1 off state0; the other columns depend on it.
  EXPECT_EQ(sg.grad()[1].abs().max().item<double>(), 0.0) << o.kind;
  EXPECT_GT(gs_num[0].abs().max().item<double>(), 1e-4) << o.kind;
  EXPECT_GT(gs_num[2].abs().max().item<double>(), 1e-4) << o.kind;
  int checked = 0;
  for (auto& p : core->named_parameters()) {
    ASSERT_TRUE(p.value().grad().defined()) << o.kind << " " << p.key();
    ASSERT_EQ(p.value().scalar_type(), d) << o.kind << " " << p.key();
    ASSERT_TRUE(p.value().is_contiguous()) << o.kind << " " << p.key();
    auto num = finite_difference(p.value(), numeric_loss, eps);
    EXPECT_LT(worst_error(p.value().grad(), num), tol) << o.kind << " dL/d" << p.key();
    checked += num.abs().max().item<double>() > 1e-6;
  }
  EXPECT_GT(checked, 0) << o.kind;
}

INSTANTIATE_TEST_SUITE_P(Cores, CoreGradCase, ::testing::Values("gru", "lstm", "lru", "ssm", "mingru", "ffm"),
                         [](const auto& info) { return info.param; });

TEST(Policy, RecurrentUnrollEqualsSteps) {
  torch::manual_seed(4);
  envs::EnvSpec spec;
  spec.obs_shape = {4};
  spec.num_actions = 4;
  models::ModelOptions m;
  m.hidden = {16};
  m.core = "lru";
  m.core_size = 12;
  m.core_state = 6;
  models::Policy p(spec, m);
  const int64_t T = 9, B = 3;
  auto obs = torch::randn({T, B, 4});
  auto init = (torch::rand({T, B}) < 0.2).to(torch::kFloat32);
  auto s0 = torch::randn({B, p->state_size()});
  auto seq = p->unroll(obs, init, s0);
  auto s = s0.clone();
  for (int64_t t = 0; t < T; ++t) {
    auto out = p->step(obs[t], init[t], s);
    EXPECT_LT((out.dist - seq.dist[t]).abs().max().item<double>(), 1e-5);
    EXPECT_LT((out.value - seq.value[t]).abs().max().item<double>(), 1e-5);
  }
  EXPECT_THROW(p->forward(obs[0]), std::exception);
}
