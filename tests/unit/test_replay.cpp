// Replay internals: sum tree, selectors, rate limiter, generations, capacity and removal, and an
// HDF5 dump/restore round trip with the bad-file errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "buffer/hdf5_dump.h"
#include "buffer/replay.h"
#include "buffer/rate_limiter.h"
#include "buffer/replay_buffer.h"
#include "buffer/selectors.h"
#include "buffer/sum_tree.h"
#include "envs/registry.h"
#include "runtime/config.h"
#include "runtime/error.h"

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
    if (i != 4) EXPECT_NEAR(c[size_t(i)], 10000, 500);
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

namespace {
envs::EnvSpec spec() { return envs::make_env("CartPole-v1", 0, {})->spec(); }

// A payload of n sequences whose every byte encodes the sequence's tag.
std::vector<char> payload(const SeqLayout& l, int64_t n, int first_tag) {
  std::vector<char> p(l.field_offset(l.fields().size(), n));
  for (size_t f = 0; f < l.fields().size(); ++f)
    for (int64_t i = 0; i < n; ++i)
      std::memset(p.data() + l.field_offset(f, n) + size_t(i) * l.fields()[f].bytes, first_tag + int(i), l.fields()[f].bytes);
  return p;
}
int tag_of(const SeqLayout& l, const char* p, int64_t n, int64_t i) {
  return static_cast<unsigned char>(p[l.field_offset(2, n) + size_t(i) * l.fields()[2].bytes]);
}
}  // namespace

TEST(ReplayBuffer, QueueModeSamplesEachItemOnceInOrder) {
  SeqLayout l(spec(), 4);
  ReplayOptions o;
  o.capacity = 6;
  ReplayBuffer rb(l, o);
  auto p = payload(l, 6, 10);
  for (int i = 0; i < 6; ++i) rb.insert(p.data(), 6, i);
  EXPECT_FALSE(rb.can_insert(1));  // full queue: inserts wait
  std::vector<char> out(l.field_offset(l.fields().size(), 4));
  rb.sample(4, out.data());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(tag_of(l, out.data(), 4, i), 10 + i);
  EXPECT_EQ(rb.size(), 2);
  EXPECT_FALSE(rb.can_sample(4));
  EXPECT_EQ(rb.counters().consumed, 4);
  EXPECT_EQ(rb.counters().inserted, rb.size() + rb.counters().removed());
}

TEST(ReplayBuffer, EvictsOldestAndChecksGenerations) {
  SeqLayout l(spec(), 4);
  ReplayOptions o;
  o.capacity = 3;
  o.selector = "prioritized";
  o.max_times_sampled = 0;
  ReplayBuffer rb(l, o);
  auto p = payload(l, 5, 20);
  for (int i = 0; i < 3; ++i) rb.insert(p.data(), 5, i);
  std::vector<char> out(l.field_offset(l.fields().size(), 2));
  auto s = rb.sample(2, out.data());
  // New items enter at the max priority; updates apply while the item lives.
  float hi = 7.f;
  rb.update_priorities(&s.slots[0], &s.generations[0], &hi, 1);
  EXPECT_EQ(rb.max_priority(), 7.0);
  EXPECT_EQ(rb.counters().priority_updates, 1);
  // Inserting 3 more evicts the 3 oldest (full, not a queue); the old (slot, generation) is stale.
  for (int i = 3; i < 5; ++i) rb.insert(p.data(), 5, i);
  rb.insert(p.data(), 5, 0);
  EXPECT_EQ(rb.size(), 3);
  EXPECT_EQ(rb.counters().evicted, 3);
  float v = 1.f;
  rb.update_priorities(&s.slots[1], &s.generations[1], &v, 1);
  EXPECT_EQ(rb.counters().stale_priority_updates, 1);
  auto order = rb.slots_in_order();
  EXPECT_EQ(rb.meta(order[0]).priority, 7.0);  // the max priority then
  int64_t bad_slot = 99, g = 0;
  EXPECT_THROW(rb.update_priorities(&bad_slot, &g, &v, 1), std::exception);
  float nan = std::nanf("");
  EXPECT_THROW(rb.update_priorities(&order[0], &g, &nan, 1), std::exception);
}

TEST(ReplayBuffer, MaxTimesSampledRemovesAndWeightsAreNormalised) {
  SeqLayout l(spec(), 2);
  ReplayOptions o;
  o.capacity = 8;
  o.selector = "prioritized";
  o.max_times_sampled = 2;
  o.importance_exponent = 1.0;
  ReplayBuffer rb(l, o);
  auto p = payload(l, 4, 1);
  for (int i = 0; i < 4; ++i) rb.insert(p.data(), 4, i, 1.0 + i);
  std::vector<char> out(l.field_offset(l.fields().size(), 1));
  int64_t draws = 0;
  while (rb.size() > 0) {
    auto s = rb.sample(1, out.data());
    EXPECT_FLOAT_EQ(s.weights[0], 1.f);  // max-normalised within a batch of one
    ++draws;
  }
  EXPECT_EQ(draws, 8);  // 4 items x 2 samples
  EXPECT_EQ(rb.counters().consumed, 4);
}

class DumpTest : public ::testing::Test {
 protected:
  std::filesystem::path dir = std::filesystem::temp_directory_path() / ("mpirl-dump-" + std::to_string(::getpid()));
  void SetUp() override { std::filesystem::create_directories(dir); }
  // (std::system, not std::filesystem::remove_all: the latter resolves into libtorch's copy and crashes)
  void TearDown() override { (void)std::system(("rm -rf '" + dir.string() + "'").c_str()); }
};

TEST_F(DumpTest, RoundTripKeepsEveryItemAndTheChecksum) {
  SeqLayout l(spec(), 3, 6);  // with a recurrent state field
  ReplayOptions o;
  o.capacity = 10;
  o.selector = "prioritized";
  o.max_times_sampled = 0;
  ReplayBuffer a(l, o);
  auto p = payload(l, 12, 40);
  for (int i = 0; i < 12; ++i) a.insert(p.data(), 12, i, 0.5 + i);  // 2 evicted
  std::vector<char> out(l.field_offset(l.fields().size(), 3));
  a.sample(3, out.data());
  auto f1 = (dir / "a.h5").string(), f2 = (dir / "b.h5").string();
  auto i1 = dump_replay(a, f1, "CartPole-v1", "x = 1");
  EXPECT_EQ(i1.items, 10);
  EXPECT_TRUE(std::filesystem::exists(f1 + ".complete"));
  ReplayBuffer b(l, o);
  auto h = restore_replay(b, f1, "CartPole-v1");
  EXPECT_EQ(h.items, 10);
  EXPECT_EQ(b.size(), 10);
  auto i2 = dump_replay(b, f2, "CartPole-v1", "x = 1");
  EXPECT_EQ(i2.checksum, i1.checksum);
  uint32_t c1, c2;
  auto d1 = read_dump_items(f1, &c1), d2 = read_dump_items(f2, &c2);
  ASSERT_EQ(d1.size(), d2.size());
  for (size_t k = 0; k < d1.size(); ++k) {
    EXPECT_EQ(d1[k].name, d2[k].name);
    EXPECT_EQ(d1[k].shape, d2[k].shape);
    EXPECT_EQ(d1[k].data, d2[k].data) << d1[k].name;
  }
  // Wrong env, wrong layout, too small a buffer.
  ReplayBuffer c(l, o);
  EXPECT_THROW(restore_replay(c, f1, "Pendulum-v1"), Error);
  SeqLayout other(spec(), 5, 6);
  ReplayBuffer d(other, o);
  EXPECT_THROW(restore_replay(d, f1, "CartPole-v1"), Error);
  ReplayOptions small = o;
  small.capacity = 4;
  ReplayBuffer e(l, small);
  EXPECT_THROW(restore_replay(e, f1, "CartPole-v1"), Error);
}

TEST_F(DumpTest, BadFilesGiveErrorsNamingTheFile) {
  auto expect_error = [](const std::string& path, const std::string& what) {
    try {
      read_dump_header(path);
      ADD_FAILURE() << "no error for " << path;
    } catch (const Error& e) {
      std::string m = e.what();
      EXPECT_NE(m.find(path), std::string::npos) << m;
      EXPECT_NE(m.find(what), std::string::npos) << m;
    }
  };
  expect_error((dir / "missing.h5").string(), "does not exist");
  auto text = (dir / "text.h5").string();
  std::ofstream(text) << "not hdf5 at all";
  expect_error(text, "not an HDF5 file");
  // A real dump cut in half.
  SeqLayout l(spec(), 3);
  ReplayOptions o;
  o.capacity = 50;
  ReplayBuffer a(l, o);
  auto p = payload(l, 50, 0);
  for (int i = 0; i < 50; ++i) a.insert(p.data(), 50, i);
  auto full = (dir / "full.h5").string(), cut = (dir / "cut.h5").string();
  dump_replay(a, full, "CartPole-v1", "");
  std::filesystem::copy_file(full, cut);
  std::filesystem::resize_file(cut, std::filesystem::file_size(full) / 2);
  expect_error(cut, "truncated or corrupt");
}

TEST(ReplayConfig, RefusesSettingsThatCanDeadlock) {
  auto refused = [](std::vector<std::string> sets, const std::string& key) {
    try {
      buffer::validate_replay_config(load_config("", sets));
      ADD_FAILURE() << "accepted " << sets[0];
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  };
  // Queue mode: 48 slots of 16-item rollouts, batch 40: with no free chunk only 33 items may be left.
  refused({"replay.capacity=48", "env.num_envs=16", "learner.batch_size=40"}, "replay.capacity");
  refused({"replay.samples_per_insert=4.0", "replay.error_buffer=10.0"}, "replay.error_buffer");
  refused({"replay.min_size_to_sample=300"}, "replay.min_size_to_sample");
  EXPECT_NO_THROW(buffer::validate_replay_config(load_config("", {})));
  EXPECT_NO_THROW(buffer::validate_replay_config(load_config("", {"replay.capacity=56", "learner.batch_size=40"})));
}
