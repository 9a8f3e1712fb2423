// learner.grad_by_hand: APPO's gradient in closed form (learner/algorithms/appo_by_hand.cpp,
// models/policy_by_hand.cpp) against autograd's through appo_loss, for every parameter, over the
// policy's variants (separate or shared critic, tanh or relu, observation normalisation, PopArt's
// scale, the entropy bonus) and ratios on both sides of the clip and on it; the steps it leaves to
// autograd; and whole updates of two trainers that differ only in the key.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "envs/registry.h"
#include "learner/algorithms/appo.h"
#include "learner/trainer.h"
#include "models/policy.h"
#include "tests/common/config_with.h"
#include "tests/common/train_batches.h"

using namespace mpirl;
using namespace mpirl::learner;
using mpirl::testing::cfg_with;

namespace {

// A Gaussian policy over 5-dim observations with 3 action dimensions.
envs::EnvSpec box_spec() {
  envs::EnvSpec s = envs::env_spec(cfg_with({"env.id=\"Pendulum-v1\""}));
  s.obs_shape = {5};
  s.action_dim = 3;
  s.action_low.assign(3, -1.0f);
  s.action_high.assign(3, 1.0f);
  return s;
}

// N steps as Appo::prepare leaves them (flattened, advantages and targets fixed), with behaviour
// log-probabilities around the policy's own so that ratios fall inside, above and below the clip;
// the first four steps are the policy's own log-probabilities: r = 1 exactly, a tie in the min.
TrainBatch step_batch(models::Policy& p, const envs::EnvSpec& spec, int64_t N, uint64_t seed) {
  torch::manual_seed(seed);
  TrainBatch b;
  b.obs = 2.0 * torch::randn({1, N, spec.obs_size()}) + 0.5;
  b.actions = torch::randn({1, N, spec.action_dim});
  b.rewards = torch::zeros({1, N});
  b.terminated = torch::zeros({1, N});
  b.truncated = torch::zeros({1, N});
  b.advantages = 3.0 * torch::randn({1, N}) + 1.0;
  b.targets = torch::randn({1, N});
  torch::NoGradGuard g;
  auto logp = models::log_prob(spec, p->forward(b.obs).dist, b.actions);
  b.behaviour_logp = logp + 0.4 * torch::randn({1, N});
  b.behaviour_logp.slice(1, 0, 4).copy_(logp.slice(1, 0, 4));
  return b;
}

std::vector<torch::Tensor> grads(models::Policy& p) {
  std::vector<torch::Tensor> g;
  for (auto& t : p->parameters()) g.push_back(t.grad().defined() ? t.grad().clone() : torch::Tensor());
  return g;
}

void clear_grads(models::Policy& p) {
  for (auto& t : p->parameters()) t.mutable_grad() = torch::Tensor();
}

struct Variant {
  std::string name;
  std::vector<std::string> sets;
  double entropy_coef = 0;
  bool popart = false;
};

}  // namespace

TEST(GradByHand, EveryParameterMatchesAutograd) {
  const auto spec = box_spec();
  const std::vector<Variant> variants = {
      {"separate tanh (configs/mujoco.toml)",
       {"model.critic=\"separate\"", "model.activation=\"tanh\"", "learner.normalize_advantages=true"}},
      {"shared relu, raw advantages", {"model.critic=\"shared\"", "model.activation=\"relu\"",
                                       "learner.normalize_advantages=false"}},
      {"separate, entropy bonus, PopArt",
       {"model.critic=\"separate\"", "learner.normalize_advantages=true"}, 0.01, true},
      {"shared tanh, three layers, entropy bonus",
       {"model.hidden=[16, 8, 4]", "learner.normalize_advantages=true"}, 0.05},
  };
  for (const auto& v : variants) {
    SCOPED_TRACE(v.name);
    std::vector<std::string> sets = {"model.obs_norm=true", "model.hidden=[16, 12]", "model.init=\"orthogonal\""};
    sets.insert(sets.end(), v.sets.begin(), v.sets.end());
    torch::manual_seed(11);
    models::Policy p(spec, models::model_options(cfg_with(sets)));
    {
      torch::NoGradGuard g;  // a non-trivial policy: normalisation moved, the mean away from 0
      p->obs_shift().copy_(torch::randn({5}) * 0.3);
      p->obs_scale().copy_(0.5 + torch::rand({5}));
      for (auto& t : p->parameters()) t.add_(0.3 * torch::randn_like(t));
      if (v.popart) {
        p->value_shift().fill_(0.7);
        p->value_scale().fill_(2.5);
      }
    }
    ASSERT_TRUE(p->by_hand());
    auto b = step_batch(p, spec, 48, 5);
    LossOptions o = loss_options(cfg_with(sets));
    o.stats = false;
    o.entropy_coef = v.entropy_coef;
    if (v.popart) o.value_scale = p->value_scale();
    Appo appo(1, 1, /*steps=*/true);

    clear_grads(p);
    LossTerms a = appo.loss(spec, b, appo.forward(*p, b), o);
    a.total.backward();
    const auto want = grads(p);
    clear_grads(p);
    LossTerms h;
    ASSERT_TRUE(appo.grad_by_hand(spec, *p, b, o, h));
    const auto got = grads(p);

    EXPECT_NEAR(h.policy.item<double>(), a.policy.item<double>(), 1e-5);
    EXPECT_NEAR(h.value.item<double>(), a.value.item<double>(), 1e-5 * (1 + std::abs(a.value.item<double>())));
    EXPECT_NEAR(h.total.item<double>(), a.total.item<double>(), 1e-5 * (1 + std::abs(a.total.item<double>())));
    const auto names = p->named_parameters().keys();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      SCOPED_TRACE(names[i]);
      ASSERT_TRUE(want[i].defined() && got[i].defined());
      ASSERT_EQ(got[i].sizes(), want[i].sizes());
      const double scale = want[i].abs().max().item<double>();
      EXPECT_GT(scale, 1e-6);  // every parameter gets a gradient: a missing term would show as 0
      EXPECT_LE((got[i] - want[i]).abs().max().item<double>(), 1e-4 * scale + 1e-7);
    }
  }
}

TEST(GradByHand, TheClipSplitsAsAutogradDoes) {
  // One action dimension, the mean at 0: log pi = -a^2/2 e^-2ls - ls - log(2 pi)/2 known in closed
  // form; ratios 1 (a tie), 1.5 and 0.5 with positive and negative advantages.
  auto spec = box_spec();
  spec.obs_shape = {2};
  spec.action_dim = 1;
  torch::manual_seed(2);
  models::Policy p(spec, models::model_options(cfg_with({"model.hidden=[4]", "model.obs_norm=false",
                                                         "model.log_std_init=0.0"})));
  {
    torch::NoGradGuard g;
    for (auto& t : p->parameters()) t.zero_();  // mean 0, log-std 0, value 0 for every observation
  }
  TrainBatch b;
  const int64_t N = 6;
  b.obs = torch::randn({1, N, 2});
  b.actions = torch::zeros({1, N, 1});  // log pi = -log(2 pi)/2 for each
  const double logp = -0.5 * std::log(2 * M_PI);
  const std::vector<double> r = {1.0, 1.5, 0.5, 1.0, 1.5, 0.5};
  b.behaviour_logp = torch::empty({1, N});
  for (int64_t n = 0; n < N; ++n) b.behaviour_logp[0][n] = logp - std::log(r[size_t(n)]);
  b.advantages = torch::tensor({1.0f, 1.0f, 1.0f, -1.0f, -1.0f, -1.0f}).view({1, N});  // mean 0, std 1
  b.targets = torch::zeros({1, N});
  b.rewards = torch::zeros({1, N});
  LossOptions o = loss_options(cfg_with({"learner.algo=\"appo\""}));
  o.stats = false;
  o.entropy_coef = 0;
  Appo appo(1, 1, true);
  LossTerms h;
  ASSERT_TRUE(appo.grad_by_hand(spec, *p, b, o, h));
  // d loss / d log pi_n = -r_n A_n / N where the unclipped side is the min (r = 1: inside; r = 1.5
  // with A < 0; r = 0.5 with A > 0), else 0. With the mean at 0 and a = 0, z = 0: d/d mean = 0 and
  // d/d log_std = sum_n d/d log pi_n x (z^2 - 1) = -sum_n d/d log pi_n.
  double d_logp_sum = 0;
  const std::vector<double> adv = {1, 1, 1, -1, -1, -1};
  for (size_t n = 0; n < size_t(N); ++n) {
    const bool unclipped = r[n] == 1.0 || (r[n] > 1 && adv[n] < 0) || (r[n] < 1 && adv[n] > 0);
    if (unclipped) d_logp_sum += -r[n] * adv[n] / double(N);
  }
  EXPECT_NEAR(p->log_std().grad().item<double>(), -d_logp_sum, 1e-6);
  EXPECT_NEAR(d_logp_sum, -(1.0 + 0.5 - 1.0 - 1.5) / 6.0, 1e-12);  // the hand count above, spelled out
  // -mean_n min(r A, clip(r) A): (1 + 1.2 + 0.5 - 1 - 1.5 - 0.8) / 6 with the sign flipped.
  EXPECT_NEAR(h.policy.item<double>(), -(1.0 + 1.2 + 0.5 - 1.0 - 1.5 - 0.8) / 6.0, 1e-6);
}

TEST(GradByHand, LeavesToAutogradWhatItDoesNotCover) {
  const auto spec = box_spec();
  torch::manual_seed(4);
  models::Policy p(spec, models::model_options(cfg_with({"model.hidden=[8]"})));
  auto b = step_batch(p, spec, 16, 3);
  LossOptions o = loss_options(cfg_with({"learner.algo=\"appo\""}));
  o.stats = false;
  LossTerms l;
  EXPECT_TRUE(Appo(1, 1, true).grad_by_hand(spec, *p, b, o, l));
  EXPECT_FALSE(Appo(1, 1, false).grad_by_hand(spec, *p, b, o, l));  // whole sequences: targets per step
  auto stats = o;
  stats.stats = true;  // the logging-only terms come from autograd's loss
  EXPECT_FALSE(Appo(1, 1, true).grad_by_hand(spec, *p, b, stats, l));
  auto proximal = o;
  proximal.appo_proximal = true;
  EXPECT_FALSE(Appo(1, 1, true).grad_by_hand(spec, *p, b, proximal, l));
  auto masked = b;
  masked.keep = torch::ones({16});
  EXPECT_FALSE(Appo(1, 1, true).grad_by_hand(spec, *p, masked, o, l));
  auto weighted = b;
  weighted.weights = torch::ones({16});
  EXPECT_FALSE(Appo(1, 1, true).grad_by_hand(spec, *p, weighted, o, l));
  const auto discrete = envs::env_spec(cfg_with({}));
  ASSERT_TRUE(discrete.discrete);
  models::Policy q(discrete, models::model_options(cfg_with({"model.hidden=[8]"})));
  EXPECT_FALSE(Appo(1, 1, true).grad_by_hand(discrete, *q, b, o, l));
  models::Policy rnn(spec, models::model_options(cfg_with({"model.hidden=[8]", "model.core=\"gru\""})));
  EXPECT_FALSE(rnn->by_hand());
}

TEST(GradByHand, UpdatesMatchAutogradsOverManySteps) {
  // Two trainers from the same seed, learner.grad_by_hand on and off: the same batches, 2 updates of
  // 4 epochs x 8 minibatches. Float32 sums in other orders keep them apart by rounding only.
  std::vector<std::string> sets = {"env.id=\"Pendulum-v1\"", "learner.algo=\"appo\"",
                                   "learner.appo_minibatch=\"steps\"",
                                   "learner.appo_epochs=4", "learner.appo_minibatches=8", "learner.advantages=\"gae\"",
                                   "learner.normalize_advantages=true", "learner.entropy_coef=0.0",
                                   "model.critic=\"separate\"", "model.obs_norm=true", "model.hidden=[32, 32]",
                                   "learner.lr=0.001", "actor.rollout_len=16", "learner.batch_size=8"};
  auto on = cfg_with(sets);
  sets.push_back("learner.grad_by_hand=false");
  auto off = cfg_with(sets);
  const auto spec = envs::env_spec(on);
  NoReducer none;
  torch::manual_seed(9);
  Trainer a(on, spec, torch::kCPU, none);
  torch::manual_seed(9);
  Trainer c(off, spec, torch::kCPU, none);
  ASSERT_LT(mpirl::testing::max_abs_diff(mpirl::testing::params_of(a), mpirl::testing::params_of(c)), 1e-12);
  const auto start = mpirl::testing::params_of(a);
  for (uint64_t k = 0; k < 2; ++k) {
    auto b = mpirl::testing::random_batch(16, 8, spec.obs_size(), 1, 0, 20 + k);
    b.actions = torch::randn({16, 8, spec.action_dim});
    b.behaviour_logp = -1.0 + 0.2 * torch::randn({16, 8});
    auto b2 = b;
    torch::manual_seed(100 + k);  // the same shuffles in both
    a.update(b, {});
    torch::manual_seed(100 + k);
    c.update(b2, {});
  }
  const double moved = mpirl::testing::max_abs_diff(mpirl::testing::params_of(a), start);
  const double apart = mpirl::testing::max_abs_diff(mpirl::testing::params_of(a), mpirl::testing::params_of(c));
  EXPECT_GT(moved, 1e-3);
  EXPECT_LT(apart, 1e-3 * moved);
  EXPECT_GT(apart, 0.0);  // the by-hand steps ran: their sums round apart from autograd's
}
