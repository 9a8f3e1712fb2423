// Every recurrent core: sequence mode equals repeated step mode, with resets anywhere, and
// gradients flow through sequence mode.
#include <gtest/gtest.h>
#include <torch/torch.h>

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
