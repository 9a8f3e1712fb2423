// PopArt (learner.value_norm = "popart", learner/normalizers.h) with a model.python module: the
// statistics by hand, the value in return units preserved through the rescaling of the module's
// own value_head, and the start-up check of models/policy_options.cpp (no value_head, a wrong
// shape, something after value_head, value_head read by the policy), each refused with a message
// naming it. And a frozen parameter of a module (requires_grad=False) stays frozen through updates.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "core/config.h"
#include "core/error.h"
#include "envs/registry.h"
#include "learner/normalizers.h"
#include "learner/trainer.h"
#include "models/policy.h"
#include "tests/common/train_batches.h"

using namespace mpirl;
using namespace mpirl::learner;

namespace {

// A small MLP with the model.python contract; `value_layer` builds the value's layer (and may add
// lines), `dist` and `value` are the expressions of the outputs from the features h (unroll's; step
// returns the same unless `step_value` is given). Written to a temporary name and renamed, so that a
// test process importing it never reads a partial file.
std::string module_file(const std::string& name, const std::string& value_layer, const std::string& value,
                        const std::string& dist = "self.pi(h)", const std::string& step_value = "v") {
  const auto dir = std::filesystem::temp_directory_path() / "mpirl-unit-python-popart";
  std::filesystem::create_directories(dir);
  const auto p = (dir / (name + ".py")).string();
  const auto tmp = p + "." + std::to_string(::getpid());
  std::ofstream(tmp) << "import torch\n"
                        "class M(torch.nn.Module):\n"
                        "    def __init__(self, spec):\n"
                        "        super().__init__()\n"
                        "        self.body = torch.nn.Linear(spec['obs_shape'][0], 16)\n"
                        "        self.pi = torch.nn.Linear(16, spec['num_actions'])\n"
                        "        self."
                     << value_layer
                     << "\n"
                        "    def unroll(self, obs, is_init, state):\n"
                        "        h = torch.tanh(self.body(obs))\n"
                        "        return "
                     << dist << ", " << value
                     << "\n"
                        "    def step(self, obs, is_init, state):\n"
                        "        h = torch.tanh(self.body(obs))\n"
                        "        d, v = self.unroll(obs, is_init, state)\n"
                        "        return d, "
                     << step_value
                     << ", state\n"
                        "def make(spec, options):\n"
                        "    return M(spec)\n";
  std::filesystem::rename(tmp, p);
  return p;
}

std::string good_module() {
  return module_file("good", "value_head = torch.nn.Linear(16, 1)", "self.value_head(h).squeeze(-1)");
}

Config popart_config(const std::string& file, const std::string& norm = "popart") {
  return load_config("", {"model.python=\"" + file + ":make\"", "learner.value_norm=\"" + norm + "\""});
}

// validate_model_config's message, or "" when it accepts the module.
std::string refusal(const Config& cfg) {
  try {
    models::validate_model_config(cfg, envs::env_spec(cfg));
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

torch::Tensor head_weight(models::Policy& p) {
  const auto* w = p->named_parameters().find("py.value_head.weight");
  return w ? *w : torch::Tensor();
}

}  // namespace

TEST(PythonPopArt, StatisticsByHandAndTheModulesValueHeadRescaled) {
  const Config cfg = popart_config(good_module());
  const auto spec = envs::env_spec(cfg);
  models::Policy pol(spec, models::model_options(cfg));
  PopArt popart(pol, 0.4, {});
  torch::manual_seed(9);
  const auto obs = torch::randn({1, 6, 4});
  const auto init = torch::zeros({1, 6});
  const auto state0 = torch::zeros({6, 0});
  torch::NoGradGuard g;
  auto value = [&] { return pol->unroll(obs, init, state0).value; };
  const auto before = value().clone();
  ASSERT_TRUE(head_weight(pol).defined());
  const auto w0 = head_weight(pol).clone();
  // The module's parameter is the policy's (the same tensor), so PopArt moves the module's.
  torch::Tensor shared;
  for (auto& [name, t] : pol->python_model()->parameters())
    if (name == "value_head.weight") shared = t;
  ASSERT_TRUE(shared.defined());
  ASSERT_TRUE(shared.is_same(head_weight(pol)));
  // First update: weight 1: mu = 10, E[x^2] = 136 -> sigma = 6; the head's weight is divided by 6.
  popart.update(torch::tensor(10.0), torch::tensor(136.0));
  EXPECT_NEAR(popart.mu().item<double>(), 10.0, 1e-9);
  EXPECT_NEAR(popart.sigma().item<double>(), 6.0, 1e-9);
  EXPECT_NEAR(pol->value_shift().item<double>(), 10.0, 1e-6);
  EXPECT_NEAR(pol->value_scale().item<double>(), 6.0, 1e-6);
  EXPECT_LT((shared - w0 / 6.0).abs().max().item<double>(), 1e-7);
  EXPECT_LT((value() - before).abs().max().item<double>(), 1e-4);
  // Second: weight 0.5: mu = 15, sigma = sqrt(318 - 225).
  popart.update(torch::tensor(20.0), torch::tensor(500.0));
  EXPECT_NEAR(popart.sigma().item<double>(), std::sqrt(93.0), 1e-9);
  EXPECT_LT((shared - w0 / std::sqrt(93.0)).abs().max().item<double>(), 1e-6);
  EXPECT_LT((value() - before).abs().max().item<double>(), 1e-4);
  // A skipped step moves nothing.
  const auto w2 = shared.clone();
  popart.update(torch::tensor(-5.0), torch::tensor(30.0), torch::ones({}));
  EXPECT_NEAR(popart.mu().item<double>(), 15.0, 1e-9);
  EXPECT_TRUE(shared.equal(w2));
}

TEST(PythonPopArt, StartCheckNamesWhatIsWrong) {
  EXPECT_EQ(refusal(popart_config(good_module())), "");
  // Without PopArt nothing is asked of the value's layers.
  const auto plain = module_file("plain", "v = torch.nn.Linear(16, 1)", "self.v(h).squeeze(-1)");
  EXPECT_EQ(refusal(popart_config(plain, "none")), "");
  std::string m = refusal(popart_config(plain));
  EXPECT_NE(m.find("no parameter value_head.weight or value_head.bias"), std::string::npos) << m;
  EXPECT_NE(m.find("learner.value_norm = \"popart\""), std::string::npos) << m;
  EXPECT_NE(m.find("plain.py:make"), std::string::npos) << m;
  m = refusal(popart_config(module_file("nobias", "value_head = torch.nn.Linear(16, 1, bias=False)",
                                        "self.value_head(h).squeeze(-1)")));
  EXPECT_NE(m.find("no parameter value_head.bias ("), std::string::npos) << m;
  m = refusal(popart_config(module_file("wide", "value_head = torch.nn.Linear(16, 2)", "self.value_head(h)[..., 0]")));
  EXPECT_NE(m.find("value_head.weight is [2, 16]"), std::string::npos) << m;
  // Something after value_head: a squashing, a scale, a constant.
  m = refusal(popart_config(module_file("squashed", "value_head = torch.nn.Linear(16, 1)",
                                        "torch.tanh(self.value_head(h)).squeeze(-1)")));
  EXPECT_NE(m.find("the value is not value_head's output alone"), std::string::npos) << m;
  m = refusal(popart_config(module_file("scaled", "value_head = torch.nn.Linear(16, 1)",
                                        "3.0 * self.value_head(h).squeeze(-1)")));
  EXPECT_NE(m.find("(adding 1 to value_head.bias must give v + 1, and the value was off by 2 (tolerance "), std::string::npos) << m;
  m = refusal(popart_config(module_file("shifted", "value_head = torch.nn.Linear(16, 1)",
                                        "self.value_head(h).squeeze(-1) + 5.0")));
  EXPECT_EQ(m.find("value_head.bias must give"), std::string::npos) << m;
  EXPECT_NE(m.find("(doubling value_head.weight must give 2 v - b, and the value was off by 5 (tolerance "), std::string::npos) << m;
  EXPECT_NE(m.find("negating value_head.weight must give 2 b - v, and the value was off by 10 (tolerance "), std::string::npos) << m;
  // A relu after the head, every value on its linear side: only the large negative bias shift crosses it.
  m = refusal(popart_config(module_file("relu", "value_head = torch.nn.Linear(16, 1)\n        self.value_head.bias.data.fill_(10.0)",
                                        "torch.relu(self.value_head(h)).squeeze(-1)")));
  EXPECT_NE(m.find("(subtracting "), std::string::npos) << m;
  EXPECT_EQ(m.find("adding 1"), std::string::npos) << m;
  EXPECT_EQ(m.find("doubling"), std::string::npos) << m;
  // The same relu in unroll only (the learner's path): step is linear in value_head and passes
  // every probe, unroll equals step at the initial weights, and only the probe of unroll catches it.
  m = refusal(popart_config(module_file("relu_unroll", "value_head = torch.nn.Linear(16, 1)\n        self.value_head.bias.data.fill_(10.0)",
                                        "torch.relu(self.value_head(h)).squeeze(-1)", "self.pi(h)",
                                        "self.value_head(h).squeeze(-1)")));
  EXPECT_NE(m.find("(subtracting "), std::string::npos) << m;
  EXPECT_EQ(m.find("adding 1"), std::string::npos) << m;
  // value_head read by the policy too: PopArt would rescale the policy's logits.
  m = refusal(popart_config(module_file("shared", "value_head = torch.nn.Linear(16, 1)",
                                        "self.value_head(h).squeeze(-1)", "self.pi(h) + self.value_head(h)")));
  EXPECT_NE(m.find("(changing value_head moved dist by up to "), std::string::npos) << m;
  EXPECT_NE(m.find(": something besides the value reads it)."), std::string::npos) << m;
  EXPECT_EQ(m.find("must give"), std::string::npos) << m;
}

TEST(PythonModule, FrozenParameterStaysFrozenThroughUpdates) {
  const Config cfg = popart_config(module_file("frozen", "value_head = torch.nn.Linear(16, 1)\n"
                                               "        self.frozen = torch.nn.Parameter(torch.ones(16), requires_grad=False)",
                                               "self.value_head(h).squeeze(-1)", "self.pi(h * self.frozen)"));
  const auto spec = envs::env_spec(cfg);
  NoReducer none;
  Trainer t(cfg, spec, torch::kCPU, none, StepMode::Eager);
  const auto params = t.policy()->named_parameters();
  const auto* frozen = params.find("py.frozen");
  const auto* body = params.find("py.body.weight");
  ASSERT_TRUE(frozen && body);
  EXPECT_FALSE(frozen->requires_grad());
  EXPECT_TRUE(body->requires_grad());
  const auto body0 = body->clone();
  for (uint64_t k = 0; k < 3; ++k) {
    auto b = mpirl::testing::random_batch(6, 8, spec.obs_size(), spec.num_actions, 0, 40 + k);
    t.update(b, {});
  }
  EXPECT_TRUE(frozen->equal(torch::ones({16})));
  EXPECT_GT((*body - body0).abs().max().item<double>(), 1e-4);
}
