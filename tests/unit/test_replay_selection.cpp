// Replay sampling internals: the sum tree, the selectors (fifo, uniform, prioritized) and the rate
// limiter.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "buffer/rate_limiter.h"
#include "buffer/selectors.h"
#include "buffer/sum_tree.h"

using namespace mpirl;
using namespace mpirl::buffer;

TEST(SumTree, TotalsFindAndUpdates) {
  SumTree t(5);  // padded to 8 leaves
  double w[] = {1, 0, 3, 2, 4};
  for (int i = 0; i < 5; ++i) t.set(i, w[i]);
  EXPECT_DOUBLE_EQ(t.total(), 10);
  EXPECT_EQ(t.find(0.0), 0);
  EXPECT_EQ(t.find(0.999), 0);
  EXPECT_EQ(t.find(1.0), 2);  // leaf 1 has weight 0: never returned
  EXPECT_EQ(t.find(3.999), 2);
  EXPECT_EQ(t.find(4.0), 3);
  EXPECT_EQ(t.find(6.0), 4);
  EXPECT_EQ(t.find(9.999999), 4);
  t.set(2, 0.5);
  EXPECT_DOUBLE_EQ(t.total(), 7.5);
  EXPECT_EQ(t.find(1.4), 2);
  EXPECT_EQ(t.find(1.5), 3);
  EXPECT_THROW(t.set(5, 1), std::exception);
  EXPECT_THROW(t.set(0, -1), std::exception);
  EXPECT_THROW(t.set(0, std::nan("")), std::exception);
}

TEST(SumTree, SamplingFrequenciesMatchPrioritiesToTheAlpha) {
  const int64_t n = 50;
  const double alpha = 0.7;
  PrioritizedSelector s(n, alpha);
  std::vector<double> p(n);
  double z = 0;
  for (int64_t i = 0; i < n; ++i) {
    p[size_t(i)] = 0.1 + double((i * 37) % 11);
    s.insert(i, i, p[size_t(i)]);
    z += std::pow(p[size_t(i)], alpha);
  }
  std::mt19937_64 rng(42);
  const int64_t draws = 400000;
  std::vector<int64_t> count(n);
  for (int64_t k = 0; k < draws; ++k) {
    double prob = 0;
    int64_t i = s.sample(rng, &prob);
    EXPECT_NEAR(prob, std::pow(p[size_t(i)], alpha) / z, 1e-12);
    ++count[size_t(i)];
  }
  // Each count is binomial: within 5 standard deviations of its expectation; and a chi-square
  // statistic below the 99.9% quantile for 49 degrees of freedom (85.4).
  double chi2 = 0;
  for (int64_t i = 0; i < n; ++i) {
    double q = std::pow(p[size_t(i)], alpha) / z, e = q * double(draws);
    EXPECT_LT(std::abs(double(count[size_t(i)]) - e), 5 * std::sqrt(e * (1 - q))) << i;
    chi2 += (double(count[size_t(i)]) - e) * (double(count[size_t(i)]) - e) / e;
  }
  EXPECT_LT(chi2, 85.4);
  // An update changes the distribution; a removed item is never drawn.
  s.update(0, 1000.0);
  s.remove(1);
  const double w0 = std::pow(1000.0, alpha);
  const double q0 = w0 / (z - std::pow(p[0], alpha) - std::pow(p[1], alpha) + w0);
  int64_t zeros = 0;
  for (int k = 0; k < 10000; ++k) {
    double prob;
    int64_t i = s.sample(rng, &prob);
    EXPECT_NE(i, 1);
    zeros += i == 0;
  }
  EXPECT_NEAR(double(zeros), 10000 * q0, 5 * std::sqrt(10000 * q0 * (1 - q0)));
}

TEST(Selectors, FifoUniform) {
  std::mt19937_64 rng(1);
  FifoSelector f(10);
  f.insert(7, 10, 0);
  f.insert(3, 11, 0);
  f.insert(5, 12, 0);
  double p;
  EXPECT_EQ(f.sample(rng, &p), 7);
  f.remove(7);
  EXPECT_EQ(f.sample(rng, &p), 3);
  f.remove(5);
  EXPECT_EQ(f.size(), 1);
  UniformSelector u(10);
  for (int i = 0; i < 10; ++i) u.insert(i, i, 0);
  u.remove(4);
  std::vector<int> c(10);
  for (int k = 0; k < 90000; ++k) {
    int64_t i = u.sample(rng, &p);
    EXPECT_DOUBLE_EQ(p, 1.0 / 9);
    ++c[size_t(i)];
  }
  EXPECT_EQ(c[4], 0);
  for (int i = 0; i < 10; ++i)
    if (i != 4) {
      EXPECT_NEAR(c[size_t(i)], 10000, 500);
    }
  EXPECT_THROW(u.remove(4), std::exception);
}

TEST(RateLimiter, ReverbRules) {
  RateLimiterOptions o;
  o.min_size_to_sample = 4;
  o.samples_per_insert = 2;
  o.error_buffer = 3;  // diff = 2 * inserts - samples kept within [5, 11]
  RateLimiter r(o);
  EXPECT_FALSE(r.can_sample(1, 3));        // below min size
  EXPECT_TRUE(r.can_insert(4, 0));         // up to min size, inserts are always fine
  r.inserted(4);                           // diff 8
  EXPECT_TRUE(r.can_insert(1, 4));         // 10 <= 11
  EXPECT_FALSE(r.can_insert(2, 4));        // 12 > 11
  EXPECT_TRUE(r.can_sample(3, 4));         // 8 - 3 = 5 >= 5
  EXPECT_FALSE(r.can_sample(4, 4));        // 4 < 5
  r.sampled(3);                            // diff 5
  EXPECT_FALSE(r.can_sample(1, 4));
  EXPECT_TRUE(r.can_insert(3, 4));         // 14 - 3 = 11
  r.inserted(3);                           // diff 11
  EXPECT_FALSE(r.can_insert(1, 7));
  EXPECT_TRUE(r.can_sample(6, 7));
  RateLimiterOptions q;  // queue mode: capacity bounds inserts, batches need enough items
  q.queue = true;
  q.capacity = 8;
  q.min_size_to_sample = 2;
  RateLimiter rq(q);
  EXPECT_TRUE(rq.can_insert(8, 0));
  EXPECT_FALSE(rq.can_insert(1, 8));
  EXPECT_FALSE(rq.can_sample(4, 3));
  EXPECT_TRUE(rq.can_sample(4, 4));
}
