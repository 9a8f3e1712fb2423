// Finite or nothing (learner.on_nonfinite): a step whose gradient norm is not finite changes
// nothing (parameters, optimizer moments and step counts, PopArt), decided on the device, in every
// step mode and for both optimizers, and is counted; the next finite step goes on from where the
// last finite one left; a rollback restores the snapshot bit for bit with the learning rate scaled;
// the guard stops, rolls back or goes on as the policy says; the optimizers' skip by hand.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "core/config.h"
#include "envs/registry.h"
#include "learner/nonfinite_guard.h"
#include "learner/optimizer.h"
#include "learner/trainer.h"
#include "tests/common/train_batches.h"

using namespace mpirl;
using namespace mpirl::learner;
using mpirl::testing::random_batch;

namespace {

std::vector<torch::Tensor> everything(Trainer& t) {
  std::vector<torch::Tensor> out;
  for (auto& p : t.policy()->parameters()) out.push_back(p.detach().clone());
  for (auto& b : t.policy()->buffers()) out.push_back(b.detach().clone());
  return out;
}

bool same(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!torch::equal(a[i], b[i])) return false;
  return true;
}

}  // namespace

TEST(NonFinite, OptimizersSkipAStepWhollyOnTheDeviceFlag) {
  for (const char* which : {"adam", "rmsprop", "rmsprop_momentum"}) {
    SCOPED_TRACE(which);
    auto p = torch::randn({5}).requires_grad_();
    std::unique_ptr<DeviceOptimizer> opt =
        std::string(which) == "adam" ? make_adam({p}, {0.1}) : make_rmsprop({p}, {0.1, 0.99, 1e-8, std::string(which) == "rmsprop" ? 0.0 : 0.9});
    p.mutable_grad() = torch::randn({5});
    opt->step(torch::zeros({}));  // a real step first: moments are not zero
    std::vector<torch::Tensor> before{p.detach().clone()};
    for (auto& s : opt->state()) before.push_back(s.clone());
    p.mutable_grad() = torch::full({5}, std::nan(""));  // what a NaN loss leaves
    opt->step(torch::ones({}));
    std::vector<torch::Tensor> after{p.detach().clone()};
    for (auto& s : opt->state()) after.push_back(s.clone());
    EXPECT_TRUE(same(before, after)) << "a skipped step changed the parameters or the optimizer state";
    p.mutable_grad() = torch::randn({5});
    opt->step(torch::zeros({}));
    EXPECT_FALSE(torch::equal(p.detach(), before[0])) << "a step with skip = 0 moves the parameters";
    EXPECT_TRUE(torch::isfinite(p).all().item<bool>());
  }
}

TEST(NonFinite, ANanLossIsSkippedAndCountedInEveryStepModeAndTheRunGoesOn) {
  for (const char* algo : {"impala", "appo"})
    for (StepMode mode : {StepMode::Eager, StepMode::Static})
      for (const char* norm : {"popart", "none"}) {
        SCOPED_TRACE(std::string(algo) + (mode == StepMode::Eager ? " eager " : " static ") + norm);
        Config cfg = load_config("", {std::string("learner.algo=\"") + algo + "\"",
                                      std::string("learner.value_norm=\"") + norm + "\"", "model.core=\"lru\"",
                                      "model.core_state=4", "model.core_size=8", "learner.appo_minibatches=2"});
        auto spec = envs::env_spec(cfg);
        NoReducer none;
        const int64_t T = 5, B = 4, D = spec.obs_size(), A = spec.num_actions, S = models::state_size(cfg, spec);
        torch::manual_seed(3);
        Trainer tr(cfg, spec, torch::kCPU, none, mode);
        for (uint64_t k = 0; k < 3; ++k) {  // finite updates first
          auto b = random_batch(T, B, D, A, S, 10 + k);
          tr.update(b, {});
        }
        EXPECT_EQ(tr.nonfinite().skipped, 0);
        const auto good = everything(tr);
        tr.inject_nan(true);
        for (uint64_t k = 0; k < 4; ++k) {
          auto b = random_batch(T, B, D, A, S, 20 + k);
          auto r = tr.update(b, {});
          EXPECT_TRUE(std::isnan(r.last.total.item<double>()));
        }
        const int64_t steps = std::string(algo) == "appo" ? 4 * 2 * 2 : 4;  // epochs x minibatches
        EXPECT_EQ(tr.nonfinite().skipped, steps);
        EXPECT_EQ(tr.nonfinite().in_a_row, steps);
        EXPECT_TRUE(same(good, everything(tr))) << "a NaN update reached the parameters (or PopArt's statistics)";
        EXPECT_TRUE(tr.parameters_finite());
        tr.inject_nan(false);
        auto b = random_batch(T, B, D, A, S, 99);
        tr.update(b, {});
        EXPECT_EQ(tr.nonfinite().in_a_row, 0);
        EXPECT_EQ(tr.nonfinite().skipped, steps);
        EXPECT_FALSE(same(good, everything(tr))) << "a finite update after them trains";
        EXPECT_TRUE(tr.parameters_finite());
      }
}

TEST(NonFinite, RollbackRestoresTheSnapshotAndScalesTheLearningRate) {
  Config cfg = load_config("", {"learner.lr=0.01"});
  auto spec = envs::env_spec(cfg);
  NoReducer none;
  torch::manual_seed(4);
  Trainer tr(cfg, spec, torch::kCPU, none);
  EXPECT_FALSE(tr.restore(0.5)) << "no snapshot taken yet";
  auto b = random_batch(5, 4, spec.obs_size(), spec.num_actions, 0, 1);
  tr.update(b, {});
  tr.snapshot();
  const auto kept = everything(tr);
  for (uint64_t k = 0; k < 3; ++k) {
    auto c = random_batch(5, 4, spec.obs_size(), spec.num_actions, 0, 2 + k);
    tr.update(c, {});
  }
  ASSERT_FALSE(same(kept, everything(tr)));
  EXPECT_TRUE(tr.restore(0.5));
  EXPECT_TRUE(same(kept, everything(tr)));
  EXPECT_DOUBLE_EQ(tr.lr_factor(), 0.5);
  auto r = tr.update(b, {});
  EXPECT_DOUBLE_EQ(r.lr, 0.005);
}

TEST(NonFinite, TheGuardStopsRollsBackOrGoesOnAsThePolicySays) {
  auto run = [](const std::string& policy, int64_t limit, int64_t* rollbacks) {
    Config cfg = load_config("", {"learner.on_nonfinite=\"" + policy + "\"",
                                  "learner.nonfinite_limit=" + std::to_string(limit)});
    auto spec = envs::env_spec(cfg);
    NoReducer none;
    torch::manual_seed(5);
    Trainer tr(cfg, spec, torch::kCPU, none);
    NonFiniteGuard guard(cfg, false);
    int64_t version = 0;
    auto one = [&](bool nan) {
      tr.inject_nan(nan);
      auto b = random_batch(5, 4, spec.obs_size(), spec.num_actions, 0, uint64_t(version));
      tr.update(b, {});
      return guard.after_update(tr, ++version);
    };
    for (int i = 0; i < 300; ++i)  // healthy: a snapshot at update 256
      if (!one(false).empty()) return int64_t(-version);
    for (int i = 0; i < 2000; ++i)
      if (!one(true).empty()) {
        *rollbacks = guard.summary(tr)["rollbacks"].get<int64_t>();
        EXPECT_TRUE(tr.parameters_finite());
        return version;
      }
    return int64_t(0);  // never stopped
  };
  int64_t rb = -1;
  // stop: at the first check after the first NaN step (updates are checked every 16).
  EXPECT_EQ(run("stop", 100, &rb), 304);
  EXPECT_EQ(rb, 0);
  // skip: at the first check with 100 in a row (updates 301-400; 400 is a check).
  EXPECT_EQ(run("skip", 100, &rb), 400);
  // rollback: back to update 256's snapshot at 400, then (checks every 16 updates) at 512 and 624
  // with 112 in a row each; the 4th time, at 736, it stops.
  EXPECT_EQ(run("rollback", 100, &rb), 736);
  EXPECT_EQ(rb, NonFiniteGuard::kMaxRollbacks);
}
