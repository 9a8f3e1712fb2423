// learner.kl_target: the KL an update reports against one computed by hand from the updated
// policy's logits in float64, the learning rate's factor stepping by 1.5 either way, its bounds,
// its product with the schedule, the checkpoint, and the config check.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <sstream>

#include "core/config.h"
#include "core/error.h"
#include "envs/registry.h"
#include "learner/trainer.h"
#include "tests/common/config_with.h"
#include "tests/common/train_batches.h"

using namespace mpirl;
using namespace mpirl::learner;
using mpirl::testing::cfg_with;

namespace {

Config appo(std::vector<std::string> extra) {
  std::vector<std::string> sets = {"learner.algo=\"appo\"", "learner.lr=0.001", "learner.appo_epochs=2",
                                   "learner.appo_minibatches=2"};
  sets.insert(sets.end(), extra.begin(), extra.end());
  return cfg_with(sets);
}

// KL(mu || pi) estimated from mu's actions, (r - 1) - log r with r = pi(a) / mu(a), by hand: the
// policy's logits for every step, log-softmax in float64, the mean over kept columns.
double kl_by_hand(Trainer& tr, const TrainBatch& b) {
  torch::NoGradGuard g;
  const int64_t T = b.rewards.size(0), B = b.rewards.size(1);
  auto obs = b.obs.slice(0, 0, T).reshape({T * B, -1});
  auto logits = tr.policy()->forward(obs).dist.to(torch::kFloat64).contiguous();
  auto acts = b.actions.reshape({T * B}).contiguous();
  auto mu = b.behaviour_logp.to(torch::kFloat64).reshape({T * B}).contiguous();
  const int64_t A = logits.size(1);
  const double* l = logits.data_ptr<double>();
  double sum = 0, kept = 0;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t c = 0; c < B; ++c) {
      const int64_t i = t * B + c;
      double z = 0;
      for (int64_t a = 0; a < A; ++a) z += std::exp(l[i * A + a]);
      const double logp = l[i * A + acts[i].item<int64_t>()] - std::log(z);
      const double log_r = logp - mu[i].item<double>();
      const double w = b.keep.defined() ? b.keep[c].item<double>() : 1.0;
      sum += w * (std::exp(log_r) - 1 - log_r);
      kept += w;
    }
  return sum / kept;
}

}  // namespace

TEST(KlTarget, ReportsTheKlOfTheUpdatedPolicy) {
  Config cfg = appo({"learner.kl_target=0.01", "learner.lr=0.01"});
  auto spec = envs::env_spec(cfg);
  NoReducer none;
  torch::manual_seed(3);
  Trainer tr(cfg, spec, torch::kCPU, none);
  auto b = mpirl::testing::random_batch(6, 4, spec.obs_size(), 2, 0, 31, /*extras=*/true);
  b.keep = torch::tensor({1.0f, 0.0f, 1.0f, 1.0f});  // a sequence masked out: not in the mean
  const double before = kl_by_hand(tr, b);
  auto r = tr.update(b, {});
  const double after = kl_by_hand(tr, b);
  EXPECT_NEAR(r.kl, after, 1e-6);
  EXPECT_GT(std::abs(after - before), 1e-5);  // 10 x the tolerance: the policy before the update would fail
  Config off = appo({});
  Trainer plain(off, spec, torch::kCPU, none);
  EXPECT_TRUE(std::isnan(plain.update(b, {}).kl));
  EXPECT_DOUBLE_EQ(plain.kl_factor(), 1.0);
}

TEST(KlTarget, StepsTheRateByOneAndAHalfWithinItsBounds) {
  auto run = [](const std::string& target, int updates, std::vector<std::string> extra = {}) {
    extra.push_back("learner.kl_target=" + target);
    torch::manual_seed(7);
    Config cfg = appo(extra);
    auto spec = envs::env_spec(cfg);
    NoReducer none;
    Trainer tr(cfg, spec, torch::kCPU, none);
    std::vector<double> lrs, kls;
    for (int u = 0; u < updates; ++u) {
      tr.set_progress(0.5);
      auto b = mpirl::testing::random_batch(6, 4, spec.obs_size(), 2, 0, 40 + u);
      auto r = tr.update(b, {});
      lrs.push_back(r.lr);
      kls.push_back(r.kl);
    }
    return std::make_pair(lrs, kls);
  };
  // A target no update reaches: the rate grows by 1.5 after each update, up to 10 x the base.
  auto [up, kls_up] = run("5", 8);
  for (double k : kls_up) ASSERT_LT(k, 2.5);
  const double want_up[] = {1e-3, 1.5e-3, 2.25e-3, 3.375e-3, 5.0625e-3, 7.59375e-3, 1e-2, 1e-2};
  for (int u = 0; u < 8; ++u) EXPECT_NEAR(up[u], want_up[u], 1e-12) << "update " << u;
  // A target every update exceeds: down by 1.5, never under 0.01 x the base.
  auto [down, kls_down] = run("1e-9", 14);
  for (size_t u = 0; u < kls_down.size(); ++u) ASSERT_GT(kls_down[u], 2e-9) << "update " << u;
  for (int u = 0; u < 14; ++u) EXPECT_NEAR(down[u], 1e-3 * std::max(0.01, std::pow(1.5, -u)), 1e-15) << "update " << u;
  // With a schedule the factor multiplies the scheduled rate: 0.00055 at half of a linear 1e-3 -> 1e-4.
  auto [sched, kls_sched] = run("5", 2, {"learner.lr_schedule=\"linear\"", "learner.lr_final=0.0001"});
  EXPECT_NEAR(sched[0], 0.00055, 1e-12);
  EXPECT_NEAR(sched[1], 0.000825, 1e-12);
}

TEST(KlTarget, FactorTravelsInTheCheckpoint) {
  Config cfg = appo({"learner.kl_target=5"});
  auto spec = envs::env_spec(cfg);
  NoReducer none;
  torch::manual_seed(5);
  Trainer tr(cfg, spec, torch::kCPU, none);
  for (int u = 0; u < 2; ++u) {
    auto b = mpirl::testing::random_batch(6, 4, spec.obs_size(), 2, 0, 50 + u);
    tr.update(b, {});
  }
  EXPECT_NEAR(tr.kl_factor(), 2.25, 1e-12);
  Trainer other(cfg, spec, torch::kCPU, none);
  mpirl::testing::copy_checkpoint(tr, other);
  EXPECT_NEAR(other.kl_factor(), 2.25, 1e-12);
  auto b = mpirl::testing::random_batch(6, 4, spec.obs_size(), 2, 0, 60);
  EXPECT_NEAR(other.update(b, {}).lr, 2.25e-3, 1e-12);
}

TEST(KlTarget, ConfigRefusesItOutsideAppo) {
  try {
    cfg_with({"learner.kl_target=0.01"});  // the default algo is IMPALA
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("learner.kl_target"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("impala"), std::string::npos) << e.what();
  }
  EXPECT_THROW(appo({"learner.kl_target=-0.1"}), ConfigError);
}
