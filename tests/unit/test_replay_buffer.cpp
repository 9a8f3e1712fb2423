// The replay buffer: generations, capacity and removal, and the production chunk layout (rollouts
// received in place, restore, removal, eviction).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "buffer/replay_buffer.h"
#include "comm/seq_layout.h"
#include "tests/common/replay_fixtures.h"

using namespace mpirl;
using namespace mpirl::buffer;
using namespace mpirl::buffer::testing;

namespace {
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

// ---- Production chunk layout (chunk_rows = env.num_envs > 1): restore, removal, eviction ----

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
