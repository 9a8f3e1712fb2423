// Replay internals: sum tree, selectors, rate limiter, generations, capacity and removal, the
// production chunk layout (rollouts received in place, restore, removal, eviction), HDF5
// dump/restore round trips in bounded blocks with the bad-file and failed-dump cases, and the
// replay config refusals.
#include <dirent.h>
#include <gtest/gtest.h>
#include <hdf5.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "buffer/hdf5_dump.h"
#include "buffer/replay.h"
#include "buffer/rate_limiter.h"
#include "buffer/replay_buffer.h"
#include "buffer/replay_checkpoint.h"
#include "buffer/selectors.h"
#include "buffer/sum_tree.h"
#include "comm/seq_layout.h"
#include "comm/wire.h"
#include "envs/registry.h"
#include "core/config.h"
#include "core/error.h"

using namespace mpirl;
using namespace mpirl::buffer;

// Two dumps hold the same /items datasets: names, shapes and bytes.
void expect_same_items(const std::string& f1, const std::string& f2) {
  uint32_t c1, c2;
  auto d1 = read_dump_items(f1, &c1), d2 = read_dump_items(f2, &c2);
  ASSERT_EQ(d1.size(), d2.size());
  for (size_t k = 0; k < d1.size(); ++k) {
    EXPECT_EQ(d1[k].name, d2[k].name);
    EXPECT_EQ(d1[k].shape, d2[k].shape);
    EXPECT_EQ(d1[k].data, d2[k].data) << d1[k].name;
  }
}

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

// ---- Production chunk layout (chunk_rows = env.num_envs > 1), restore, removal, dumps ----

namespace {

// A layout like a run's: CartPole (time limit, so boot_obs/boot_state/boot_step are present) with
// a recurrent state (state0). Kept alive for the buffers that refer to it.
const SeqLayout& prod_layout() {
  static const SeqLayout l(spec(), 5, 6);
  return l;
}

// Item tags: every byte of every field is tag & 0xff, except `version`, which holds the tag.
void put_item(const SeqLayout& l, char* p, int64_t n, int64_t i, int64_t tag) {
  for (size_t f = 0; f < l.fields().size(); ++f)
    std::memset(p + l.field_offset(f, n) + size_t(i) * l.fields()[f].bytes, int(tag & 0xff), l.fields()[f].bytes);
  l.ptr<int64_t>(p, Seq::Version, n)[i] = tag;
}
std::vector<char> tagged(const SeqLayout& l, int64_t n, int64_t first_tag) {
  std::vector<char> p(l.field_offset(l.fields().size(), n));
  for (int64_t i = 0; i < n; ++i) put_item(l, p.data(), n, i, first_tag + i);
  return p;
}
// The tag of item i, or -1 when any byte of the item disagrees with it (a torn or overwritten item).
int64_t item_tag(const SeqLayout& l, const char* p, int64_t n, int64_t i) {
  const int64_t tag = l.ptr<int64_t>(p, Seq::Version, n)[i];
  for (size_t f = 0; f < l.fields().size(); ++f) {
    if (l.fields()[f].id == Seq::Version) continue;
    const auto* b = reinterpret_cast<const unsigned char*>(p + l.field_offset(f, n) + size_t(i) * l.fields()[f].bytes);
    for (size_t k = 0; k < l.fields()[f].bytes; ++k)
      if (b[k] != (tag & 0xff)) return -1;
  }
  return tag;
}
std::vector<char> batch_buffer(const SeqLayout& l, int64_t B) { return std::vector<char>(l.field_offset(l.fields().size(), B)); }

// A rollout received in place: the payload written into a reserved chunk after a header region.
constexpr size_t kPayloadAt = 2 * wire::kAlign;
ReplayOptions chunked_options(int64_t rows, int64_t capacity, const std::string& selector, int64_t max_times) {
  ReplayOptions o;
  o.capacity = capacity;
  o.chunk_rows = rows;
  o.chunk_bytes = kPayloadAt + prod_layout().field_offset(prod_layout().fields().size(), rows);
  o.selector = selector;
  o.max_times_sampled = max_times;
  o.min_size_to_sample = 1;
  return o;
}
// Commits tags [first, first + R) as one rollout; returns the chunk they went into.
int64_t commit_rollout(ReplayBuffer& rb, int64_t first) {
  const auto& l = rb.layout();
  const int64_t R = rb.chunk_rows();
  char* dst = rb.reserve_chunk();
  auto p = tagged(l, R, first);
  std::memcpy(dst + kPayloadAt, p.data(), p.size());
  rb.commit_chunk(kPayloadAt, R);
  return rb.slots_in_order().back() / R;
}

std::vector<std::string> list_dir(const std::string& dir) {  // POSIX: see DumpTest::TearDown
  std::vector<std::string> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* e = ::readdir(d))
      if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") out.push_back(e->d_name);
    ::closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

// Defect: the chunk insert_restored was filling was never freed, even once all its items were
// consumed: a queue restored from a dump lost a chunk for good.
TEST(ReplayBuffer, RestoredPartFilledChunkIsFreedOnceConsumed) {
  const auto& l = prod_layout();
  ReplayBuffer rb(l, chunked_options(4, 12, "fifo", 1));  // queue mode, 3 chunks of 4
  ASSERT_TRUE(rb.options().queue());
  auto p = tagged(l, 6, 100);
  for (int64_t i = 0; i < 6; ++i) {
    ItemMeta m;
    m.insert_seq = i;
    m.priority = 1;
    rb.insert_restored(p.data(), 6, i, m);  // a full chunk and one with 2 of its 4 rows
  }
  auto out = batch_buffer(l, 2);
  for (int64_t k = 0; k < 3; ++k) {
    ASSERT_TRUE(rb.can_sample(2));
    rb.sample(2, out.data());
    EXPECT_EQ(item_tag(l, out.data(), 2, 0), 100 + 2 * k);
    EXPECT_EQ(item_tag(l, out.data(), 2, 1), 101 + 2 * k);
  }
  EXPECT_EQ(rb.size(), 0);
  // All three chunks are free again: ingest fills the whole queue, and keeps going once drained.
  int64_t tag = 200;
  for (int round = 0; round < 3; ++round) {
    for (int c = 0; c < 3; ++c) {
      ASSERT_TRUE(rb.can_insert_chunk()) << "round " << round << " chunk " << c;
      commit_rollout(rb, tag);
      tag += 4;
    }
    EXPECT_FALSE(rb.can_insert_chunk());
    EXPECT_EQ(rb.size(), 12);
    for (int k = 0; k < 6; ++k) {
      ASSERT_TRUE(rb.can_sample(2));
      rb.sample(2, out.data());
      EXPECT_EQ(item_tag(l, out.data(), 2, 0), tag - 12 + 2 * k);
    }
  }
  EXPECT_EQ(rb.counters().consumed, 6 + 36);
  EXPECT_EQ(rb.counters().evicted, 0);
}

// Defect: a one-chunk buffer whose only chunk was part-filled by insert_restored and then
// consumed had no free chunk: take_chunk read the oldest item of an empty buffer.
TEST(ReplayBuffer, OneChunkBufferReusesItsRestoredChunk) {
  const auto& l = prod_layout();
  for (std::string sel : {"fifo", "uniform", "prioritized"}) {
    SCOPED_TRACE(sel);
    ReplayBuffer rb(l, chunked_options(4, 4, sel, 1));
    auto p = tagged(l, 3, 10);
    for (int64_t i = 0; i < 3; ++i) {
      ItemMeta m;
      m.insert_seq = i;
      m.priority = 1;
      rb.insert_restored(p.data(), 3, i, m);
    }
    auto out = batch_buffer(l, 1);
    for (int k = 0; k < 3; ++k) rb.sample(1, out.data());
    ASSERT_EQ(rb.size(), 0);
    ASSERT_TRUE(rb.can_insert_chunk());
    EXPECT_EQ(commit_rollout(rb, 20), 0);
    EXPECT_EQ(rb.size(), 4);
    for (int k = 0; k < 4; ++k) {
      ASSERT_TRUE(rb.can_sample(1));
      rb.sample(1, out.data());
      EXPECT_GE(item_tag(l, out.data(), 1, 0), 20);
    }
    EXPECT_TRUE(rb.can_insert_chunk());
    EXPECT_EQ(rb.counters().inserted, 7);
    EXPECT_EQ(rb.counters().consumed, 7);
  }
}

// Defect: with removal (max_times_sampled > 0) a batch may remove items as it goes, so a batch
// larger than the buffer ran the selector dry (min_size_to_sample < batch size passed validation).
TEST(ReplayBuffer, RemovalWaitsForAWholeBatch) {
  const auto& l = prod_layout();
  for (std::string sel : {"uniform", "prioritized"}) {
    for (int64_t rows : {1, 4}) {
      SCOPED_TRACE(sel + " chunk_rows " + std::to_string(rows));
      ReplayOptions o;
      o.capacity = 32;
      o.chunk_rows = rows;
      o.selector = sel;
      o.max_times_sampled = 1;
      o.min_size_to_sample = 1;
      ReplayBuffer rb(l, o);
      auto p = tagged(l, 20, 0);
      auto out = batch_buffer(l, 8);
      for (int64_t i = 0; i < 20; ++i) {
        EXPECT_EQ(rb.can_sample(8), rb.size() >= 8) << "size " << rb.size();
        rb.insert(p.data(), 20, i);
        if (rb.can_sample(8)) {
          EXPECT_NO_THROW(rb.sample(8, out.data()));
          for (int k = 0; k < 8; ++k) EXPECT_GE(item_tag(l, out.data(), 8, k), 0);
        }
      }
      EXPECT_EQ(rb.counters().sampled, 16);  // two whole batches, each at size >= 8
      EXPECT_EQ(rb.size(), 4);
      EXPECT_FALSE(rb.can_sample(8));
      EXPECT_TRUE(rb.can_sample(4));
      EXPECT_NO_THROW(rb.sample(4, out.data()));
      EXPECT_EQ(rb.size(), 0);
    }
  }
}

// Rollouts of 4 received in place, uniform sampling with removal after 3 samples, and eviction
// of the oldest chunk when none is free. The test keeps its own model of which item lives in
// which chunk and checks every step against it: items go after exactly 3 samples, a chunk comes
// back only when all its rows are gone, and inserted = stored + evicted + consumed with every
// term counted by the test.
TEST(ReplayBuffer, ChunkedIngestWithRemovalAndEvictionMatchesAModel) {
  const auto& l = prod_layout();
  const int64_t R = 4, n_chunks = 5, K = 3, B = 6;
  ReplayOptions o = chunked_options(R, R * n_chunks, "uniform", K);
  o.seed = 9;
  ReplayBuffer rb(l, o);
  struct Item {
    int64_t chunk, slot, times = 0;
  };
  std::map<int64_t, Item> alive;  // tag -> where it is, oldest tag first
  std::vector<int64_t> chunk_live(n_chunks, 0);
  int64_t inserted = 0, consumed = 0, evicted = 0, draws = 0, next_tag = 1000;
  std::mt19937_64 rng(5);
  auto out = batch_buffer(l, B);
  for (int step = 0; step < 400; ++step) {
    const bool insert = rng() % 100 < 45;
    if (insert) {
      ASSERT_TRUE(rb.can_insert_chunk());  // not a queue: a full buffer evicts
      int64_t free_chunks = 0;
      for (auto c : chunk_live) free_chunks += c == 0;
      int64_t victim = -1;
      if (free_chunks == 0) victim = alive.begin()->second.chunk;  // the oldest item's chunk
      const int64_t c = commit_rollout(rb, next_tag);
      if (victim >= 0) {
        EXPECT_EQ(c, victim) << "step " << step;
        for (auto it = alive.begin(); it != alive.end();)
          if (it->second.chunk == victim) {
            ++evicted;
            it = alive.erase(it);
          } else {
            ++it;
          }
        chunk_live[size_t(victim)] = 0;
      }
      EXPECT_EQ(chunk_live[size_t(c)], 0) << "step " << step << ": chunk " << c << " reused with live rows";
      auto slots = rb.slots_in_order();
      for (int64_t r = 0; r < R; ++r) {
        const int64_t s = slots[slots.size() - size_t(R) + size_t(r)];
        EXPECT_EQ(s, c * R + r);
        alive[next_tag + r] = Item{c, s};
      }
      chunk_live[size_t(c)] = R;
      inserted += R;
      next_tag += R;
    } else {
      const int64_t stored = int64_t(alive.size());
      EXPECT_EQ(rb.can_sample(B), stored >= B) << "step " << step;
      if (stored < B) continue;
      auto s = rb.sample(B, out.data());
      for (int64_t k = 0; k < B; ++k) {
        const int64_t tag = item_tag(l, out.data(), B, k);
        ASSERT_TRUE(alive.count(tag)) << "step " << step << ": sampled tag " << tag << " is not stored";
        auto& it = alive[tag];
        EXPECT_EQ(s.slots[size_t(k)], it.slot);
        ++draws;
        if (++it.times == K) {
          ++consumed;
          --chunk_live[size_t(it.chunk)];
          alive.erase(tag);
        }
      }
    }
    ASSERT_EQ(rb.size(), int64_t(alive.size())) << "step " << step;
    ASSERT_EQ(inserted, int64_t(alive.size()) + evicted + consumed);
    ASSERT_EQ(rb.counters().inserted, inserted);
    ASSERT_EQ(rb.counters().consumed, consumed);
    ASSERT_EQ(rb.counters().evicted, evicted);
    ASSERT_EQ(rb.counters().sampled, draws);
    for (auto& [tag, it] : alive) ASSERT_EQ(rb.meta(it.slot).times_sampled, it.times) << tag;
  }
  EXPECT_GT(consumed, 0);
  EXPECT_GT(evicted, 0);
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
  expect_same_items(f1, f2);
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

// A restored queue must never leave both sides waiting: with 5 items restored into 2 chunks of
// 4, filling the first chunk and 1 row of the second left 2 items after a batch of 3 and no
// free chunk. Restores now fill whole chunks but the oldest (a part-consumed oldest chunk is what
// the queue capacity rule allows for).
TEST_F(DumpTest, RestoredQueueNeverBlocksBothInsertsAndSamples) {
  const auto& l = prod_layout();
  ReplayOptions src;
  src.capacity = 8;
  ReplayBuffer a(l, src);
  auto p = tagged(l, 5, 50);
  for (int64_t i = 0; i < 5; ++i) a.insert(p.data(), 5, i);
  auto f = (dir / "q.h5").string();
  dump_replay(a, f, "CartPole-v1", "");
  ReplayOptions o = chunked_options(4, 8, "fifo", 1);
  o.min_size_to_sample = 3;
  ReplayBuffer b(l, o);
  restore_replay(b, f, "CartPole-v1");
  ASSERT_EQ(b.size(), 5);
  auto out = batch_buffer(l, 3);
  std::vector<int64_t> seen;
  int64_t tag = 60;
  for (int step = 0; step < 40; ++step) {
    const bool can_sample = b.can_sample(3), can_insert = b.can_insert_chunk();
    ASSERT_TRUE(can_sample || can_insert) << "step " << step << ": size " << b.size() << ", inserts and samples both wait";
    if (can_insert && (step % 2 == 0 || !can_sample)) {
      commit_rollout(b, tag);
      tag += 4;
    } else {
      b.sample(3, out.data());
      for (int k = 0; k < 3; ++k) seen.push_back(item_tag(l, out.data(), 3, k));
    }
  }
  // Queue order: the restored items first, then the rollouts, each exactly once.
  for (size_t k = 0; k < seen.size(); ++k) EXPECT_EQ(seen[k], k < 5 ? 50 + int64_t(k) : 60 + int64_t(k) - 5);
}

// Dump and restore in blocks smaller than a dataset (io_bytes of a few items), with rollouts of
// 4 items received in place, evictions, removal after 2 samples: the restored buffer holds the
// same items, bookkeeping and checksum, whatever the block size; a restored buffer samples each
// item only the remaining number of times and then ingests again into whole chunks.
TEST_F(DumpTest, RoundTripInBoundedBlocksWithChunkRows) {
  const auto& l = prod_layout();
  ReplayOptions o = chunked_options(4, 16, "uniform", 2);
  o.seed = 3;
  ReplayBuffer a(l, o);
  auto out = batch_buffer(l, 3);
  int64_t tag = 1;
  for (int r = 0; r < 6; ++r) {  // 24 items into 16 slots: the oldest chunks are evicted
    commit_rollout(a, tag);
    tag += 4;
    if (r % 2 == 1) a.sample(3, out.data());
  }
  while (a.size() % 4 != 3) a.sample(1, out.data());  // a part-consumed chunk, whatever the draws
  const int64_t n = a.size();
  ASSERT_GT(a.counters().evicted, 0);
  std::map<int64_t, int64_t> times_left;  // tag -> samples left before removal
  for (auto s : a.slots_in_order()) {
    int64_t t;
    std::memcpy(&t, a.item_field(s, l.position(Seq::Version)), 8);
    times_left[t] = 2 - a.meta(s).times_sampled;
  }
  const size_t small = 3 * l.bytes_per_sequence() / 2;  // 1 item of the big fields, many of the small ones
  DumpOptions io;
  io.io_bytes = small;
  auto f1 = (dir / "a.h5").string(), f2 = (dir / "b.h5").string(), f3 = (dir / "c.h5").string();
  auto i1 = dump_replay(a, f1, "CartPole-v1", "", io);
  auto i3 = dump_replay(a, f3, "CartPole-v1", "");  // one block per dataset
  EXPECT_EQ(i1.items, n);
  EXPECT_EQ(i1.checksum, i3.checksum);  // the checksum does not depend on the block size
  uint32_t whole = 0;
  read_dump_items(f1, &whole);
  EXPECT_EQ(whole, i1.checksum);

  ReplayOptions ob = chunked_options(4, 16, "uniform", 2);
  ReplayBuffer b(l, ob);
  auto h = restore_replay(b, f1, "CartPole-v1", io);
  EXPECT_EQ(h.items, n);
  ASSERT_EQ(b.size(), n);
  auto i2 = dump_replay(b, f2, "CartPole-v1", "", io);
  EXPECT_EQ(i2.checksum, i1.checksum);
  expect_same_items(f1, f2);
  // Only the oldest restored chunk is part-filled: the others hold 4 items each.
  std::map<int64_t, int64_t> per_chunk;
  for (auto s : b.slots_in_order()) ++per_chunk[s / 4];
  ASSERT_EQ(int64_t(per_chunk.size()), (n + 3) / 4);
  EXPECT_EQ(per_chunk[b.slots_in_order().front() / 4], n % 4);
  for (auto& [c, k] : per_chunk) {
    if (c != b.slots_in_order().front() / 4) {
      EXPECT_EQ(k, 4) << "chunk " << c;
    }
  }

  // Drain: every item goes after its remaining samples; the sums are the test's own.
  int64_t expected_draws = 0;
  for (auto& [t, left] : times_left) expected_draws += left;
  auto one = batch_buffer(l, 1);
  int64_t draws = 0;
  while (b.size() > 0) {
    ASSERT_TRUE(b.can_sample(1));
    b.sample(1, one.data());
    const int64_t t = item_tag(l, one.data(), 1, 0);
    ASSERT_TRUE(times_left.count(t)) << t;
    ASSERT_GT(times_left[t], 0) << "tag " << t << " sampled after its last sample";
    --times_left[t];
    ++draws;
    ASSERT_LE(draws, expected_draws);
  }
  EXPECT_EQ(draws, expected_draws);
  // Every chunk is free: 4 rollouts fit without evicting anything.
  for (int r = 0; r < 4; ++r) commit_rollout(b, 1000 + 4 * r);
  EXPECT_EQ(b.size(), 16);
  EXPECT_EQ(b.counters().evicted, 0);
  EXPECT_EQ(b.counters().inserted, n + 16);
  EXPECT_EQ(b.counters().consumed, n);
}

// A checksum mismatch is found before anything is inserted.
TEST_F(DumpTest, CorruptDumpRestoresNothing) {
  const auto& l = prod_layout();
  ReplayBuffer a(l, chunked_options(4, 16, "uniform", 0));
  for (int r = 0; r < 3; ++r) commit_rollout(a, 1 + 4 * r);
  auto f = (dir / "a.h5").string();
  dump_replay(a, f, "CartPole-v1", "");
  {  // flip one reward of the last item: the last dataset block read in the first pass
    hid_t fid = H5Fopen(f.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(fid, 0);
    hid_t ds = H5Dopen2(fid, "items/reward", H5P_DEFAULT);
    ASSERT_GE(ds, 0);
    std::vector<float> r(size_t(12 * l.T()));
    ASSERT_GE(H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, r.data()), 0);
    r.back() += 1.f;
    ASSERT_GE(H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, r.data()), 0);
    H5Dclose(ds);
    H5Fclose(fid);
  }
  ReplayBuffer b(l, chunked_options(4, 16, "uniform", 0));
  DumpOptions io;
  io.io_bytes = 1;  // one item per block
  try {
    restore_replay(b, f, "CartPole-v1", io);
    ADD_FAILURE() << "corrupt dump restored";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("corrupt"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << e.what();
  }
  EXPECT_EQ(b.size(), 0);
  EXPECT_EQ(b.counters().inserted, 0);
  EXPECT_TRUE(b.can_insert_chunk());
  // Bookkeeping no buffer can hold (insertion numbers out of order) under a matching checksum:
  // refused before anything is inserted, too.
  auto g = (dir / "g.h5").string();
  dump_replay(a, g, "CartPole-v1", "");
  {
    hid_t fid = H5Fopen(g.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(fid, 0);
    hid_t ds = H5Dopen2(fid, "items/insert_seq", H5P_DEFAULT);
    std::vector<int64_t> seq(12);
    ASSERT_GE(H5Dread(ds, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, seq.data()), 0);
    std::swap(seq[10], seq[11]);
    ASSERT_GE(H5Dwrite(ds, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, seq.data()), 0);
    H5Dclose(ds);
    H5Fclose(fid);
    uint32_t crc = 0;
    read_dump_items(g, &crc);
    fid = H5Fopen(g.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t at = H5Aopen(fid, "checksum_crc32", H5P_DEFAULT);
    int64_t v = crc;
    ASSERT_GE(H5Awrite(at, H5T_NATIVE_INT64, &v), 0);
    H5Aclose(at);
    H5Fclose(fid);
  }
  try {
    restore_replay(b, g, "CartPole-v1", io);
    ADD_FAILURE() << "out-of-order insertion numbers restored";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("insert_seq"), std::string::npos) << e.what();
  }
  EXPECT_EQ(b.size(), 0);
  EXPECT_EQ(b.counters().inserted, 0);
}

// Defect: PATH.tmp.<pid> files of killed dumps stayed forever. The next successful dump removes
// exactly those (PATH + ".tmp." + digits), nothing else.
TEST_F(DumpTest, NextDumpRemovesStaleTemporaries) {
  const auto& l = prod_layout();
  ReplayBuffer a(l, chunked_options(4, 8, "uniform", 0));
  commit_rollout(a, 1);
  auto f = (dir / "replay.h5").string();
  std::vector<std::string> stale{"replay.h5.tmp.12345", "replay.h5.tmp.1"};
  std::vector<std::string> keep{"replay.h5.tmp.", "replay.h5.tmp.12x", "replay.h5.tmp.abc", "replay.h5.tmp.1.h5",
                                "other.h5.tmp.777", "xreplay.h5.tmp.42", "replay.h5.complete.tmp.9"};
  for (auto& s : stale) std::ofstream((dir / s).string()) << "half a dump";
  for (auto& s : keep) std::ofstream((dir / s).string()) << "not ours";
  dump_replay(a, f, "CartPole-v1", "");
  std::vector<std::string> want = keep;
  want.push_back("replay.h5");
  want.push_back("replay.h5.complete");
  std::sort(want.begin(), want.end());
  EXPECT_EQ(list_dir(dir.string()), want);
  EXPECT_EQ(read_dump_header(f).items, 4);
}

// A dump that fails after writing its data removes its temporary and leaves PATH (the previous
// dump) as it was.
TEST_F(DumpTest, FailedDumpRemovesItsTemporaryAndKeepsThePreviousDump) {
  const auto& l = prod_layout();
  ReplayBuffer a(l, chunked_options(4, 8, "uniform", 0));
  commit_rollout(a, 1);
  auto f = (dir / "replay.h5").string();
  auto first = dump_replay(a, f, "CartPole-v1", "");
  commit_rollout(a, 5);
  DumpOptions fail;
  std::string tmp_seen;
  fail.on_data_written = [&](const std::string& tmp) {
    tmp_seen = tmp;
    throw Error("injected write failure");
  };
  EXPECT_THROW(dump_replay(a, f, "CartPole-v1", "", fail), Error);
  EXPECT_EQ(tmp_seen.rfind(f + ".tmp.", 0), 0u) << tmp_seen;
  EXPECT_EQ(list_dir(dir.string()), (std::vector<std::string>{"replay.h5", "replay.h5.complete"}));
  auto h = read_dump_header(f);
  EXPECT_EQ(h.items, first.items);
  EXPECT_EQ(h.checksum, first.checksum);
}

// A dump whose directory disappears under it fails with an Error naming the file and leaves no
// PATH (also when the directory comes back empty).
TEST_F(DumpTest, DumpIntoAVanishingDirectoryFails) {
  const auto& l = prod_layout();
  ReplayBuffer a(l, chunked_options(4, 8, "uniform", 0));
  commit_rollout(a, 1);
  for (bool recreate : {false, true}) {
    SCOPED_TRACE(recreate ? "directory recreated" : "directory gone");
    auto sub = dir / (recreate ? "back" : "gone");
    auto f = (sub / "replay.h5").string();
    DumpOptions vanish;
    vanish.on_data_written = [&](const std::string&) {
      ASSERT_EQ(std::system(("rm -rf '" + sub.string() + "'").c_str()), 0);
      if (recreate) {
        ASSERT_EQ(::mkdir(sub.c_str(), 0755), 0);
      }
    };
    try {
      dump_replay(a, f, "CartPole-v1", "", vanish);
      ADD_FAILURE() << "dump into a removed directory succeeded";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << e.what();
    }
    struct stat st {};
    EXPECT_NE(::stat(f.c_str(), &st), 0);
    EXPECT_EQ(list_dir(sub.string()), std::vector<std::string>{});
  }
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

// Defect: fifo always returns the oldest item, so with max_times_sampled != 1 it returned the
// same item over and over.
TEST(ReplayConfig, RefusesFifoThatIsNotAQueue) {
  for (std::string m : {"0", "2"}) {
    try {
      buffer::validate_replay_config(load_config("", {"replay.max_times_sampled=" + m}));
      ADD_FAILURE() << "accepted fifo with max_times_sampled = " << m;
    } catch (const ConfigError& e) {
      std::string w = e.what();
      EXPECT_NE(w.find("'replay.max_times_sampled'"), std::string::npos) << w;
      EXPECT_NE(w.find("queue"), std::string::npos) << w;
      EXPECT_NE(w.find("uniform"), std::string::npos) << w;
    }
  }
  EXPECT_NO_THROW(buffer::validate_replay_config(
      load_config("", {"replay.selector=\"uniform\"", "replay.max_times_sampled=0"})));
  EXPECT_NO_THROW(buffer::validate_replay_config(
      load_config("", {"replay.selector=\"prioritized\"", "replay.max_times_sampled=3"})));
}

// Defect: a dump path that cannot be written was found at the end of the run. Now it is a config
// error at start, found by creating (and removing) a probe file, and without creating anything.
TEST(ReplayConfig, RefusesAnUnwritableDumpPath) {
  const std::string d = (std::filesystem::temp_directory_path() / ("mpirl-cfg-" + std::to_string(::getpid()))).string();
  ASSERT_EQ(::mkdir(d.c_str(), 0755), 0);
  const std::string file = d + "/file";
  std::ofstream(file) << "a regular file";
  auto q = [](const std::string& s) { return "\"" + s + "\""; };
  auto refused = [&](std::vector<std::string> sets, std::vector<std::string> words) {
    try {
      buffer::validate_replay_config(load_config("", sets));
      ADD_FAILURE() << "accepted " << sets[0];
    } catch (const ConfigError& e) {
      for (auto& w : words) EXPECT_NE(std::string(e.what()).find(w), std::string::npos) << e.what();
    }
  };
  refused({"replay.dump_path=" + q(file + "/replay.h5")}, {"'replay.dump_path'", file, "not a directory"});
  refused({"replay.dump_path=" + q(file + "/sub/replay.h5")}, {"'replay.dump_path'", "not a directory"});
  refused({"replay.dump_path=" + q(d)}, {"'replay.dump_path'", "is a directory"});
  // The default <run dir>/replay.h5: validation runs before the run directory is created, so
  // run.out_dir is what must take it.
  refused({"run.out_dir=" + q(file + "/runs")}, {"'replay.dump_path'", "run.out_dir", "not a directory"});
  // No dumps of any kind ("never" also turns off periodic and SIGUSR2 dumps): not checked.
  EXPECT_NO_THROW(buffer::validate_replay_config(
      load_config("", {"replay.dump=\"never\"", "replay.dump_path=" + q(file + "/replay.h5")})));
  EXPECT_NO_THROW(buffer::validate_replay_config(load_config(
      "", {"replay.dump=\"never\"", "replay.dump_interval_s=5.0", "replay.dump_path=" + q(file + "/r.h5")})));
  // Missing directories under a writable one are fine (dump_replay creates them) and are not
  // created here; nor is the run directory or run.out_dir.
  EXPECT_NO_THROW(buffer::validate_replay_config(load_config("", {"replay.dump_path=" + q(d + "/new/deeper/replay.h5")})));
  EXPECT_NO_THROW(buffer::validate_replay_config(load_config("", {"run.out_dir=" + q(d + "/runs")})));
  EXPECT_NO_THROW(buffer::validate_replay_config(load_config("", {"run.out_dir=" + q(d), "run.name=\"r1\""})));
  EXPECT_EQ(list_dir(d), std::vector<std::string>{"file"});  // no probe file, nothing created
  (void)std::system(("rm -rf '" + d + "'").c_str());
}

// A checkpoint's replay part: the items, every counter, insertion numbers, limiter and the
// sampler's RNG come back, so the resumed buffer draws what the original would have drawn next.
TEST_F(DumpTest, CheckpointRoundTripContinuesTheSameSampling) {
  SeqLayout l(spec(), 3, 0);
  ReplayOptions o;
  o.capacity = 16;
  o.selector = "uniform";
  o.max_times_sampled = 0;
  o.samples_per_insert = 2;
  o.error_buffer = 100;
  o.seed = 99;
  ReplayBuffer a(l, o);
  auto p = payload(l, 20, 7);
  for (int i = 0; i < 20; ++i) a.insert(p.data(), 20, i);  // 4 evicted
  std::vector<char> out(l.field_offset(l.fields().size(), 4));
  for (int k = 0; k < 3; ++k) a.sample(4, out.data());
  ReplayCheckpoint st;
  st.status.env_steps = 60;
  st.status.episodes = 5;
  st.returns = {1.5f, 2.5f};
  st.lengths = {10, 20};
  st.buffer = a.resume_state();
  auto info = write_replay_checkpoint(a, st, dir.string(), "CartPole-v1", "x = 1");
  EXPECT_EQ(info.items, 16);

  ReplayBuffer b(l, o);
  auto got = read_replay_checkpoint(b, dir.string(), "CartPole-v1");
  EXPECT_EQ(got.checksum, info.checksum);
  EXPECT_EQ(got.status.env_steps, 60);
  EXPECT_EQ(got.status.episodes, 5);
  EXPECT_EQ(got.returns, st.returns);
  EXPECT_EQ(got.lengths, st.lengths);
  EXPECT_EQ(b.size(), a.size());
  EXPECT_EQ(b.counters().inserted, a.counters().inserted);  // 20, not the 16 the restore inserted
  EXPECT_EQ(b.counters().evicted, a.counters().evicted);
  EXPECT_EQ(b.counters().sampled, a.counters().sampled);
  EXPECT_EQ(b.next_insert_seq(), a.next_insert_seq());
  EXPECT_EQ(b.limiter().inserts(), a.limiter().inserts());
  EXPECT_EQ(b.limiter().samples(), a.limiter().samples());
  // The sampler's RNG continues where it was (draws by slot can differ: a restore lays the items out
  // anew), and the next draws come from the restored items.
  EXPECT_EQ(b.resume_state().rng, a.resume_state().rng);
  ReplayBuffer c(l, o);  // control: restored items, the seed's fresh RNG
  restore_replay(c, dir.string() + "/replay.h5", "CartPole-v1");
  EXPECT_NE(c.resume_state().rng, a.resume_state().rng);
  auto sb = b.sample(4, out.data());
  for (int64_t slot : sb.slots) EXPECT_LT(b.meta(slot).insert_seq, 20);
  // A replay_state.json that does not match the dump is refused, naming the checkpoint.
  {
    std::ifstream in(dir / "replay_state.json");
    std::string text((std::istreambuf_iterator<char>(in)), {});
    auto pos = text.find("\"items\": 16");
    ASSERT_NE(pos, std::string::npos);
    text.replace(pos, 11, "\"items\": 15");
    std::ofstream(dir / "replay_state.json") << text;
  }
  ReplayBuffer e(l, o);
  try {
    read_replay_checkpoint(e, dir.string(), "CartPole-v1");
    ADD_FAILURE() << "a mismatched replay_state.json was accepted";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("replay_state.json says 15"), std::string::npos) << err.what();
  }
}
