// HDF5 replay dumps: dump/restore round trips, also in bounded blocks with the production chunk
// layout; a restored queue that never blocks; a checkpoint's replay part, which continues the same
// sampling.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "buffer/hdf5_dump.h"
#include "buffer/replay_buffer.h"
#include "buffer/pending_episodes.h"
#include "buffer/replay_checkpoint.h"
#include "comm/seq_layout.h"
#include "core/error.h"
#include "tests/common/replay_fixtures.h"

using namespace mpirl;
using namespace mpirl::buffer;
using namespace mpirl::buffer::testing;

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
  st.dropped = 7;
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
  EXPECT_EQ(got.dropped, 7);
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

// The replay's pending episode statistics: beyond kMaxPending the oldest go, and are counted, so
// that what learner 0 took + pending + dropped = every episode added (the resume test's invariant).
TEST(PendingEpisodes, DropsTheOldestBeyondTheCapAndCountsThem) {
  PendingEpisodes p;
  const size_t cap = PendingEpisodes::kMaxPending;
  std::vector<float> r(cap + 30);
  std::vector<int32_t> l(cap + 30);
  for (size_t i = 0; i < r.size(); ++i) r[i] = float(i), l[i] = int32_t(i % 1000 + 1);
  p.add(r.data(), l.data(), cap - 10);  // under the cap: nothing dropped
  EXPECT_EQ(p.dropped(), 0);
  float got_r[5];
  int32_t got_l[5];
  p.take(5, got_r, got_l);  // learner 0 takes the oldest 5: 0..4
  EXPECT_EQ(got_r[0], 0.f);
  EXPECT_EQ(got_r[4], 4.f);
  p.add(r.data() + (cap - 10), l.data() + (cap - 10), 40);  // cap - 15 + 40 = cap + 25 pending: 25 dropped
  EXPECT_EQ(p.size(), cap);
  EXPECT_EQ(p.dropped(), 25);
  EXPECT_EQ(int64_t(5 + p.size()) + p.dropped(), int64_t(cap + 30));  // taken + pending + dropped = added
  p.take(1, got_r, got_l);  // the oldest left is episode 5 + 25 = 30
  EXPECT_EQ(got_r[0], 30.f);
  EXPECT_EQ(got_l[0], 31);
  PendingEpisodes q;  // a resume restores the count with the statistics
  q.assign({1.f}, {2}, 35);
  EXPECT_EQ(q.dropped(), 35);
  EXPECT_EQ(q.size(), 1u);
}
