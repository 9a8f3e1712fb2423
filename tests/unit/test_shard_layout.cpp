// roles.replays = K: where the shards go (comm/ranks.h), which shard each actor sends to, the
// merged status learners report (comm/shard_status.h), and the SampleRequest count the shards read
// (buffer/messages.h). Hand-worked placements; merged counters against independently summed ones.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "buffer/messages.h"
#include "comm/ranks.h"
#include "comm/shard_status.h"
#include "comm/wire.h"
#include "core/config.h"
#include "core/error.h"

using namespace mpirl;

namespace {
Config shards(int k, int learners = 1) {
  return load_config("", {"roles.replays=" + std::to_string(k), "roles.learners=" + std::to_string(learners)});
}
}  // namespace

TEST(ShardLayout, OneHostShardsFollowTheFirstReplayAndActorsAlternate) {
  // 1 learner, 2 shards, 3 actors on one host: shards on ranks 1 and 2, actors 3, 4, 5 alternate.
  Layout l = make_layout(shards(2), 6);
  EXPECT_EQ(l.replays(), 2);
  EXPECT_EQ(l.replay_ranks(), (std::vector<int>{1, 2}));
  EXPECT_EQ(l.replay_rank(), 1);
  EXPECT_EQ(l.actor_ranks(), (std::vector<int>{3, 4, 5}));
  EXPECT_EQ(l.replay_of(3), 1);
  EXPECT_EQ(l.replay_of(4), 2);
  EXPECT_EQ(l.replay_of(5), 1);
  EXPECT_EQ(l.actors_of_shard(0), (std::vector<int>{3, 5}));
  EXPECT_EQ(l.actors_of_shard(1), (std::vector<int>{4}));
  EXPECT_EQ(l.shard_index(2), 1);
  EXPECT_EQ(l.shard_index(3), -1);
  EXPECT_EQ(l.role_of(2), Role::Replay);
}

TEST(ShardLayout, OneShardPerHostAndActorsStayOnTheirHost) {
  // 3 hosts of 3 ranks, K = 3: shard 0 is rank 1 (n1), then the first free rank of n2 (3) and n3
  // (6). Every actor sends to its own host's shard.
  const std::vector<std::string> h{"n1", "n1", "n1", "n2", "n2", "n2", "n3", "n3", "n3"};
  Layout l = make_layout(shards(3), 9, h);
  EXPECT_EQ(l.replay_ranks(), (std::vector<int>{1, 3, 6}));
  EXPECT_EQ(l.actor_ranks(), (std::vector<int>{2, 4, 5, 7, 8}));
  for (int a : l.actor_ranks()) EXPECT_EQ(h[size_t(l.replay_of(a))], h[size_t(a)]) << "actor " << a;
}

TEST(ShardLayout, HostsWithoutAShardSpreadOverAllShards) {
  // 3 hosts of 2 ranks, K = 2: shards on ranks 1 (n1) and 2 (n2); n2's actor 3 uses shard 1, n3's
  // actors 4 and 5 have no shard of their own and alternate over both.
  const std::vector<std::string> h{"n1", "n1", "n2", "n2", "n3", "n3"};
  Layout l = make_layout(shards(2), 6, h);
  EXPECT_EQ(l.replay_ranks(), (std::vector<int>{1, 2}));
  EXPECT_EQ(l.replay_of(3), 2);
  EXPECT_EQ(l.replay_of(4), 1);
  EXPECT_EQ(l.replay_of(5), 2);
}

TEST(ShardLayout, MoreShardsThanHostsFillHostsInTurn) {
  // 2 hosts of 5 ranks, K = 4: n1 has shard 0 (rank 1), n2 gets rank 5, then n1 rank 2, n2 rank 6.
  const std::vector<std::string> h{"n1", "n1", "n1", "n1", "n1", "n2", "n2", "n2", "n2", "n2"};
  Layout l = make_layout(shards(4), 10, h);
  EXPECT_EQ(l.replay_ranks(), (std::vector<int>{1, 5, 2, 6}));
  EXPECT_EQ(l.actor_ranks(), (std::vector<int>{3, 4, 7, 8, 9}));
  EXPECT_EQ(l.replay_of(3), 1);  // n1's shards 0 and 2, in turn
  EXPECT_EQ(l.replay_of(4), 2);
  EXPECT_EQ(l.replay_of(7), 5);  // n2's shards 1 and 3
  EXPECT_EQ(l.replay_of(8), 6);
  EXPECT_EQ(l.replay_of(9), 5);
}

TEST(ShardLayout, AShardOnALearnerNodeTakesActorsFromTheFullestShard) {
  // slurm/train.sbatch: the learner node holds the learner and rank L (shard 0) only; two actor
  // nodes of 3 ranks, K = 3 (one shard per node). Shards 1 and 2 take ranks 2 and 5; shard 0 has no
  // actor of its own host and takes the last actor of the fullest shard (a tie: the first, shard 1).
  const std::vector<std::string> h{"L", "L", "a", "a", "a", "b", "b", "b"};
  Layout l = make_layout(shards(3), 8, h);
  EXPECT_EQ(l.replay_ranks(), (std::vector<int>{1, 2, 5}));
  EXPECT_EQ(l.actors_of_shard(0), (std::vector<int>{4}));
  EXPECT_EQ(l.actors_of_shard(1), (std::vector<int>{3}));
  EXPECT_EQ(l.actors_of_shard(2), (std::vector<int>{6, 7}));
}

TEST(ShardLayout, FewerActorsThanShardsIsRefused) {
  // 2 hosts of 4 ranks, K = 4: shards 1, 4, 2, 5 leave actors 3, 6 and 7 for 4 shards.
  const std::vector<std::string> h{"n1", "n1", "n1", "n1", "n2", "n2", "n2", "n2"};
  try {
    make_layout(shards(4), 8, h);
    FAIL();
  } catch (const ConfigError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("gets no actor"), std::string::npos) << m;
  }
  EXPECT_THROW(make_layout(shards(2), 4), ConfigError);  // 1 learner, 2 shards, 1 actor
}

TEST(ShardLayout, CentralInferenceTakesRanksAfterTheShards) {
  auto c = load_config("", {"roles.replays=2", "actor.inference=\"central\""});
  Layout l = make_layout(c, 6);
  EXPECT_EQ(l.replay_ranks(), (std::vector<int>{1, 2}));
  EXPECT_EQ(l.inference_ranks(), (std::vector<int>{3}));
  EXPECT_EQ(l.actor_ranks(), (std::vector<int>{4, 5}));
  EXPECT_EQ(l.server_of(4), 3);
}

TEST(ShardLayout, TooFewRanksNameTheShards) {
  try {
    make_layout(shards(3, 2), 5);
    FAIL();
  } catch (const ConfigError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("3 replay ranks (roles.replays = 3)"), std::string::npos) << m;
    EXPECT_NE(m.find("6 ranks"), std::string::npos) << m;
  }
  Layout one = make_layout(load_config("", {}), 4);
  EXPECT_EQ(one.replays(), 1);
  EXPECT_EQ(one.replay_of(2), 1);
  EXPECT_EQ(one.replay_of(3), 1);
}

TEST(ShardStatus, CountersAddUpAndDumpsCountWhenEveryShardHasOne) {
  ReplayStatus a, b;
  a.env_steps = 100, b.env_steps = 60;
  a.inserted = 40, b.inserted = 25;
  a.fill = 30, b.fill = 20;
  a.sampled = 7, b.sampled = 9;
  a.sampled_by_learner = {3, 4}, b.sampled_by_learner = {5, 4};
  a.max_priority = 2.5, b.max_priority = 3.5;
  a.priority_mass = 1.25, b.priority_mass = 0.75;
  a.dump.dumps = 2, b.dump.dumps = 1;
  a.dump.items = 30, b.dump.items = 20;
  a.checkpoint.completed = 3, b.checkpoint.completed = 3;
  a.checkpoint.last_ok = true, b.checkpoint.last_ok = false;
  b.checkpoint.last_error = "disk full";
  b.dump.final_failed = true;
  const ReplayStatus m = merge_shard_status({a, b});
  EXPECT_EQ(m.env_steps, 160);
  EXPECT_EQ(m.inserted, 65);
  EXPECT_EQ(m.fill, 50);
  EXPECT_EQ(m.sampled, 16);
  EXPECT_EQ(m.sampled_by_learner, (std::vector<int64_t>{8, 8}));
  EXPECT_DOUBLE_EQ(m.max_priority, 3.5);
  EXPECT_DOUBLE_EQ(m.priority_mass, 2.0);
  EXPECT_EQ(m.dump.dumps, 1);
  EXPECT_EQ(m.dump.items, 50);
  EXPECT_TRUE(m.dump.final_failed);
  EXPECT_EQ(m.checkpoint.completed, 3);
  EXPECT_FALSE(m.checkpoint.last_ok);
  EXPECT_EQ(m.checkpoint.last_error, "disk full");
  EXPECT_EQ(m.shard, -1);
  const ReplayStatus one = merge_shard_status({a});
  EXPECT_EQ(one.shard, a.shard);
  EXPECT_EQ(one.dump.dumps, 2);
}

TEST(ShardStatus, SampleRequestCountsAreChecked) {
  auto request = [](std::vector<wire::ArrayDesc> arrays, int64_t n) {
    wire::Envelope env;
    env.kind = wire::Kind::SampleRequest;
    env.sender = 0;
    env.arrays = std::move(arrays);
    std::vector<size_t> offsets;
    const size_t off = wire::natural_payload_offset(env);
    std::vector<char> buf(off + wire::payload_bytes(env.arrays, &offsets));
    wire::write_header(buf.data(), off, env);
    if (!env.arrays.empty()) std::memcpy(buf.data() + off + offsets[0], &n, 8);
    return buf;
  };
  auto read = [&](const std::vector<char>& buf) {
    auto msg = wire::decode(buf.data(), buf.size(), 0, {wire::Kind::SampleRequest});
    return buffer::read_sample_request(msg, 0, 32);
  };
  EXPECT_EQ(read(request({}, 0)), 32);  // one replay: no count, the whole batch
  EXPECT_EQ(read(request({{"n", wire::DType::I64, {1}}}, 0)), 0);
  EXPECT_EQ(read(request({{"n", wire::DType::I64, {1}}}, 17)), 17);
  EXPECT_THROW(read(request({{"n", wire::DType::I64, {1}}}, 33)), Error);
  EXPECT_THROW(read(request({{"n", wire::DType::I64, {1}}}, -1)), Error);
  EXPECT_THROW(read(request({{"count", wire::DType::I64, {1}}}, 3)), Error);
}
