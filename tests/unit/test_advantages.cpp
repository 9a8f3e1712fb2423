// APPO's GAE(lambda) advantages (learner.advantages = "gae", issue 41) against hand-computed values
// and a naive float64 loop written from the paper's definition, with terminations, truncations
// (bootstrapped from trunc_value) and the sequence end (bootstrapped from the next observation's
// value); the APPO surrogate on them; the decoupled surrogate of learner.appo_proximal; PPO's
// minibatches of shuffled steps (learner.appo_minibatch = "steps"); and the config checks that keep
// GAE away from IMPALA and steps away from recurrent policies.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include <fmt/format.h>

#include "core/config.h"
#include "core/error.h"
#include "envs/registry.h"
#include "learner/algorithms/actor_critic.h"
#include "learner/algorithms/appo.h"
#include "learner/gradient_reducer.h"
#include "learner/trainer.h"
#include "tests/common/config_with.h"
#include "tests/common/train_batches.h"

using namespace mpirl;
using namespace mpirl::learner;

namespace {

using mpirl::testing::cfg_with;

// GAE for one batch, step by step in float64: next value 0 after a termination, trunc_value after a
// truncation, V(x_{t+1}) otherwise; the sum of (gamma lambda)^k deltas stops at an episode's end.
torch::Tensor naive_gae(const TrainBatch& b, const torch::Tensor& values, double gamma, double lambda) {
  const int64_t T = b.rewards.size(0), B = b.rewards.size(1);
  auto r = b.rewards.to(torch::kFloat64), term = b.terminated.to(torch::kFloat64);
  auto trunc = b.truncated.to(torch::kFloat64), tv = b.trunc_value.to(torch::kFloat64);
  auto v = values.to(torch::kFloat64);
  auto adv = torch::zeros({T, B}, torch::kFloat64);
  for (int64_t j = 0; j < B; ++j) {
    double next_adv = 0;
    for (int64_t t = T - 1; t >= 0; --t) {
      const bool terminated = term[t][j].item<double>() > 0.5, truncated = trunc[t][j].item<double>() > 0.5;
      double next_v = terminated ? 0.0 : truncated ? tv[t][j].item<double>() : v[t + 1][j].item<double>();
      double delta = r[t][j].item<double>() + gamma * next_v - v[t][j].item<double>();
      bool episode_goes_on = !terminated && !truncated && t + 1 < T;
      double a = delta + (episode_goes_on ? gamma * lambda * next_adv : 0.0);
      adv[t][j] = a;
      next_adv = a;
    }
  }
  return adv;
}

// An APPO config with GAE(0.9), a random 8 x 5 batch (no truncation values) and a fresh policy's
// outputs over it, without gradient, with the log-probs of the batch's actions in float64.
struct AppoCase {
  Config cfg;
  envs::EnvSpec spec;
  TrainBatch b;
  models::PolicyOutput out;
  torch::Tensor logp;
};
AppoCase appo_case(std::vector<std::string> extra_sets, uint64_t seed) {
  std::vector<std::string> sets{"learner.algo=\"appo\"", "learner.advantages=\"gae\"", "learner.lambda=0.9"};
  sets.insert(sets.end(), extra_sets.begin(), extra_sets.end());
  AppoCase c{cfg_with(sets)};
  c.spec = envs::env_spec(c.cfg);
  c.b = mpirl::testing::random_batch(8, 5, 4, 2, 0, seed);
  c.b.trunc_value = torch::zeros_like(c.b.rewards);
  models::Policy pol(c.spec, models::model_options(c.cfg));
  torch::NoGradGuard g;
  c.out = pol->unroll(c.b.obs, c.b.is_init, torch::Tensor());
  c.logp = models::log_prob(c.spec, c.out.dist.slice(0, 0, 8), c.b.actions).to(torch::kFloat64);
  return c;
}

}  // namespace

TEST(Gae, HandComputedOneSequence) {
  // T = 3, one column, gamma 0.5, lambda 0.5, values V = (1, 2, 3, 4), rewards (3, 1, 0), a
  // termination after step 1:
  //   step 2 (a new episode, cut by the sequence end): delta = 0 + 0.5 * 4 - 3 = -1, adv = -1
  //   step 1 (terminates):                               delta = 1 + 0 - 2 = -1,       adv = -1
  //   step 0:                                            delta = 3 + 0.5 * 2 - 1 = 3,  adv = 3 + 0.25 * (-1) = 2.75
  TrainBatch b;
  b.rewards = torch::tensor({3.0, 1.0, 0.0}).view({3, 1});
  b.terminated = torch::tensor({0.0, 1.0, 0.0}).view({3, 1});
  b.truncated = torch::zeros({3, 1});
  b.trunc_value = torch::zeros({3, 1});
  b.actions = torch::zeros({3, 1}, torch::kInt64);
  b.behaviour_logp = torch::full({3, 1}, std::log(0.5));
  models::PolicyOutput out;
  out.value = torch::tensor({1.0, 2.0, 3.0, 4.0}).view({4, 1});
  out.dist = torch::zeros({4, 1, 2});
  auto spec = envs::env_spec(cfg_with({}));
  LossOptions o;
  o.gamma = 0.5;
  o.vtrace.lambda = 0.5;
  o.gae = true;
  auto t = compute_targets(spec, b, out, o);
  EXPECT_NEAR(t.vt.advantages[0][0].item<double>(), 2.75, 1e-6);
  EXPECT_NEAR(t.vt.advantages[1][0].item<double>(), -1.0, 1e-6);
  EXPECT_NEAR(t.vt.advantages[2][0].item<double>(), -1.0, 1e-6);
  // Value targets: the lambda-returns, advantages + V.
  EXPECT_NEAR(t.vt.vs[0][0].item<double>(), 3.75, 1e-6);
  EXPECT_NEAR(t.vt.vs[2][0].item<double>(), 2.0, 1e-6);
}

TEST(Gae, MatchesANaiveLoopWithEpisodeEnds) {
  auto cfg = cfg_with({"learner.algo=\"appo\"", "learner.advantages=\"gae\""});
  auto spec = envs::env_spec(cfg);
  auto b = mpirl::testing::random_batch(16, 6, 4, 2, 0, 21, /*extras=*/true);
  b.trunc_value = torch::randn_like(b.rewards);
  ASSERT_GT(b.truncated.sum().item<double>(), 0);
  ASSERT_GT(b.terminated.sum().item<double>(), 0);
  models::Policy pol(spec, models::model_options(cfg));
  torch::NoGradGuard g;
  auto out = pol->unroll(b.obs, b.is_init, torch::Tensor());
  for (double lambda : {0.95, 1.0, 0.0}) {
    auto o = loss_options(cfg);
    o.gamma = 0.97;
    o.vtrace.lambda = lambda;
    ASSERT_TRUE(o.gae);
    auto t = compute_targets(spec, b, out, o);
    auto want = naive_gae(b, out.value, 0.97, lambda);
    EXPECT_LT((t.vt.advantages.to(torch::kFloat64) - want).abs().max().item<double>(), 1e-5) << "lambda " << lambda;
    auto vs_want = want + out.value.slice(0, 0, 16).to(torch::kFloat64);
    EXPECT_LT((t.vt.vs.to(torch::kFloat64) - vs_want).abs().max().item<double>(), 1e-5) << "lambda " << lambda;
  }
  // lambda < 1 is not V-trace's advantage (which uses the one-step q_t - V(x_t) on vs_{t+1}).
  auto o = loss_options(cfg);
  auto vt = o;
  vt.gae = false;
  vt.vtrace.lambda = o.vtrace.lambda = 0.95;
  EXPECT_GT((compute_targets(spec, b, out, o).vt.advantages - compute_targets(spec, b, out, vt).vt.advantages)
                .abs()
                .max()
                .item<double>(),
            1e-3);
}

TEST(Gae, AppoSurrogateUsesTheGaeAdvantages) {
  auto [cfg, spec, b, out, logp] = appo_case({}, 22);
  torch::NoGradGuard g;
  auto o = loss_options(cfg);
  auto l = appo_loss(spec, b, out, o);
  // By hand: -mean(min(ratio adv, clip(ratio) adv)) with the naive loop's advantages.
  auto adv = naive_gae(b, out.value, o.gamma, 0.9);
  auto ratio = (logp - b.behaviour_logp.to(torch::kFloat64)).exp();
  auto want = -torch::min(ratio * adv, ratio.clamp(0.8, 1.2) * adv).mean();
  EXPECT_NEAR(l.policy.item<double>(), want.item<double>(), 1e-5);
}

// learner.appo_proximal: r = pi / pi_prox clipped, each step weighted by min(pi_prox / mu, rho_bar),
// by hand in float64 with proximal log-probs apart from both the policy's and the actors'.
TEST(Appo, ProximalSurrogateByHand) {
  auto [cfg, spec, b, out, logp] = appo_case({"learner.appo_proximal=true", "learner.rho_bar=1.1"}, 23);
  torch::NoGradGuard g;
  b.proximal_logp = (logp + 0.3 * torch::randn({8, 5}, torch::kFloat64)).to(torch::kFloat32);
  auto o = loss_options(cfg);
  ASSERT_TRUE(o.appo_proximal);
  auto l = appo_loss(spec, b, out, o);
  auto adv = naive_gae(b, out.value, o.gamma, 0.9);
  auto prox = b.proximal_logp.to(torch::kFloat64), mu = b.behaviour_logp.to(torch::kFloat64);
  auto ratio = (logp - prox).exp();
  auto w = (prox - mu).exp().clamp_max(1.1);
  ASSERT_GT((w < 1.1).sum().item<int64_t>(), 0);  // some weights truncated, some not
  ASSERT_GT((w >= 1.1).sum().item<int64_t>(), 0);
  auto want = -(w * torch::min(ratio * adv, ratio.clamp(0.8, 1.2) * adv)).mean();
  EXPECT_NEAR(l.policy.item<double>(), want.item<double>(), 1e-5);
  EXPECT_NEAR(l.clip_fraction.item<double>(), ((ratio - 1).abs() > 0.2).to(torch::kFloat64).mean().item<double>(), 1e-6);
  // Without the option the same batch gives the actors' ratio: a different loss.
  o.appo_proximal = false;
  auto plain = appo_loss(spec, b, out, o);
  EXPECT_GT(std::abs(plain.policy.item<double>() - want.item<double>()), 1e-3);
}

// A stale batch (actors' probabilities of 0.1 for the action taken under a near-uniform 2-action
// policy: every ratio about 5) starts the update outside the clip; with appo_proximal the Trainer's
// prepare sets pi_prox to the policy as it stands, so the first step's ratios are all 1.
TEST(Appo, ProximalUpdateStartsInsideTheClip) {
  auto first_clip_fraction = [](bool proximal) {
    Config cfg = load_config("", {"learner.algo=\"appo\"", "learner.appo_epochs=1", "learner.appo_minibatches=1",
                                  "learner.value_norm=\"none\"",
                                  std::string("learner.appo_proximal=") + (proximal ? "true" : "false")});
    auto spec = envs::env_spec(cfg);
    NoReducer none;
    torch::manual_seed(5);
    Trainer tr(cfg, spec, torch::kCPU, none, StepMode::Eager);
    auto b = mpirl::testing::random_batch(6, 4, spec.obs_size(), spec.num_actions, 0, 31);
    b.behaviour_logp.fill_(std::log(0.1));
    auto r = tr.update(b, {});
    return r.last.clip_fraction.item<double>();
  };
  EXPECT_GT(first_clip_fraction(false), 0.9);
  EXPECT_EQ(first_clip_fraction(true), 0.0);
}

// learner.appo_minibatch = "steps": prepare fixes the advantages and targets from the policy as the
// update starts (the naive GAE loop on its values), then flattens the batch to one step per column;
// a minibatch's loss uses those fixed values even after the policy has moved.
TEST(Appo, StepMinibatchesKeepTheAdvantagesOfTheUpdateStart) {
  auto [cfg, spec, b, out, logp] =
      appo_case({"learner.appo_minibatch=\"steps\"", "learner.value_norm=\"none\"", "learner.appo_minibatches=4"}, 24);
  const int64_t T = 8, B = 5;
  b.truncated = torch::zeros({T, B});
  b.truncated[3][1] = 1;
  b.truncated[6][4] = 1;
  b.trunc_value = torch::randn({T, B});
  auto o = loss_options(cfg);
  ASSERT_EQ(cfg.learner.appo_minibatch, "steps");
  torch::manual_seed(3);
  models::Policy pol(spec, models::model_options(cfg));
  torch::Tensor v0;
  {
    torch::NoGradGuard g;
    v0 = pol->unroll(b.obs, b.is_init, torch::Tensor()).value.to(torch::kFloat64);
  }
  const auto adv = naive_gae(b, v0, o.gamma, 0.9);
  const auto targets = adv + v0.slice(0, 0, T);
  const TrainBatch orig = b;
  Appo algo(1, 4, /*steps=*/true);
  ASSERT_TRUE(algo.shuffles());
  algo.prepare(spec, *pol.ptr(), b, o);
  ASSERT_EQ(b.rewards.sizes(), (std::vector<int64_t>{1, T * B}));
  ASSERT_EQ(b.obs.sizes(), (std::vector<int64_t>{1, T * B, 4}));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < B; ++j) {
      const int64_t c = t * B + j;
      ASSERT_NEAR(b.advantages[0][c].item<double>(), adv[t][j].item<double>(), 1e-5) << t << " " << j;
      ASSERT_NEAR(b.targets[0][c].item<double>(), targets[t][j].item<double>(), 1e-5) << t << " " << j;
      ASSERT_TRUE(torch::equal(b.obs[0][c], orig.obs[t][j]));
      ASSERT_EQ(b.actions[0][c].item<int64_t>(), orig.actions[t][j].item<int64_t>());
      ASSERT_EQ(b.behaviour_logp[0][c].item<float>(), orig.behaviour_logp[t][j].item<float>());
    }
  // A prioritized replay's weights and a policy-lag mask follow each step's sequence.
  {
    TrainBatch masked = orig;
    masked.weights = torch::tensor({0.5, 1.5, 0.75, 1.0, 2.0}, torch::kFloat32);
    masked.keep = torch::tensor({1.0, 0.0, 1.0, 1.0, 0.0}, torch::kFloat32);
    masked.advantages = torch::zeros({T, B});
    masked.targets = torch::zeros({T, B});
    const auto f = masked.flatten_steps();
    ASSERT_EQ(f.keep.numel(), T * B);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t j = 0; j < B; ++j) {
        EXPECT_EQ(f.weights[t * B + j].item<float>(), masked.weights[j].item<float>()) << t << " " << j;
        EXPECT_EQ(f.keep[t * B + j].item<float>(), masked.keep[j].item<float>()) << t << " " << j;
      }
  }
  // The replay's priorities stay one per sequence: mean |target - V| over its steps.
  ASSERT_EQ(b.priorities.numel(), B);
  EXPECT_LT((b.priorities.to(torch::kFloat64) - adv.abs().mean(0)).abs().max().item<double>(), 1e-5);

  // The policy moves (as after a first optimizer step); a minibatch of 8 steps still uses the fixed values.
  {
    torch::NoGradGuard g;
    for (auto& p : pol->parameters()) p.add_(0.05 * torch::randn_like(p));
  }
  const auto cols = torch::tensor({3, 17, 22, 39, 0, 8, 30, 11}, torch::kInt64);
  auto mb = b.select_batch(cols);
  torch::NoGradGuard g;
  auto mb_out = pol->unroll(mb.obs, mb.is_init, torch::Tensor());
  auto l = appo_loss(spec, mb, mb_out, o);
  auto mb_logp = models::log_prob(spec, mb_out.dist.slice(0, 0, 1), mb.actions).to(torch::kFloat64)[0];
  auto a = adv.reshape({T * B}).index_select(0, cols), tgt = targets.reshape({T * B}).index_select(0, cols);
  auto ratio = (mb_logp - mb.behaviour_logp[0].to(torch::kFloat64)).exp();
  auto want_policy = -torch::min(ratio * a, ratio.clamp(0.8, 1.2) * a).mean();
  auto want_value = 0.5 * (tgt - mb_out.value[0].to(torch::kFloat64)).square().mean();
  EXPECT_NEAR(l.policy.item<double>(), want_policy.item<double>(), 1e-5);
  EXPECT_NEAR(l.value.item<double>(), want_value.item<double>(), 1e-5);
  // Advantages recomputed from the moved policy's values would give another value loss.
  auto moved = naive_gae(orig, pol->unroll(orig.obs, orig.is_init, torch::Tensor()).value, o.gamma, 0.9);
  EXPECT_GT((moved - adv).abs().max().item<double>(), 1e-2);
}

// The Trainer shuffles the steps into new minibatches every epoch, from the CPU generator (which
// the learner seeds with run.seed and checkpoints): the same draws give the same parameters after
// two updates, other draws other parameters (from the same start and batches).
TEST(Appo, StepMinibatchesShuffleFromTheGenerator) {
  auto params_after = [](int seed) {
    Config cfg = load_config("", {"learner.algo=\"appo\"", "learner.appo_minibatch=\"steps\"", "learner.appo_epochs=3",
                                  "learner.appo_minibatches=6", "learner.lr=0.01", "actor.rollout_len=6",
                                  "learner.batch_size=4"});
    auto spec = envs::env_spec(cfg);
    NoReducer none;
    torch::manual_seed(5);
    Trainer tr(cfg, spec, torch::kCPU, none, StepMode::Eager);
    UpdateResult r;
    for (uint64_t k = 0; k < 2; ++k) {
      auto b = mpirl::testing::random_batch(6, 4, spec.obs_size(), spec.num_actions, 0, 40 + k, true);
      torch::manual_seed(seed + 10 * k);  // random_batch seeded the generator: the orders' draws
      r = tr.update(b, {});
    }
    EXPECT_EQ(r.steps, 18);
    EXPECT_EQ(r.priorities.numel(), 4);  // one per sequence, for the replay
    return mpirl::testing::params_of(tr);
  };
  const auto one = params_after(1), again = params_after(1), two = params_after(2);
  EXPECT_EQ(mpirl::testing::max_abs_diff(one, again), 0.0);
  EXPECT_GT(mpirl::testing::max_abs_diff(one, two), 1e-4);
}

TEST(Appo, StepMinibatchesRefusedWhereTheyCannotWork) {
  auto refused = [](std::vector<std::string> sets, const std::string& want) {
    sets.push_back("learner.appo_minibatch=\"steps\"");
    try {
      cfg_with(sets);
      ADD_FAILURE() << "no error for " << want;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  refused({"learner.algo=\"impala\""}, "'learner.appo_minibatch' = \"steps\": expected learner.algo = \"appo\"");
  refused({"learner.algo=\"appo\"", "model.core=\"lru\""}, "expected a policy without memory");
  refused({"learner.algo=\"appo\"", "learner.batch_size=4", "actor.rollout_len=10", "learner.appo_minibatches=16",
           "replay.capacity=64"},
          "learner.appo_minibatches = 16 must divide the batch's steps (learner.batch_size x actor.rollout_len = 40)");
  // More minibatches than sequences is fine over steps (CleanRL's 32 minibatches of 64 steps).
  EXPECT_NO_THROW(cfg_with({"learner.algo=\"appo\"", "learner.appo_minibatch=\"steps\"", "learner.batch_size=4",
                            "actor.rollout_len=16", "learner.appo_minibatches=32", "replay.capacity=64"}));
  EXPECT_THROW(cfg_with({"learner.appo_minibatch=\"time\""}), ConfigError);
}

TEST(Gae, RefusedForImpala) {
  try {
    cfg_with({"learner.algo=\"impala\"", "learner.advantages=\"gae\""});
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("learner.advantages"), std::string::npos) << e.what();
  }
  EXPECT_THROW(cfg_with({"learner.advantages=\"td\""}), ConfigError);
  try {
    cfg_with({"learner.algo=\"impala\"", "learner.appo_proximal=true"});
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'learner.appo_proximal' = true: expected learner.algo = \"appo\""),
              std::string::npos) << e.what();
  }
  EXPECT_THROW(cfg_with({"learner.algo=\"r2d2\"", "learner.value_norm=\"none\"", "learner.appo_proximal=true"}),
               ConfigError);
}

// LossOptions::stats = false (the trainer's steps whose logging terms nobody reads) leaves the loss
// and every gradient exactly as with the terms, and leaves those terms undefined. Without an
// entropy coefficient the entropy is not in the loss: the gradients are those of policy + c value,
// computed here apart, and the logged entropy is still the policy's.
TEST(Appo, LossWithoutStatisticsHasTheSameGradients) {
  for (double coef : {0.0, 0.01}) {
    Config cfg = load_config("", {"learner.algo=\"appo\"", "learner.advantages=\"gae\"", "learner.value_norm=\"none\"",
                                  "learner.normalize_advantages=true", "env.id=\"Pendulum-v1\"",
                                  fmt::format("learner.entropy_coef={}", coef)});
    auto spec = envs::env_spec(cfg);
    ASSERT_FALSE(spec.discrete);
    torch::manual_seed(7);
    models::Policy pol(spec, models::model_options(cfg));
    auto b = mpirl::testing::random_batch(6, 4, spec.obs_size(), 1, 0, 41);
    b.actions = torch::randn({6, 4, spec.action_dim});
    b.behaviour_logp = -1.0 + 0.1 * torch::randn({6, 4});
    b.trunc_value = torch::zeros_like(b.rewards);
    auto grads = [&](bool stats, bool by_hand) {
      pol->zero_grad();
      auto o = loss_options(cfg);
      o.stats = stats;
      auto out = pol->unroll(b.obs, b.is_init, torch::Tensor());
      LossTerms l = appo_loss(spec, b, out, o);
      torch::Tensor total = l.total;
      if (by_hand)  // the loss as written before the entropy could leave it
        total = l.policy + o.value_coef * l.value -
                coef * models::entropy(spec, out.dist.slice(0, 0, 6)).mean();
      total.backward();
      std::vector<torch::Tensor> g;
      for (auto& p : pol->parameters()) g.push_back(p.grad().clone());
      return std::make_pair(l, g);
    };
    auto [with, g1] = grads(true, false);
    auto [without, g2] = grads(false, false);
    auto [hand, g3] = grads(true, true);
    EXPECT_EQ(with.total.item<float>(), without.total.item<float>()) << coef;
    ASSERT_EQ(g1.size(), g2.size());
    for (size_t i = 0; i < g1.size(); ++i) {
      EXPECT_TRUE(torch::equal(g1[i], g2[i])) << "parameter " << i << ", entropy_coef " << coef;
      EXPECT_TRUE(torch::allclose(g1[i], g3[i], 1e-6, 1e-7)) << "parameter " << i << ", entropy_coef " << coef;
    }
    EXPECT_GT(torch::cat({g1[0].flatten(), g1.back().flatten()}).abs().sum().item<double>(), 0.0);
    for (const auto* t : {&with.clip_fraction, &with.mean_rho, &with.priorities, &with.target_mean, &with.entropy})
      EXPECT_TRUE(t->defined());
    for (const auto* t : {&without.clip_fraction, &without.mean_rho, &without.priorities, &without.target_mean})
      EXPECT_FALSE(t->defined());
    EXPECT_EQ(without.entropy.defined(), coef != 0);  // in the loss, so computed either way
    // The logged entropy: the Gaussian's, sum over actions of log_std + 0.5 log(2 pi e).
    auto log_std = pol->named_parameters()["log_std"];
    EXPECT_NEAR(with.entropy.item<double>(), (log_std + 0.5 + 0.5 * std::log(2 * M_PI)).sum().item<double>(), 1e-5);
  }
}
