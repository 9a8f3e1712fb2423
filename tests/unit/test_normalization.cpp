// Normalisers and schedules (issue 20) against hand-computed values and naive implementations:
// learner/schedule.h, learner/normalizers.h (running moments, observation normalisation, PopArt),
// the loss options (advantage normalisation, reward scale and clip, PopArt's value loss). Inside the
// trainer (scheduled lr, flat vector, checkpoint, model.pt): test_normalization_trainer.cpp.
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

TEST(Schedule, HandComputedValues) {
  EXPECT_DOUBLE_EQ(scheduled("constant", 3e-4, 0.0, 0.7), 3e-4);
  EXPECT_DOUBLE_EQ(scheduled("linear", 1.0, 0.0, 0.25), 0.75);
  EXPECT_DOUBLE_EQ(scheduled("linear", 0.01, 0.002, 0.5), 0.006);
  EXPECT_DOUBLE_EQ(scheduled("linear", 1.0, 0.0, 1.7), 0.0);   // clamped at the end
  EXPECT_DOUBLE_EQ(scheduled("linear", 1.0, 0.0, -0.3), 1.0);  // and at the start
  // cos(pi/2) = 0: half way between; cos(pi/3) = 1/2: three quarters of the way back to start.
  EXPECT_NEAR(scheduled("cosine", 2.0, 0.0, 0.5), 1.0, 1e-12);
  EXPECT_NEAR(scheduled("cosine", 2.0, 0.0, 1.0 / 3.0), 1.5, 1e-12);
  EXPECT_NEAR(scheduled("cosine", 2.0, 0.5, 1.0), 0.5, 1e-12);
  EXPECT_NEAR(scheduled("cosine", 2.0, 0.5, 0.0), 2.0, 1e-12);
  EXPECT_THROW(scheduled("step", 1, 0, 0.5), Error);
  EXPECT_DOUBLE_EQ(progress_of(250, 1000), 0.25);
  EXPECT_DOUBLE_EQ(progress_of(2000, 1000), 1.0);
  EXPECT_DOUBLE_EQ(progress_of(5, 0), 0.0);
}

TEST(RunningMoments, MergedBatchesEqualTheMomentsOfEverything) {
  // Hand-computed: {1, 3} then {5}: mean 3, population variance (4 + 0 + 4) / 3.
  RunningMoments m(1, torch::kCPU);
  m.merge(2, torch::tensor({2.0}), torch::tensor({1.0}));
  m.merge(1, torch::tensor({5.0}), torch::tensor({0.0}));
  EXPECT_DOUBLE_EQ(m.count(), 3.0);
  EXPECT_NEAR(m.mean().item<double>(), 3.0, 1e-12);
  EXPECT_NEAR(m.var().item<double>(), 8.0 / 3.0, 1e-12);
  // Naive: the moments of all rows at once, against many uneven batches of far-off-centre data.
  torch::manual_seed(3);
  auto all = torch::randn({1000, 4}, torch::kFloat64) * torch::tensor({1.0, 10.0, 0.1, 3.0}, torch::kFloat64) + 1e3;
  RunningMoments r(4, torch::kCPU);
  for (int64_t s = 0, n = 1; s < 1000; s += n, n = n * 2 % 97 + 1) {
    auto x = all.slice(0, s, std::min<int64_t>(s + n, 1000));
    r.merge(double(x.size(0)), x.mean(0), x.var(0, /*unbiased=*/false));
  }
  EXPECT_DOUBLE_EQ(r.count(), 1000.0);
  EXPECT_LT((r.mean() - all.mean(0)).abs().max().item<double>(), 1e-9);
  EXPECT_LT(((r.var() - all.var(0, false)) / all.var(0, false)).abs().max().item<double>(), 1e-9);
}

using mpirl::testing::cfg_with;

TEST(ObsNormalizer, PublishesTheRunningStatisticsIntoThePolicy) {
  Config cfg = cfg_with({"model.obs_norm=true", "model.obs_norm_clip=3.0"});
  auto spec = envs::env_spec(cfg);  // CartPole: 4 floats
  NoReducer none;
  Trainer tr(cfg, spec, torch::kCPU, none);
  auto& pol = tr.policy();
  ASSERT_TRUE(pol->normalizes_obs());
  EXPECT_EQ(pol->obs_shift().numel(), 4);
  ObsNormalizer norm(pol, {}, 1);
  torch::manual_seed(5);
  auto a = torch::randn({3, 2, 4}) * 4 + 2, b = torch::randn({5, 2, 4}) * 0.5 - 1;
  norm.update(a);
  norm.update(b);
  auto all = torch::cat({a.reshape({-1, 4}), b.reshape({-1, 4})}).to(torch::kFloat64);
  auto mean = all.mean(0), var = all.var(0, false);
  EXPECT_LT((pol->obs_shift().to(torch::kFloat64) - mean).abs().max().item<double>(), 1e-5);
  EXPECT_LT((pol->obs_scale().to(torch::kFloat64) - (var + 1e-8).rsqrt()).abs().max().item<double>(), 1e-5);
  // The policy applies it, clipped: an observation at mean + 10 std becomes +3 (the clip).
  auto obs = torch::zeros({1, 4});
  obs[0][0] = mean[0].item<double>() + 10 * std::sqrt(var[0].item<double>());
  for (int i = 1; i < 4; ++i) obs[0][i] = mean[i].item<double>() + 0.5 * std::sqrt(var[i].item<double>());
  auto n = pol->normalize_obs(obs);
  EXPECT_NEAR(n[0][0].item<double>(), 3.0, 1e-6);
  for (int i = 1; i < 4; ++i) EXPECT_NEAR(n[0][i].item<double>(), 0.5, 1e-4);
  // Without model.obs_norm the buffers are empty and the observations go in as they are.
  Trainer plain(cfg_with({}), spec, torch::kCPU, none);
  EXPECT_FALSE(plain.policy()->normalizes_obs());
  EXPECT_TRUE(plain.policy()->normalize_obs(obs).equal(obs));
}

TEST(ObsNormalizer, AveragedLearnersKeepTheStatisticsOfTheirUnion) {
  // Two learners' batches combined by an averaging function (what MPI_Allreduce / L does): the
  // statistics equal those of both batches together, on both learners.
  Config cfg = cfg_with({"model.obs_norm=true"});
  auto spec = envs::env_spec(cfg);
  torch::manual_seed(6);
  auto x0 = torch::randn({4, 3, 4}) * 2 + 5, x1 = torch::randn({4, 3, 4}) - 3;
  models::Policy p0(spec, models::model_options(cfg)), p1(spec, models::model_options(cfg));
  // The average is taken by hand: both learners start at a running mean of 0, so each one's
  // moments are centred on 0, and the all-reduce gives their mean.
  auto moments = [](const torch::Tensor& x) {
    auto d = x.reshape({-1, 4}).to(torch::kFloat64);
    return torch::stack({d.mean(0), d.square().mean(0)});
  };
  const torch::Tensor both = (moments(x0) + moments(x1)) / 2;
  AverageFn avg = [both](torch::Tensor& t) { t.copy_(both); };
  ObsNormalizer m0(p0, avg, 2), m1(p1, avg, 2);
  m0.update(x0);
  m1.update(x1);
  auto all = torch::cat({x0.reshape({-1, 4}), x1.reshape({-1, 4})}).to(torch::kFloat64);
  for (auto* m : {&m0, &m1}) {
    EXPECT_DOUBLE_EQ(m->moments().count(), 24.0);
    EXPECT_LT((m->moments().mean() - all.mean(0)).abs().max().item<double>(), 1e-9);
    EXPECT_LT((m->moments().var() - all.var(0, false)).abs().max().item<double>(), 1e-9);
  }
  EXPECT_TRUE(p0->obs_shift().equal(p1->obs_shift()));
}

TEST(PopArt, StatisticsByHandAndOutputsPreserved) {
  Config cfg = cfg_with({"learner.value_norm=\"popart\""});
  auto spec = envs::env_spec(cfg);
  models::Policy pol(spec, models::model_options(cfg));
  PopArt popart(pol, 0.4, {});
  torch::manual_seed(9);
  auto obs = torch::randn({6, 4});
  torch::NoGradGuard g;
  auto before = pol->forward(obs).value.clone();
  // First update: weight 1 (the batch's own moments): mu = 10, E[x^2] = 136 -> sigma = 6.
  popart.update(torch::tensor(10.0), torch::tensor(136.0));
  EXPECT_NEAR(popart.mu().item<double>(), 10.0, 1e-9);
  EXPECT_NEAR(popart.sigma().item<double>(), 6.0, 1e-9);
  EXPECT_NEAR(pol->value_shift().item<double>(), 10.0, 1e-6);
  EXPECT_NEAR(pol->value_scale().item<double>(), 6.0, 1e-6);
  EXPECT_LT((pol->forward(obs).value - before).abs().max().item<double>(), 1e-4);
  // Second: weight max(0.4, 1/2) = 0.5: mu = 0.5*10 + 0.5*20 = 15, nu = 0.5*136 + 0.5*500 = 318,
  // sigma = sqrt(318 - 225) = sqrt(93).
  popart.update(torch::tensor(20.0), torch::tensor(500.0));
  EXPECT_NEAR(popart.mu().item<double>(), 15.0, 1e-9);
  EXPECT_NEAR(popart.sigma().item<double>(), std::sqrt(93.0), 1e-9);
  EXPECT_LT((pol->forward(obs).value - before).abs().max().item<double>(), 1e-4);
  // Third: weight max(0.4, 1/3) = 0.4 (the decay): mu = 0.6*15 + 0.4*(-5) = 7, nu = 0.6*318 + 0.4*30 = 202.8.
  popart.update(torch::tensor(-5.0), torch::tensor(30.0));
  EXPECT_NEAR(popart.mu().item<double>(), 7.0, 1e-9);
  EXPECT_NEAR(popart.sigma().item<double>(), std::sqrt(202.8 - 49.0), 1e-9);
  EXPECT_LT((pol->forward(obs).value - before).abs().max().item<double>(), 1e-4);
}

TEST(Losses, NormalizeOverKeptByHand) {
  // x = [[1, 100], [3, 200]] with the second sequence masked: mean 2, std 1 over the kept steps.
  auto x = torch::tensor({{1.0, 100.0}, {3.0, 200.0}});
  auto n = normalize_over_kept(x, torch::tensor({1.0, 0.0}));
  EXPECT_NEAR(n[0][0].item<double>(), -1.0, 1e-6);
  EXPECT_NEAR(n[1][0].item<double>(), 1.0, 1e-6);
  auto all = normalize_over_kept(torch::tensor({{1.0, 2.0}, {3.0, 6.0}}), torch::Tensor());
  // mean 3, population std sqrt((4 + 1 + 0 + 9) / 4) = sqrt(3.5).
  EXPECT_NEAR(all[1][1].item<double>(), 3.0 / std::sqrt(3.5), 1e-6);
}

TEST(Losses, RewardScaleAndClipEqualScaledRewards) {
  // The V-trace targets with reward_scale 0.1 and clip 0.15 equal those of rewards scaled and
  // clipped by hand, and differ from the unscaled ones.
  auto spec = envs::env_spec(cfg_with({}));
  auto b = mpirl::testing::random_batch(5, 3, 4, 2, 0, 11);
  b.trunc_value = torch::zeros_like(b.rewards);
  models::Policy pol(spec, models::model_options(cfg_with({})));
  torch::NoGradGuard g;
  auto out = pol->unroll(b.obs, b.is_init, torch::Tensor());
  LossOptions o;
  o.reward_scale = 0.1;
  o.reward_clip = 0.15;
  auto scaled = compute_targets(spec, b, out, o);
  auto b2 = b;
  b2.rewards = (b.rewards * 0.1).clamp(-0.15, 0.15);
  auto want = compute_targets(spec, b2, out, LossOptions{});
  auto plain = compute_targets(spec, b, out, LossOptions{});
  EXPECT_LT((scaled.vt.vs - want.vt.vs).abs().max().item<double>(), 1e-6);
  EXPECT_GT((plain.vt.vs - want.vt.vs).abs().max().item<double>(), 1e-2);
}

TEST(Losses, PopArtValueLossIsInNormalisedUnits) {
  auto spec = envs::env_spec(cfg_with({}));
  auto b = mpirl::testing::random_batch(5, 3, 4, 2, 0, 12);
  b.trunc_value = torch::zeros_like(b.rewards);
  models::Policy pol(spec, models::model_options(cfg_with({})));
  auto out = pol->unroll(b.obs, b.is_init, torch::Tensor());
  LossOptions o;
  auto l1 = impala_loss(spec, b, out, o);
  o.value_scale = torch::full({1}, 4.0);
  auto l4 = impala_loss(spec, b, out, o);
  EXPECT_NEAR(l4.value.item<double>(), l1.value.item<double>() / 16.0, 1e-6);
  // The targets' moments, for PopArt: mean of vs and of vs^2.
  auto t = compute_targets(spec, b, out, o);
  EXPECT_NEAR(l1.target_mean.item<double>(), t.vt.vs.mean().item<double>(), 1e-6);
  EXPECT_NEAR(l1.target_sq_mean.item<double>(), t.vt.vs.square().mean().item<double>(), 1e-5);
}

TEST(Losses, AdvantageNormalisationIsInvariantToRewardScale) {
  // With normalised advantages the APPO policy loss ignores a positive rescaling of the rewards
  // when the values scale with them (here: a value head at zero).
  Config cfg = cfg_with({"learner.algo=\"appo\""});
  auto spec = envs::env_spec(cfg);
  auto b = mpirl::testing::random_batch(6, 4, 4, 2, 0, 13);
  b.trunc_value = torch::zeros_like(b.rewards);
  models::Policy pol(spec, models::model_options(cfg));
  {
    torch::NoGradGuard g;
    pol->value_head()->weight.zero_();
    pol->value_head()->bias.zero_();
  }
  auto out = pol->unroll(b.obs, b.is_init, torch::Tensor());
  LossOptions o;
  o.normalize_advantages = true;
  auto l1 = appo_loss(spec, b, out, o);
  o.reward_scale = 37.0;
  auto l37 = appo_loss(spec, b, out, o);
  EXPECT_NEAR(l1.policy.item<double>(), l37.policy.item<double>(), 1e-5);
  o.normalize_advantages = false;
  auto raw37 = appo_loss(spec, b, out, o);
  EXPECT_GT(std::abs(raw37.policy.item<double>() - l1.policy.item<double>()), 1e-3);
}
