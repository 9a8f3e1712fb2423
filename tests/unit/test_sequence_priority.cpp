// R2D2's actor-computed initial priorities (actor/sequence_priority.h): hand-computed sequences
// (a bootstrap, a termination, nothing to close), random sequences against the learner's own tensor
// functions (learner/algorithms/r2d2/targets.h) on the windows an actor can close, and the Q-value
// rows the policy's act() writes with ModelOptions::act_q against its step()'s heads.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include "actor/sequence_priority.h"
#include "envs/env.h"
#include "learner/algorithms/r2d2/targets.h"
#include "models/policy.h"
#include "tests/common/inference_fixtures.h"

using namespace mpirl;

namespace {

actor::PriorityOptions hand_options() {
  actor::PriorityOptions o;
  o.burn_in = 0;
  o.n_step = 1;
  o.gamma = 0.5;
  o.eta = 0.5;
  o.rescale_eps = 0;
  return o;
}

}  // namespace

// T = 3, A = 2, n = 1, gamma 0.5, eps 0 (h^-1(y) = (|y| + 1)^2 - 1), eta 0.5. Rows: [1, 2], [0, 3],
// [-1, 0.5]; actions 0, 1, 1; rewards 1, 0, 2.
//   t=0: G = 1 + 0.5 h^-1(3) = 1 + 0.5 * 15 = 8.5;   delta = 1 - h(8.5) = 1 - (sqrt(9.5) - 1) = -1.082207
//   t=1: G = 0 + 0.5 h^-1(0.5) = 0.625;             delta = 3 - (sqrt(1.625) - 1) = 2.725245
//   t=2: needs Q(s_3), the next rollout's: left out.
// priority = 0.5 * 2.725245 + 0.5 * (1.082207 + 2.725245) / 2 = 2.314486
TEST(SequencePriority, HandComputed) {
  const std::vector<float> q = {1, 2, 0, 3, -1, 0.5};
  const std::vector<int64_t> a = {0, 1, 1};
  const std::vector<float> r = {1, 0, 2};
  std::vector<uint8_t> term = {0, 0, 0}, trunc = {0, 0, 0};
  EXPECT_NEAR(actor::sequence_priority(q.data(), 2, 2, a.data(), r.data(), term.data(), trunc.data(), 3, hand_options()),
              2.314486, 1e-5);
  // A termination at t=1: G_1 = 0 with no bootstrap, delta_1 = 3; t=0 still bootstraps from Q(s_1).
  // priority = 0.5 * 3 + 0.5 * (1.082207 + 3) / 2 = 2.520552
  term[1] = 1;
  EXPECT_NEAR(actor::sequence_priority(q.data(), 2, 2, a.data(), r.data(), term.data(), trunc.data(), 3, hand_options()),
              2.520552, 1e-5);
  // A truncation at t=0 instead: its window bootstraps from the learner's value of the final
  // observation, so only t=1 counts: priority = 0.5 * 2.725245 + 0.5 * 2.725245.
  term[1] = 0;
  trunc[0] = 1;
  EXPECT_NEAR(actor::sequence_priority(q.data(), 2, 2, a.data(), r.data(), term.data(), trunc.data(), 3, hand_options()),
              2.725245, 1e-5);
  // The burn-in is left out: from t=1 on, only delta_1.
  trunc[0] = 0;
  auto o = hand_options();
  o.burn_in = 1;
  EXPECT_NEAR(actor::sequence_priority(q.data(), 2, 2, a.data(), r.data(), term.data(), trunc.data(), 3, o), 2.725245, 1e-5);
  // n = 5 over 3 steps and no episode end: nothing closes, the replay's max priority applies.
  o = hand_options();
  o.n_step = 5;
  EXPECT_EQ(actor::sequence_priority(q.data(), 2, 2, a.data(), r.data(), term.data(), trunc.data(), 3, o), -1.0f);
}

// Random sequences: the learner's n-step returns with the actor's own greedy value as every
// bootstrap. The windows an actor can close are those whose return does not change when the
// unknowable values (a truncation's, the one after the sequence) do; on those, the priorities agree.
TEST(SequencePriority, MatchesLearnerTargets) {
  torch::manual_seed(5);
  const int64_t T = 14, A = 3, B = 40;
  actor::PriorityOptions o;
  o.burn_in = 3;
  o.n_step = 4;
  o.gamma = 0.9;
  o.eta = 0.9;
  o.rescale_eps = 1e-3;
  o.reward_scale = 2;
  o.reward_clip = 1.5;
  int compared = 0, none = 0;
  for (int64_t b = 0; b < B; ++b) {
    auto q_rows = torch::randn({T, A + 2}) * 3;  // rows A + 2 floats apart, as in a wider record
    auto q = q_rows.narrow(1, 0, A);
    auto actions = torch::randint(0, A, {T}, torch::kInt64);
    auto rewards = torch::randn({T});
    auto term = (torch::rand({T}) < 0.1).to(torch::kUInt8);
    auto trunc = (torch::rand({T}) < 0.08).to(torch::kUInt8);
    const float got = actor::sequence_priority(q_rows.data_ptr<float>(), A + 2, A, actions.data_ptr<int64_t>(),
                                               rewards.data_ptr<float>(), term.data_ptr<uint8_t>(),
                                               trunc.data_ptr<uint8_t>(), T, o);
    auto d = [](torch::Tensor x) { return x.to(torch::kFloat64).unsqueeze(1); };  // [T, 1] float64
    auto r = (d(rewards) * o.reward_scale).clamp(-o.reward_clip, o.reward_clip);
    auto greedy = learner::r2d2::unrescale(d(std::get<0>(q.max(-1))), o.rescale_eps);
    auto returns = [&](double unknown) {
      auto boot = torch::cat({greedy, torch::full({1, 1}, unknown, torch::kFloat64)});
      return learner::r2d2::n_step_returns(r, d(term), d(trunc), torch::full({T, 1}, unknown, torch::kFloat64), boot,
                                           o.gamma, o.n_step);
    };
    auto g1 = returns(0), g2 = returns(1000);
    auto closed = (g1 - g2).abs().squeeze(1) < 1e-9;
    closed.slice(0, 0, o.burn_in).fill_(false);
    if (closed.sum().item<int64_t>() == 0) {
      EXPECT_EQ(got, -1.0f) << "sequence " << b;
      ++none;
      continue;
    }
    auto taken = d(q.gather(1, actions.unsqueeze(1)).squeeze(1)).squeeze(1);
    auto delta = (taken - learner::r2d2::rescale(g1.squeeze(1), o.rescale_eps)).index({closed}).unsqueeze(1);
    const double want = learner::r2d2::sequence_priorities(delta, o.eta).item<double>();
    EXPECT_NEAR(got, want, 1e-4 * std::max(1.0, want)) << "sequence " << b;
    ++compared;
  }
  EXPECT_GT(compared, 30);  // most sequences have windows to compare
}

// act() with act_q writes V + A - mean_a A (the learner's q_values of step()'s heads); without it, A.
TEST(SequencePriority, ActWritesQRows) {
  for (const char* core : {"none", "gru"}) {
    for (const char* critic : {"shared", "separate"}) {
      if (std::string(core) != "none" && std::string(critic) == "separate") continue;  // separate: no core
      SCOPED_TRACE(std::string(core) + " " + critic);
      torch::manual_seed(2);
      const auto spec = mpirl::testing::spec_of({6}, true, 4);
      models::ModelOptions opts;
      opts.hidden = {16};
      opts.core = core;
      opts.core_size = 8;
      opts.critic = critic;
      opts.obs_norm = true;
      opts.act_q = true;
      models::Policy q_policy(spec, opts);
      opts.act_q = false;
      torch::manual_seed(2);  // the same parameters
      models::Policy plain(spec, opts);
      torch::NoGradGuard g;
      const int64_t E = 5;
      auto obs = torch::randn({E, 6});
      auto init = torch::zeros({E});
      auto s_ref = q_policy->initial_state(E), s_q = q_policy->initial_state(E), s_plain = plain->initial_state(E);
      auto bq = q_policy->act_buffers(E), bp = plain->act_buffers(E);
      for (int t = 0; t < 3; ++t) {
        obs = torch::randn({E, 6});
        auto ref = q_policy->step(obs, init, s_ref);
        auto want = learner::r2d2::q_values(ref.dist, ref.value);
        bq.init.zero_();
        bp.init.zero_();
        auto got = q_policy->act(obs, s_q, bq).clone();
        auto adv = plain->act(obs, s_plain, bp).clone();
        EXPECT_LT((got - want).abs().max().item<float>(), 1e-5) << "step " << t;
        EXPECT_LT((adv - ref.dist).abs().max().item<float>(), 1e-5) << "step " << t;
        EXPECT_GT((got - adv).abs().max().item<float>(), 1e-3) << "step " << t;  // the value moved the rows
      }
    }
  }
}
