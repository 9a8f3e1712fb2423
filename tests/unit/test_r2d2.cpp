// R2D2 (learner/algorithms/r2d2/): the value rescaling and its inverse, n-step double-Q returns
// against a float64 loop written apart from the tensor code and against hand-computed values,
// priorities of a hand-computed batch as the learner sends them, burn-in steps without loss or
// gradient, the target network's copies and checkpoint, and the actors' epsilon ladder.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <vector>

#include "core/config.h"
#include "core/error.h"
#include "envs/registry.h"
#include "learner/algorithms/r2d2/r2d2.h"
#include "learner/algorithms/r2d2/targets.h"
#include "learner/trainer.h"
#include "models/policy.h"
#include "models/sampler.h"

using namespace mpirl;
using namespace mpirl::learner;

namespace {
double h(double x, double eps) { return (x > 0 ? 1 : x < 0 ? -1 : 0) * (std::sqrt(std::abs(x) + 1) - 1) + eps * x; }

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
  double lo = 0, hi = 20;
  for (int i = 0; i < 200; ++i) (h((lo + hi) / 2, eps) < 2.5 ? lo : hi) = (lo + hi) / 2;
  const double boot = lo;
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
