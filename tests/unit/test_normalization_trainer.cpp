// Schedules and normalisation inside the trainer (issue 20): a scheduled learning rate against the
// host rate, the schedules following the run's progress, the normalisation buffers in the flat
// parameter vector, model.pt and the checkpoint. The normalisers themselves: test_normalization.cpp.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <sstream>

#include "core/config.h"
#include "core/error.h"
#include "envs/registry.h"
#include "learner/algorithms/appo.h"
#include "learner/algorithms/impala.h"
#include "learner/normalizers.h"
#include "learner/optimizer.h"
#include "learner/schedule.h"
#include "learner/trainer.h"
#include "models/policy_file.h"
#include "tests/common/config_with.h"
#include "tests/common/train_batches.h"

using namespace mpirl;
using namespace mpirl::learner;

using mpirl::testing::cfg_with;

TEST(Schedule, ScheduledLearningRateStepsAsTheHostRate) {
  // The tensor learning rate (what a captured graph reads) gives the same steps as the host rate.
  for (const char* opt : {"adam", "rmsprop"}) {
    SCOPED_TRACE(opt);
    torch::manual_seed(4);
    auto a = std::vector<torch::Tensor>{torch::randn({3, 2}).requires_grad_()};
    auto b = std::vector<torch::Tensor>{a[0].detach().clone().requires_grad_()};
    std::unique_ptr<DeviceOptimizer> host = std::string(opt) == "adam" ? make_adam(a, {1e-2, 0.9, 0.99, 1e-5})
                                                                        : make_rmsprop(a, {1e-2, 0.99, 1e-5, 0.5});
    std::unique_ptr<DeviceOptimizer> dev = std::string(opt) == "adam"
                                               ? make_adam(b, {1e-2, 0.9, 0.99, 1e-5}, true)
                                               : make_rmsprop(b, {1e-2, 0.99, 1e-5, 0.5}, true);
    for (int s = 0; s < 10; ++s) {
      const double lr = scheduled("cosine", 1e-2, 1e-3, s / 9.0);
      host->set_lr(lr);
      dev->set_lr(lr);
      auto gr = torch::randn({3, 2});
      a[0].mutable_grad() = gr.clone();
      b[0].mutable_grad() = gr.clone();
      host->step();
      dev->step();
    }
    EXPECT_LT((a[0] - b[0]).abs().max().item<double>(), 1e-6);
    EXPECT_DOUBLE_EQ(dev->lr(), 1e-3);
  }
}

TEST(Trainer, SchedulesFollowTheProgress) {
  Config cfg = cfg_with({"learner.lr_schedule=\"linear\"", "learner.lr=0.001", "learner.lr_final=0.0001",
                         "learner.entropy_schedule=\"linear\"", "learner.entropy_coef=0.02",
                         "learner.entropy_coef_final=0.0"});
  auto spec = envs::env_spec(cfg);
  NoReducer none;
  Trainer tr(cfg, spec, torch::kCPU, none);
  tr.set_progress(0.5);
  auto b = mpirl::testing::random_batch(4, 2, spec.obs_size(), 2, 0, 14);
  auto r = tr.update(b, {});
  EXPECT_NEAR(r.lr, 0.00055, 1e-12);
  EXPECT_NEAR(r.entropy_coef, 0.01, 1e-12);
  // The entropy term in the loss uses the scheduled coefficient: total = policy + 0.5 value - 0.01 H.
  const double total = r.last.policy.item<double>() + 0.5 * r.last.value.item<double>() -
                       0.01 * r.last.entropy.item<double>();
  EXPECT_NEAR(r.last.total.item<double>(), total, 1e-5);
}

TEST(Trainer, NormalisationStateTravelsInTheFlatVectorAndTheCheckpoint) {
  Config cfg = cfg_with({"model.obs_norm=true", "learner.value_norm=\"popart\""});
  auto spec = envs::env_spec(cfg);
  NoReducer none;
  Trainer tr(cfg, spec, torch::kCPU, none);
  for (uint64_t s = 0; s < 3; ++s) {
    auto b = mpirl::testing::random_batch(4, 2, spec.obs_size(), 2, 0, 20 + s);
    b.obs = b.obs * 3 + 7;
    b.rewards = b.rewards * 50;
    tr.update(b, {});
  }
  auto& pol = tr.policy();
  EXPECT_GT(pol->obs_shift().mean().item<double>(), 5.0);
  EXPECT_GT(pol->value_scale().item<double>(), 1.5);
  // The flat vector (what actors and model.pt get) carries the buffers: a fresh policy that reads
  // it normalises and values exactly as the learner's.
  std::vector<float> flat(size_t(models::num_params(pol)));
  models::write_flat(pol, flat.data());
  models::Policy actor(spec, models::model_options(cfg));
  models::read_flat(actor, flat.data());
  auto obs = torch::randn({5, spec.obs_size()}) * 3 + 7;
  {
    torch::NoGradGuard g;
    auto mine = pol->forward(obs), theirs = actor->forward(obs);
    EXPECT_TRUE(mine.dist.equal(theirs.dist));
    EXPECT_TRUE(mine.value.equal(theirs.value));
  }
  // The checkpoint (learner.pt) restores the statistics: the next update is the same.
  Trainer other(cfg, spec, torch::kCPU, none);
  mpirl::testing::copy_checkpoint(tr, other);
  EXPECT_DOUBLE_EQ(other.obs_normalizer().moments().count(), tr.obs_normalizer().moments().count());
  auto b = mpirl::testing::random_batch(4, 2, spec.obs_size(), 2, 0, 30);
  auto b2 = b;
  auto r1 = tr.update(b, {});
  auto r2 = other.update(b2, {});
  EXPECT_NEAR(r1.value_sigma.item<double>(), r2.value_sigma.item<double>(), 1e-12);
  EXPECT_LT(mpirl::testing::max_abs_diff(mpirl::testing::params_of(tr), mpirl::testing::params_of(other)), 1e-6);
  EXPECT_TRUE(tr.policy()->obs_scale().equal(other.policy()->obs_scale()));
}

TEST(PolicyFile, LoadsWhatSaveWroteAndNamesAnObsNormMismatch) {
  Config with = cfg_with({"model.obs_norm=true"}), without = cfg_with({});
  auto spec = envs::env_spec(with);
  models::Policy a(spec, models::model_options(with));
  {
    torch::NoGradGuard g;
    a->obs_shift().fill_(0.5);
    a->obs_scale().fill_(2.0);
    a->value_scale().fill_(3.0);
  }
  const std::string dir = ::testing::TempDir() + "/policy_file_test";
  std::filesystem::create_directories(dir);
  models::save_policy(dir, a, spec, models::model_options(with));
  models::Policy b(spec, models::model_options(with));
  models::load_policy_file(b, dir + "/model.pt");
  auto obs = torch::randn({3, spec.obs_size()});
  torch::NoGradGuard g;
  EXPECT_TRUE(a->forward(obs).value.equal(b->forward(obs).value));
  EXPECT_TRUE(a->forward(obs).dist.equal(b->forward(obs).dist));
  // A policy built without model.obs_norm cannot take these statistics, and says why.
  models::Policy c(spec, models::model_options(without));
  try {
    models::load_policy_file(c, dir + "/model.pt");
    FAIL() << "loaded a model.pt with observation statistics into a policy without them";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("obs_shift"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("model.obs_norm"), std::string::npos) << e.what();
  }
}
