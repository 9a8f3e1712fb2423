// R2D2 (learner/algorithms/r2d2/r2d2.h): priorities and loss of a hand-computed batch as the
// learner sends them, burn-in steps without loss or gradient, the target network's copies,
// checkpoint and rollback, the actors' epsilon ladder, bad configs. Its targets: test_r2d2_targets.cpp.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <vector>

#include "core/config.h"
#include "core/error.h"
#include "envs/registry.h"
#include "learner/algorithms/r2d2/r2d2.h"
#include "learner/trainer.h"
#include "models/policy.h"
#include "models/sampler.h"
#include "r2d2_reference.h"

using namespace mpirl;
using namespace mpirl::learner;

namespace {
using r2d2_reference::h;

Config r2d2_config(std::vector<std::string> sets) {
  std::vector<std::string> base = {"learner.algo=\"r2d2\"", "learner.value_norm=\"none\"", "actor.rollout_len=6",
                                   "r2d2.burn_in=0", "r2d2.n_step=1", "learner.gamma=0.5", "model.hidden=[4]"};
  base.insert(base.end(), sets.begin(), sets.end());
  return load_config("", base);
}

TrainBatch batch(int64_t T, int64_t B, int64_t D) {
  TrainBatch b;
  b.obs = torch::randn({T + 1, B, D});
  b.is_init = torch::zeros({T + 1, B});
  b.actions = torch::randint(0, 2, {T, B}, torch::kInt64);
  b.rewards = torch::randn({T, B});
  b.terminated = torch::zeros({T, B});
  b.truncated = torch::zeros({T, B});
  b.trunc_value = torch::zeros({T, B});
  b.behaviour_logp = torch::zeros({T, B});
  return b;
}
}  // namespace

TEST(R2D2, LearnerPrioritiesAndLossOfAHandComputedBatch) {
  // Every weight 0; online: value bias 1, logit biases (0.5, -0.5), so Q = (1.5, 0.5) everywhere;
  // target: value bias 3, logit biases (-0.5, 0.5), so Q = (2.5, 3.5). Double Q bootstraps from the
  // target's Q of the online network's greedy action: h^-1(2.5) (h^-1(1.5) would be the online
  // network's value, h^-1(3.5) the target's own greedy one). n = 1, gamma = 0.5, eps = 1e-3.
  Config cfg = r2d2_config({"env.id=\"CartPole-v1\""});
  auto spec = envs::env_spec(cfg);
  NoReducer none;
  Trainer tr(cfg, spec, torch::kCPU, none, StepMode::Eager);
  auto set = [](models::PolicyModel& m, double v, double a0) {
    torch::NoGradGuard g;
    for (auto& item : m.named_parameters()) {
      item.value().zero_();
      if (item.key() == "v.bias") item.value().fill_(v);
      if (item.key() == "pi.bias") item.value().copy_(torch::tensor({a0, -a0}));
    }
  };
  set(*tr.policy(), 1.0, 0.5);
  R2D2 algo(cfg.r2d2);
  algo.attach(tr.policy().ptr(), [&] { return models::Policy(spec, models::model_options(cfg)).ptr(); });
  set(algo.target(), 3.0, -0.5);
  auto b = batch(2, 2, spec.obs_size());
  b.actions = torch::tensor({0, 1, 1, 0}, torch::kInt64).reshape({2, 2});
  b.rewards = torch::tensor({1.0f, 0.0f, 2.0f, 1.0f}).reshape({2, 2});
  b.terminated[1][0] = 1;
  auto out = algo.forward(*tr.policy(), b);
  auto l = algo.loss(spec, b, out, loss_options(cfg));
  const double eps = 1e-3;
  // h^-1(2.5) by bisection on h: the bootstrap in return units.
  const double boot = r2d2_reference::h_inverse(2.5, eps, 0, 20);
  const double q[2] = {1.5, 0.5};
  const int64_t a[2][2] = {{0, 1}, {1, 0}};
  const double r[2][2] = {{1, 0}, {2, 1}}, term[2][2] = {{0, 0}, {1, 0}};
  double delta[2][2], loss = 0;
  for (int t = 0; t < 2; ++t)
    for (int c = 0; c < 2; ++c) {
      delta[t][c] = q[a[t][c]] - h(r[t][c] + 0.5 * (1 - term[t][c]) * boot, eps);
      loss += 0.5 * delta[t][c] * delta[t][c] / 4;
    }
  for (int c = 0; c < 2; ++c) {
    const double p = 0.9 * std::max(std::abs(delta[0][c]), std::abs(delta[1][c])) +
                     0.1 * (std::abs(delta[0][c]) + std::abs(delta[1][c])) / 2;
    EXPECT_NEAR(l.priorities[c].item<double>(), p, 1e-5) << "sequence " << c;
  }
  EXPECT_NEAR(l.total.item<double>(), loss, 1e-5);
  // A truncation at the last step bootstraps the same way (Trainer::bootstrap -> bootstrap_value).
  auto tv = algo.bootstrap_value(*tr.policy(), torch::zeros({1, spec.obs_size()}), torch::Tensor());
  EXPECT_NEAR(tv[0].item<double>(), boot, 1e-4);
  // Importance weights scale each sequence's terms; the priorities do not change.
  b.weights = torch::tensor({2.0f, 0.0f});
  auto lw = algo.loss(spec, b, algo.forward(*tr.policy(), b), loss_options(cfg));
  const double w0 = 2 * 0.5 * (delta[0][0] * delta[0][0] + delta[1][0] * delta[1][0]) / 4;
  EXPECT_NEAR(lw.total.item<double>(), w0, 1e-5);
  EXPECT_NEAR(lw.priorities[1].item<double>(), l.priorities[1].item<double>(), 1e-7);
}

TEST(R2D2, BurnInStepsGetNoLossAndNoGradient) {
  for (const char* core : {"lru", "gru"}) {
    SCOPED_TRACE(core);
    Config cfg = r2d2_config({"env.id=\"CartPole-v1\"", std::string("model.core=\"") + core + "\"",
                              "model.core_state=4", "model.core_size=8", "r2d2.burn_in=3", "r2d2.n_step=2"});
    auto spec = envs::env_spec(cfg);
    NoReducer none;
    Trainer tr(cfg, spec, torch::kCPU, none, StepMode::Eager);
    R2D2 algo(cfg.r2d2);
    algo.attach(tr.policy().ptr(), [&] { return models::Policy(spec, models::model_options(cfg)).ptr(); });
    torch::manual_seed(5);
    auto b = batch(6, 3, spec.obs_size());
    b.state0 = torch::randn({3, tr.policy()->state_size()});
    b.obs.requires_grad_(true);
    auto l = algo.loss(spec, b, algo.forward(*tr.policy(), b), loss_options(cfg));
    l.total.backward();
    auto g = b.obs.grad();
    ASSERT_TRUE(g.defined());
    EXPECT_EQ(g.slice(0, 0, 3).abs().sum().item<double>(), 0.0) << "burn-in observations got a gradient";
    EXPECT_GT(g.slice(0, 3, 6).abs().sum().item<double>(), 0.0) << "the trained steps' observations got none";
    for (auto& p : algo.target().parameters()) EXPECT_FALSE(p.grad().defined()) << "the target network got a gradient";
    // The burn-in's rewards, actions and episode ends are not trained on: the same loss without them.
    auto b2 = b;
    b2.obs = b.obs.detach();
    b2.rewards = b.rewards.clone();
    b2.actions = b.actions.clone();
    b2.terminated = b.terminated.clone();
    b2.rewards.slice(0, 0, 3).add_(7);
    b2.actions.slice(0, 0, 3).fill_(1);
    b2.terminated[1].fill_(1);
    auto l2 = algo.loss(spec, b2, algo.forward(*tr.policy(), b2), loss_options(cfg));
    EXPECT_NEAR(l2.total.item<double>(), l.total.item<double>(), 1e-6);
    // ... but its observations advance the core: other burn-in observations, another loss.
    auto b3 = b2;
    b3.obs = b2.obs.clone();
    b3.obs.slice(0, 0, 3).add_(1);
    auto l3 = algo.loss(spec, b3, algo.forward(*tr.policy(), b3), loss_options(cfg));
    EXPECT_GT(std::abs(l3.total.item<double>() - l.total.item<double>()), 1e-6);
  }
}

TEST(R2D2, TargetNetworkCopiesEveryPeriodAndIsCheckpointed) {
  Config cfg = r2d2_config({"env.id=\"CartPole-v1\"", "r2d2.target_period=3", "learner.batch_size=4"});
  auto spec = envs::env_spec(cfg);
  NoReducer none;
  auto max_gap = [](models::PolicyModel& a, models::PolicyModel& b) {
    double m = 0;
    auto pa = a.parameters(), pb = b.parameters();
    for (size_t i = 0; i < pa.size(); ++i) m = std::max(m, (pa[i] - pb[i]).abs().max().item<double>());
    return m;
  };
  Trainer tr(cfg, spec, torch::kCPU, none, StepMode::Eager);
  auto* algo = dynamic_cast<R2D2*>(&tr.algorithm());
  ASSERT_NE(algo, nullptr);
  torch::manual_seed(9);
  EXPECT_EQ(max_gap(*tr.policy(), algo->target()), 0.0) << "a copy at the start";
  for (int u = 1; u <= 6; ++u) {
    auto b = batch(6, 4, spec.obs_size());
    tr.update(b, BootInputs{});
    EXPECT_EQ(algo->steps(), u);
    if (u % 3 == 0) EXPECT_EQ(max_gap(*tr.policy(), algo->target()), 0.0) << "update " << u;
    else EXPECT_GT(max_gap(*tr.policy(), algo->target()), 0.0) << "update " << u;
  }
  auto b = batch(6, 4, spec.obs_size());
  tr.update(b, BootInputs{});  // the target now lags the online network by one step
  torch::serialize::OutputArchive out;
  tr.save(out);
  std::ostringstream bytes;
  out.save_to(bytes);
  Trainer back(cfg, spec, torch::kCPU, none, StepMode::Eager);
  torch::serialize::InputArchive in;
  std::istringstream is(bytes.str());
  in.load_from(is);
  back.load(in);
  auto* algo2 = dynamic_cast<R2D2*>(&back.algorithm());
  EXPECT_EQ(algo2->steps(), 7);
  EXPECT_EQ(max_gap(algo->target(), algo2->target()), 0.0);
  EXPECT_GT(max_gap(*back.policy(), algo2->target()), 0.0) << "the target came back as saved, not as a copy";
}

TEST(R2D2, RollbackRestoresTheTargetNetwork) {
  Config cfg = r2d2_config({"env.id=\"CartPole-v1\"", "r2d2.target_period=1", "learner.batch_size=4"});
  auto spec = envs::env_spec(cfg);
  NoReducer none;
  Trainer tr(cfg, spec, torch::kCPU, none, StepMode::Eager);
  auto& target = dynamic_cast<R2D2&>(tr.algorithm()).target();
  auto copy = [](models::PolicyModel& m) {
    std::vector<torch::Tensor> v;
    for (auto& p : m.parameters()) v.push_back(p.detach().clone());
    return v;
  };
  auto gap = [](const std::vector<torch::Tensor>& a, models::PolicyModel& m) {
    double g = 0;
    auto p = m.parameters();
    for (size_t i = 0; i < a.size(); ++i) g = std::max(g, (a[i] - p[i]).abs().max().item<double>());
    return g;
  };
  torch::manual_seed(2);
  tr.snapshot();
  const auto before = copy(target);
  for (int u = 0; u < 3; ++u) {
    auto b = batch(6, 4, spec.obs_size());
    tr.update(b, BootInputs{});
  }
  ASSERT_GT(gap(before, target), 0.0) << "the target moved (a copy every step)";
  ASSERT_TRUE(tr.restore(0.5));
  EXPECT_EQ(gap(before, target), 0.0) << "a rollback left the target network where it diverged";
}

TEST(R2D2, EpsilonLadder) {
  EXPECT_DOUBLE_EQ(models::apex_epsilon(0, 9, 0.4, 7), 0.4);
  EXPECT_NEAR(models::apex_epsilon(8, 9, 0.4, 7), std::pow(0.4, 8), 1e-15);
  EXPECT_NEAR(models::apex_epsilon(4, 9, 0.4, 7), std::pow(0.4, 4.5), 1e-15);
  EXPECT_DOUBLE_EQ(models::apex_epsilon(0, 1, 0.4, 7), 0.4);
  // An actor's slice is its rungs of the one ladder over every env: actor 2 of 3 with 3 envs each.
  auto e = models::epsilons({0.4, 7}, 6, 3, 9);
  ASSERT_EQ(e.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(e[size_t(i)], std::pow(0.4, 1 + 7.0 * (6 + i) / 8), 1e-15);
}

TEST(R2D2, EpsilonGreedySampling) {
  envs::EnvSpec spec;
  spec.discrete = true;
  spec.num_actions = 4;
  models::Sampler s(spec, 11);
  const float logits[4] = {0.1f, 2.0f, -1.0f, 0.3f};  // greedy: action 1
  const int64_t n = 40000;
  for (double eps : {0.0, 0.3, 1.0}) {
    std::vector<int64_t> count(4, 0);
    float logp = 0;
    for (int64_t i = 0; i < n; ++i) {
      int64_t a = -1;
      models::Sampler::Rows out;
      out.logp = &logp;
      s.discrete(logits, 4, 1, &a, out, false, &eps);
      ++count[size_t(a)];
      const double want = std::log((a == 1 ? 1 - eps : 0.0) + eps / 4);
      ASSERT_NEAR(logp, want, 1e-6);
    }
    EXPECT_NEAR(double(count[1]) / n, 1 - eps + eps / 4, 0.01) << "eps " << eps;
    for (int a : {0, 2, 3}) EXPECT_NEAR(double(count[size_t(a)]) / n, eps / 4, 0.01) << "eps " << eps;
  }
  // greedy (evaluation) wins over epsilon
  int64_t a = -1;
  const double one = 1.0;
  for (int i = 0; i < 100; ++i) {
    s.discrete(logits, 4, 1, &a, {}, true, &one);
    EXPECT_EQ(a, 1);
  }
}

TEST(R2D2, BadConfigsNameTheirKey) {
  auto error = [](std::vector<std::string> sets) {
    try {
      load_config("", sets);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  auto m = error({"learner.algo=\"r2d2\""});  // PopArt is the default
  EXPECT_NE(m.find("'learner.value_norm'"), std::string::npos) << m;
  m = error({"learner.algo=\"r2d2\"", "learner.value_norm=\"none\"", "actor.rollout_len=8", "r2d2.burn_in=5"});
  EXPECT_NE(m.find("'r2d2.burn_in' = 5: expected at most half of actor.rollout_len = 8"), std::string::npos) << m;
  m = error({"r2d2.n_step=0"});
  EXPECT_NE(m.find("'r2d2.n_step'"), std::string::npos) << m;
  EXPECT_EQ(error({"learner.algo=\"r2d2\"", "learner.value_norm=\"none\"", "actor.rollout_len=8", "r2d2.burn_in=4"}), "");
  // Continuous actions: refused at start-up, before any rank trains.
  Config cfg = r2d2_config({"env.id=\"Pendulum-v1\""});
  try {
    models::validate_model_config(cfg, envs::env_spec(cfg));
    ADD_FAILURE() << "a Box action space was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'learner.algo' = \"r2d2\": expected an env with discrete actions"),
              std::string::npos)
        << e.what();
  }
}
