// POPGym memory tasks: reward rules, episode lengths and boundaries, checked by playing oracle,
// always-wrong and chance policies.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <deque>

#include "envs/popgym.h"
#include "envs/registry.h"

using namespace mpirl::envs;

namespace {

int argmax(const float* x, int n) { return int(std::max_element(x, x + n) - x); }

struct Episode {
  double ret = 0;
  int steps = 0, rewarded = 0;
  bool terminated = false, truncated = false;
};

// Plays one episode; `choose(obs, t)` picks the action.
template <typename F>
Episode play(Env& env, F choose) {
  std::vector<float> obs(size_t(env.spec().obs_size()));
  env.reset(obs.data());
  Episode e;
  for (;;) {
    Action a;
    a.index = choose(obs.data(), e.steps);
    auto r = env.step(a, obs.data());
    e.ret += r.reward;
    e.rewarded += r.reward != 0;
    ++e.steps;
    if (r.terminated || r.truncated) {
      e.terminated = r.terminated;
      e.truncated = r.truncated;
      return e;
    }
    EXPECT_LT(e.steps, 100000);
  }
}

}  // namespace

TEST(PopGym, RepeatPreviousRewardsTheSuitKMinusOneStepsBack) {
  const int decks[] = {1, 2, 3}, ks[] = {4, 32, 64};
  const char* ids[] = {"RepeatPreviousEasy", "RepeatPreviousMedium", "RepeatPreviousHard"};
  for (int i = 0; i < 3; ++i) {
    auto env = make_env(ids[i], 5, {});
    const int cards = 52 * decks[i], k = ks[i];
    EXPECT_EQ(env->spec().max_episode_steps, cards - 1);
    std::deque<int> seen;  // suits shown so far, newest last
    auto oracle = [&](const float* o, int t) {
      if (t == 0) seen.clear();
      seen.push_back(argmax(o, 4));
      return int(seen.size()) >= k ? seen[seen.size() - size_t(k)] : 0;
    };
    for (int ep = 0; ep < 3; ++ep) {
      auto e = play(*env, oracle);
      EXPECT_EQ(e.steps, cards - 1) << ids[i];
      EXPECT_EQ(e.rewarded, cards - k) << ids[i];  // no reward before the k-th card
      EXPECT_NEAR(e.ret, 1.0, 1e-4) << ids[i];
      EXPECT_TRUE(e.truncated && !e.terminated);
    }
    auto wrong = [&](const float* o, int t) { return (oracle(o, t) + 1) % 4; };
    EXPECT_NEAR(play(*env, wrong).ret, -1.0, 1e-4);
  }
  // Hand-checked rewards of Easy: steps 1-3 pay nothing; step 4 (4 cards shown) asks for card 0's
  // suit, step 5 for card 1's; each pays 1/(52 - 4).
  RepeatPrevious env(9, 1, 4, "RepeatPreviousEasy");
  std::vector<float> obs(4);
  env.reset(obs.data());
  for (int t = 0; t < 3; ++t) EXPECT_EQ(env.step({0, nullptr}, obs.data()).reward, 0.f);
  int target = Deck::suit(env.card(0));
  EXPECT_NEAR(env.step({target, nullptr}, obs.data()).reward, 1.0 / 48, 1e-7);
  target = Deck::suit(env.card(1));
  EXPECT_NEAR(env.step({(target + 2) % 4, nullptr}, obs.data()).reward, -1.0 / 48, 1e-7);
}

TEST(PopGym, RepeatFirstRewardsTheFirstSuitEveryStep) {
  const int decks[] = {1, 8, 16};
  const char* ids[] = {"RepeatFirstEasy", "RepeatFirstMedium", "RepeatFirstHard"};
  for (int i = 0; i < 3; ++i) {
    auto env = make_env(ids[i], 3, {});
    int first = -1;
    auto oracle = [&](const float* o, int t) {
      if (t == 0) first = argmax(o, 4);
      return first;
    };
    auto e = play(*env, oracle);
    EXPECT_EQ(e.steps, 52 * decks[i] - 1);
    EXPECT_EQ(e.rewarded, e.steps);
    EXPECT_NEAR(e.ret, 1.0, 1e-3);
    EXPECT_TRUE(e.truncated);
    EXPECT_NEAR(play(*env, [&](const float* o, int t) { return (oracle(o, t) + 3) % 4; }).ret, -1.0, 1e-3);
  }
}

TEST(PopGym, CountRecallRewardsTheCountOfThePreviousQuery) {
  const int decks[] = {1, 2, 4}, distinct[] = {2, 4, 13};
  const char* ids[] = {"CountRecallEasy", "CountRecallMedium", "CountRecallHard"};
  for (int i = 0; i < 3; ++i) {
    auto env = make_env(ids[i], 4, {});
    const int D = distinct[i];
    EXPECT_EQ(env->spec().obs_size(), 2 * D);
    EXPECT_EQ(env->spec().num_actions, 52 * decks[i] / D + 1);  // counts 0 .. cards / D
    std::vector<int> counts(static_cast<size_t>(D));
    auto oracle = [&](const float* o, int t) {
      if (t == 0) std::fill(counts.begin(), counts.end(), 0);
      ++counts[size_t(argmax(o, D))];
      return counts[size_t(argmax(o + D, D))];
    };
    auto e = play(*env, oracle);
    EXPECT_EQ(e.steps, 52 * decks[i] - 1);
    EXPECT_TRUE(e.terminated && !e.truncated);
    EXPECT_NEAR(e.ret, 1.0, 1e-3);
    // Always answering one more than the truth is always wrong.
    EXPECT_NEAR(play(*env, [&](const float* o, int t) { return oracle(o, t) + 1; }).ret, -1.0, 1e-3);
  }
}

// Regression: the answer is a count in 0 .. max_count (max_count = cards / values), so the action
// space needs max_count + 1 entries. A player that counts from the observations alone (not the
// env's counters) answers the truth every step; every answer must be a valid action and be paid.
// The test also checks that max_count itself was asked for: at the last step all cards but one are
// dealt, so every value but the last card's is complete, and a query for one of those asks for
// max_count (and it can be asked earlier, once a value is complete).
TEST(PopGym, CountRecallActionsCoverTheMaximalCount) {
  const int decks[] = {1, 2, 4}, distinct[] = {2, 4, 13};
  const char* ids[] = {"CountRecallEasy", "CountRecallMedium", "CountRecallHard"};
  for (int i = 0; i < 3; ++i) {
    const int D = distinct[i], cards = 52 * decks[i], max_count = cards / D;
    auto env = make_env(ids[i], 21, {});
    const auto& spec = env->spec();
    ASSERT_EQ(spec.obs_size(), 2 * D);
    std::vector<float> obs(size_t(2 * D));
    int highest = -1;
    for (int ep = 0; ep < 6; ++ep) {
      env->reset(obs.data());
      std::vector<int> counts(size_t(D), 0);
      int steps = 0, invalid = 0, unpaid = 0, first_bad = -1;
      for (;;) {
        // Each half of the observation is one-hot: the card just dealt, then the query.
        for (int h = 0; h < 2; ++h) {
          const float* o = obs.data() + h * D;
          ASSERT_EQ(std::count(o, o + D, 1.f), 1) << ids[i];
          ASSERT_EQ(std::count(o, o + D, 0.f), D - 1) << ids[i];
        }
        ++counts[size_t(argmax(obs.data(), D))];
        const int answer = counts[size_t(argmax(obs.data() + D, D))];
        ASSERT_LE(answer, max_count) << ids[i];
        highest = std::max(highest, answer);
        auto r = env->step({answer, nullptr}, obs.data());
        const bool bad_action = answer < 0 || answer >= spec.num_actions, bad_reward = !(r.reward > 0.f);
        invalid += bad_action;
        unpaid += bad_reward;
        if ((bad_action || bad_reward) && first_bad < 0) first_bad = steps;
        ++steps;
        if (r.terminated || r.truncated) break;
        ASSERT_LT(steps, cards) << ids[i];
      }
      EXPECT_EQ(invalid, 0) << ids[i] << ": answers outside the " << spec.num_actions
                            << " actions, first at step " << first_bad;
      EXPECT_EQ(unpaid, 0) << ids[i] << ": true answers not rewarded, first at step " << first_bad;
      EXPECT_EQ(steps, cards - 1) << ids[i];
      // The last observation shows the last card: then the whole deck has been dealt.
      ++counts[size_t(argmax(obs.data(), D))];
      for (int c : counts) EXPECT_EQ(c, max_count) << ids[i];
    }
    // The maximal count was actually asked for, so the bound above was exercised.
    EXPECT_EQ(highest, max_count) << ids[i];
  }
}

TEST(PopGym, StatelessCartPoleHidesVelocities) {
  const int lens[] = {200, 400, 600};
  const char* ids[] = {"StatelessCartPoleEasy", "StatelessCartPoleMedium", "StatelessCartPoleHard"};
  for (int i = 0; i < 3; ++i) {
    StatelessCartPole env(1, lens[i], ids[i]);
    EXPECT_EQ(env.spec().obs_size(), 2);
    std::vector<float> obs(2);
    env.reset(obs.data());
    Episode e;
    for (;;) {
      // A controller on the hidden state keeps the pole up until the time limit.
      const auto& s = env.inner().state;
      Action a{(s[2] + 0.3 * s[3] + 0.01 * s[0] + 0.1 * s[1]) > 0 ? 1 : 0, nullptr};
      auto r = env.step(a, obs.data());
      EXPECT_FLOAT_EQ(obs[0], float(env.inner().state[0]));
      EXPECT_FLOAT_EQ(obs[1], float(env.inner().state[2]));
      EXPECT_FLOAT_EQ(r.reward, 1.f / float(lens[i]));
      e.ret += r.reward;
      ++e.steps;
      if (r.terminated || r.truncated) {
        e.truncated = r.truncated;
        break;
      }
    }
    EXPECT_EQ(e.steps, lens[i]);
    EXPECT_TRUE(e.truncated);
    EXPECT_NEAR(e.ret, 1.0, 1e-4);
    // Always pushing left topples the pole well before the limit: terminated, not truncated.
    auto left = play(env, [](const float*, int) { return 0; });
    EXPECT_TRUE(left.terminated);
    EXPECT_LT(left.steps, 100);
  }
}

TEST(PopGym, ChanceLevelOfRepeatPreviousIsMinusHalf) {
  auto env = make_env("RepeatPreviousEasy", 8, {});
  std::mt19937 rng(1);
  double sum = 0;
  const int n = 2000;
  for (int i = 0; i < n; ++i) sum += play(*env, [&](const float*, int) { return int(rng() % 4); }).ret;
  EXPECT_NEAR(sum / n, -0.5, 0.02);
}
