// actor.reward_norm (actor/reward_norm.h): the first step by hand, and a long random run of groups
// of envs with terminations and truncations against a direct float64 computation from the
// definition (every discounted return so far, its mean and variance in two passes, merged with
// RunningMeanStd's prior of count 1e-4, mean 0, variance 1).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "actor/reward_norm.h"

using mpirl::actor::RewardNormalizer;

TEST(RewardNorm, FirstStepByHand) {
  // One env, reward 2: G = 2. Moments merged with the prior (count c = 1e-4, mean 0, variance 1):
  // mean = 2 / (1 + c), variance = (c * 1 + 0 + 2^2 * c * 1 / (1 + c)) / (1 + c).
  RewardNormalizer n(1, 0.5);
  float r = 2;
  const uint8_t no = 0;
  n.step(0, 1, &r, &no, &no, 1);
  const double c = 1e-4, var = (c + 4 * c / (1 + c)) / (1 + c);
  EXPECT_NEAR(n.mean(), 2 / (1 + c), 1e-12);
  EXPECT_NEAR(n.var(), var, 1e-15);
  EXPECT_NEAR(r, 2 / std::sqrt(var + 1e-8), 1e-3);  // about 89.4
  // Second step, reward 4, the episode terminated: G = 0.5 * 2 + 4 = 5, then 0 for the next one.
  r = 4;
  const uint8_t yes = 1;
  n.step(0, 1, &r, &yes, &no, 1);
  r = 1;
  n.step(0, 1, &r, &no, &no, 1);
  // The returns seen: 2, 5, 1 (the new episode's first).
  const double m = (2 + 5 + 1) / 3.0, v = ((2 - m) * (2 - m) + (5 - m) * (5 - m) + (1 - m) * (1 - m)) / 3;
  const double total = c + 3, mean = 3 * m / total, var3 = (c + 3 * v + m * m * c * 3 / total) / total;
  EXPECT_NEAR(n.mean(), mean, 1e-9);
  EXPECT_NEAR(n.var(), var3, 1e-9);
  EXPECT_NEAR(r, 1 / std::sqrt(var3 + 1e-8), 1e-5);
}

TEST(RewardNorm, GroupsOfEnvsAgainstTheDefinition) {
  const int64_t E = 5, T = 7;  // rewards laid out [E, T] as in a rollout (stride T)
  const double gamma = 0.97;
  RewardNormalizer n(E, gamma);
  std::mt19937 rng(3);
  std::normal_distribution<double> reward(0.5, 3.0);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<double> ret(E, 0.0), seen;
  std::vector<float> rew(E * T);
  std::vector<uint8_t> term(E * T), trunc(E * T);
  int ended = 0;
  for (int step = 0; step < 300; ++step) {
    const int64_t t = step % T;
    // Two groups stepped in turn: envs 0-2, then 3-4.
    for (auto [first, count] : {std::pair<int64_t, int64_t>{0, 3}, {3, 2}}) {
      std::vector<double> raw(static_cast<size_t>(count));
      for (int64_t i = 0; i < count; ++i) {
        const int64_t e = first + i;
        raw[size_t(i)] = reward(rng);
        rew[size_t(e * T + t)] = float(raw[size_t(i)]);
        term[size_t(e * T + t)] = u(rng) < 0.03;
        trunc[size_t(e * T + t)] = !term[size_t(e * T + t)] && u(rng) < 0.02;
        ret[size_t(e)] = gamma * ret[size_t(e)] + double(rew[size_t(e * T + t)]);
        seen.push_back(ret[size_t(e)]);
      }
      n.step(first, count, rew.data() + first * T + t, term.data() + first * T + t, trunc.data() + first * T + t, T);
      // The definition: every return so far, two passes, merged with the prior.
      double m = 0, v = 0;
      for (double g : seen) m += g;
      m /= double(seen.size());
      for (double g : seen) v += (g - m) * (g - m);
      v /= double(seen.size());
      const double c = 1e-4, k = double(seen.size()), total = c + k;
      const double var = (c * 1 + k * v + m * m * c * k / total) / total;
      for (int64_t i = 0; i < count; ++i) {
        const int64_t e = first + i;
        ASSERT_NEAR(rew[size_t(e * T + t)], raw[size_t(i)] / std::sqrt(var + 1e-8),
                    1e-5 * (1 + std::abs(raw[size_t(i)] / std::sqrt(var))))
            << "step " << step << " env " << e;
        if (term[size_t(e * T + t)] || trunc[size_t(e * T + t)]) {
          ret[size_t(e)] = 0;
          ++ended;
        }
      }
      ASSERT_NEAR(n.var(), var, 1e-9 * (1 + var)) << "step " << step;
    }
  }
  EXPECT_GT(ended, 20);  // episodes ended (both ways) along the run
}
