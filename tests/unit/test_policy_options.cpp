// The model options of issue 41. model.critic = "separate": the value has its own MLP, so the value
// loss moves none of the policy's parameters and the policy loss none of the critic's; its value is
// the one a naive forward pass of its layers gives; it is refused where features are shared by
// construction. model.init = "orthogonal" and model.log_std_init against their definitions.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "core/config.h"
#include "core/error.h"
#include "envs/registry.h"
#include "models/policy.h"
#include "tests/common/config_with.h"

using namespace mpirl;

using mpirl::testing::cfg_with;

TEST(SeparateCritic, ValueLossMovesOnlyTheCritic) {
  auto cfg = cfg_with({"env.id=\"Pendulum-v1\"", "model.critic=\"separate\"", "model.hidden=[16, 8]",
                       "model.obs_norm=true"});
  auto spec = envs::env_spec(cfg);
  models::Policy pol(spec, models::model_options(cfg));
  {
    torch::NoGradGuard g;  // non-trivial observation statistics
    pol->obs_shift().copy_(torch::tensor({0.5, -0.25, 1.0}));
    pol->obs_scale().copy_(torch::tensor({2.0, 0.5, 1.5}));
  }
  torch::manual_seed(5);
  auto obs = torch::randn({4, 3, 3});
  auto out = pol->unroll(obs, torch::zeros({4, 3}), torch::Tensor());
  // The value by hand: tanh layers critic0, critic1, then v, over the normalised observations.
  auto params = pol->named_parameters();
  auto x = ((obs - pol->obs_shift()) * pol->obs_scale()).clamp(-10, 10);
  auto h = torch::tanh(torch::matmul(x, params["critic0.weight"].t()) + params["critic0.bias"]);
  h = torch::tanh(torch::matmul(h, params["critic1.weight"].t()) + params["critic1.bias"]);
  auto v = (torch::matmul(h, params["v.weight"].t()) + params["v.bias"]).squeeze(-1);
  EXPECT_LT((out.value - v).abs().max().item<double>(), 1e-6);
  // value_after (the truncation bootstrap) is the same function.
  EXPECT_LT((pol->value_after(obs[0], torch::Tensor()) - v[0]).abs().max().item<double>(), 1e-6);

  out.value.square().mean().backward();
  for (auto& p : pol->named_parameters()) {
    const bool critic = p.key().rfind("critic", 0) == 0 || p.key().rfind("v.", 0) == 0;
    const bool moved = p.value().grad().defined() && p.value().grad().abs().sum().item<double>() > 0;
    EXPECT_EQ(moved, critic) << p.key();
  }
  pol->zero_grad();
  auto out2 = pol->unroll(obs, torch::zeros({4, 3}), torch::Tensor());
  out2.dist.square().mean().backward();
  for (auto& p : pol->named_parameters()) {
    const bool critic = p.key().rfind("critic", 0) == 0 || p.key().rfind("v.", 0) == 0;
    const bool moved = p.value().grad().defined() && p.value().grad().abs().sum().item<double>() > 0;
    EXPECT_EQ(moved, !critic) << p.key();
  }
}

TEST(SeparateCritic, SharedCriticReadsThePolicyFeatures) {
  // The default: the value's gradient reaches the torso.
  auto cfg = cfg_with({"env.id=\"Pendulum-v1\""});
  models::Policy pol(envs::env_spec(cfg), models::model_options(cfg));
  auto out = pol->unroll(torch::randn({2, 2, 3}), torch::zeros({2, 2}), torch::Tensor());
  out.value.sum().backward();
  EXPECT_GT(pol->named_parameters()["torso0.weight"].grad().abs().sum().item<double>(), 0);
  EXPECT_EQ(pol->named_parameters().find("critic0.weight"), nullptr);
}

TEST(SeparateCritic, RefusedWithACoreOrACnn) {
  auto cfg = cfg_with({"env.id=\"Pendulum-v1\"", "model.critic=\"separate\"", "model.core=\"gru\""});
  try {
    models::validate_model_config(cfg, envs::env_spec(cfg));
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("model.critic"), std::string::npos) << e.what();
  }
  EXPECT_THROW(cfg_with({"model.critic=\"twin\""}), ConfigError);
}

TEST(PolicyInit, OrthogonalWithTheGainsOfEachLayer) {
  auto cfg = cfg_with({"env.id=\"Pendulum-v1\"", "model.critic=\"separate\"", "model.init=\"orthogonal\"",
                       "model.hidden=[16, 8]", "model.log_std_init=0.0"});
  models::Policy pol(envs::env_spec(cfg), models::model_options(cfg));
  auto p = pol->named_parameters();
  // An orthogonal W [out, in] with gain g: W W^T = g^2 I when out <= in, W^T W = g^2 I otherwise.
  auto gram_error = [](const torch::Tensor& w, double gain) {
    auto g = w.size(0) <= w.size(1) ? torch::matmul(w, w.t()) : torch::matmul(w.t(), w);
    return (g - gain * gain * torch::eye(g.size(0))).abs().max().item<double>();
  };
  for (const char* name : {"torso0.weight", "torso1.weight", "critic0.weight", "critic1.weight"})
    EXPECT_LT(gram_error(p[name], std::sqrt(2.0)), 1e-5) << name;
  EXPECT_LT(gram_error(p["pi.weight"], 0.01), 1e-7);
  EXPECT_LT(gram_error(p["v.weight"], 1.0), 1e-5);
  for (const char* name : {"torso0.bias", "critic1.bias", "pi.bias", "v.bias"})
    EXPECT_EQ(p[name].abs().sum().item<double>(), 0.0) << name;
  EXPECT_EQ(p["log_std"].abs().sum().item<double>(), 0.0);
  // The default init is not orthogonal (LibTorch's uniform), with the policy head scaled by 0.01.
  auto d = cfg_with({"env.id=\"Pendulum-v1\"", "model.hidden=[16, 8]"});
  models::Policy def(envs::env_spec(d), models::model_options(d));
  EXPECT_GT(gram_error(def->named_parameters()["torso1.weight"], std::sqrt(2.0)), 0.1);
  EXPECT_NEAR(def->named_parameters()["log_std"][0].item<double>(), -0.5, 1e-7);
}
