// comm/shard_sampling.h: K = 2 prioritized shards sample the same distribution as one buffer
// with the same items (chi-square at p = 0.001 against the exact probabilities, and against the
// one buffer's own counts), with the same importance weights; Reverb's round-robin split fails
// the same test.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "buffer/selectors.h"
#include "comm/shard_sampling.h"
#include "core/error.h"

using namespace mpirl;
using namespace mpirl::buffer;

namespace {

constexpr int64_t kItems = 50, kBatch = 32, kBatches = 12000;  // 384,000 draws
constexpr double kAlpha = 0.6, kBeta = 0.4;
// The chi-square 99.9% quantile for 49 degrees of freedom (scipy.stats.chi2.ppf(0.999, 49)): the
// goodness-of-fit tests (50 items) and the 2 x 50 homogeneity test both have 49.
constexpr double kChi2_999_49 = 85.35;

double priority(int64_t i) { return 0.05 + double((i * 37) % 13) + (i < 5 ? 40.0 : 0.0); }

struct Shards {
  std::vector<PrioritizedSelector> sel;
  std::vector<std::vector<int64_t>> item_of;  // shard slot -> item id
  std::vector<double> masses() const {
    std::vector<double> m;
    for (auto& s : sel) m.push_back(s.tree().total());
    return m;
  }
};

// Items 0..kItems-1: shard 0 the first 15 (the heavy ones among them), shard 1 the rest.
Shards make_shards() {
  Shards s;
  s.sel.emplace_back(kItems, kAlpha);
  s.sel.emplace_back(kItems, kAlpha);
  s.item_of.resize(2);
  for (int64_t i = 0; i < kItems; ++i) {
    const size_t k = i < 15 ? 0 : 1;
    const int64_t slot = int64_t(s.item_of[k].size());
    s.sel[k].insert(slot, slot, priority(i));
    s.item_of[k].push_back(i);
  }
  return s;
}

double chi2_vs_exact(const std::vector<int64_t>& count, int64_t draws) {
  double z = 0;
  for (int64_t i = 0; i < kItems; ++i) z += std::pow(priority(i), kAlpha);
  double chi2 = 0;
  for (int64_t i = 0; i < kItems; ++i) {
    const double e = double(draws) * std::pow(priority(i), kAlpha) / z;
    chi2 += (double(count[size_t(i)]) - e) * (double(count[size_t(i)]) - e) / e;
  }
  return chi2;
}

}  // namespace

TEST(ShardSampling, TwoShardsSampleTheOneBuffersDistributionWithItsWeights) {
  // One buffer with every item.
  PrioritizedSelector one(kItems, kAlpha);
  for (int64_t i = 0; i < kItems; ++i) one.insert(i, i, priority(i));
  std::mt19937_64 rng(2026);
  std::vector<int64_t> count_one(kItems, 0), count_sharded(kItems, 0), count_rr(kItems, 0);
  for (int64_t b = 0; b < kBatches; ++b)
    for (int64_t j = 0; j < kBatch; ++j) {
      double p;
      ++count_one[size_t(one.sample(rng, &p))];
    }
  // Two shards, split by mass.
  Shards sh = make_shards();
  const auto masses = sh.masses();
  double weight_err = 0;
  for (int64_t b = 0; b < kBatches; ++b) {
    const auto n = split_batch(kBatch, masses, rng);
    ASSERT_EQ(n[0] + n[1], kBatch);
    std::vector<double> local;
    std::vector<int> shard_of;
    std::vector<int64_t> items;
    for (int k = 0; k < 2; ++k)
      for (int64_t j = 0; j < n[size_t(k)]; ++j) {
        double p;
        const int64_t slot = sh.sel[size_t(k)].sample(rng, &p);
        items.push_back(sh.item_of[size_t(k)][size_t(slot)]);
        local.push_back(p);
        shard_of.push_back(k);
        ++count_sharded[size_t(items.back())];
      }
    // The weights one buffer gives the same items (its probabilities, max-normalised in the batch).
    const auto w = global_weights(local, shard_of, masses, kItems, kBeta);
    std::vector<double> want(items.size());
    double wmax = 0;
    for (size_t j = 0; j < items.size(); ++j) {
      want[j] = std::pow(double(kItems) * one.tree().get(items[j]) / one.tree().total(), -kBeta);
      wmax = std::max(wmax, want[j]);
    }
    for (size_t j = 0; j < items.size(); ++j) weight_err = std::max(weight_err, std::abs(w[j] - want[j] / wmax));
  }
  // Reverb's round-robin: B / 2 from each shard whatever its mass.
  for (int64_t b = 0; b < kBatches; ++b)
    for (int k = 0; k < 2; ++k)
      for (int64_t j = 0; j < kBatch / 2; ++j) {
        double p;
        ++count_rr[size_t(sh.item_of[size_t(k)][size_t(sh.sel[size_t(k)].sample(rng, &p))])];
      }
  const int64_t draws = kBatches * kBatch;
  const double c_one = chi2_vs_exact(count_one, draws), c_sh = chi2_vs_exact(count_sharded, draws),
               c_rr = chi2_vs_exact(count_rr, draws);
  // Homogeneity of the sharded counts with the one buffer's (2 x 50 table, 49 degrees of freedom).
  double c_hom = 0;
  for (int64_t i = 0; i < kItems; ++i) {
    const double tot = double(count_one[size_t(i)] + count_sharded[size_t(i)]);
    if (tot == 0) continue;
    for (double c : {double(count_one[size_t(i)]), double(count_sharded[size_t(i)])}) {
      const double e = tot / 2;  // equal numbers of draws on both sides
      c_hom += (c - e) * (c - e) / e;
    }
  }
  std::printf("chi-square (49 dof, 99.9%% quantile %.2f): one buffer %.1f, 2 shards %.1f, 2 shards vs one %.1f, "
              "round-robin %.1f; largest weight difference %.2e\n",
              kChi2_999_49, c_one, c_sh, c_hom, c_rr, weight_err);
  EXPECT_LT(c_one, kChi2_999_49);
  EXPECT_LT(c_sh, kChi2_999_49);
  EXPECT_LT(c_hom, kChi2_999_49);
  EXPECT_GT(c_rr, 10 * kChi2_999_49);  // not one distribution: the test can tell
  EXPECT_LT(weight_err, 1e-5);
}

TEST(ShardSampling, SplitCountsFollowTheMassesAndBadMassesAreNamed) {
  std::mt19937_64 rng(7);
  const std::vector<double> masses{1.0, 0.0, 3.0};
  int64_t sum0 = 0, sum2 = 0;
  const int64_t trials = 20000;
  for (int64_t t = 0; t < trials; ++t) {
    const auto n = split_batch(8, masses, rng);
    EXPECT_EQ(n[1], 0);  // mass 0: never asked
    EXPECT_EQ(n[0] + n[2], 8);
    sum0 += n[0];
    sum2 += n[2];
  }
  // Binomial(8, 1/4) per batch: mean 2, standard deviation of the mean over trials sqrt(1.5 / trials).
  EXPECT_NEAR(double(sum0) / trials, 2.0, 5 * std::sqrt(1.5 / trials));
  EXPECT_NEAR(double(sum2) / trials, 6.0, 5 * std::sqrt(1.5 / trials));
  EXPECT_EQ(split_batch(5, {0.0, 2.0}, rng), (std::vector<int64_t>{0, 5}));
  EXPECT_THROW(split_batch(4, {0.0, 0.0}, rng), Error);
  EXPECT_THROW(split_batch(4, {1.0, -1.0}, rng), Error);
  EXPECT_THROW(split_batch(4, {1.0, std::nan("")}, rng), Error);
}
