// Central inference (inference/): the batcher's rules (full, capped, timeout; one request per
// group), the emulated accelerator, the placement of inference ranks and the request/reply checks.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "comm/inference_wire.h"
#include "comm/ranks.h"
#include "core/config.h"
#include "core/error.h"
#include "inference/batcher.h"
#include "inference/engine.h"
#include "tests/common/inference_fixtures.h"

using namespace mpirl;
using namespace mpirl::inference;
using mpirl::testing::spec_of;

TEST(Inference, BatchesStartFullCappedOrAfterTheWait) {
  const auto spec = spec_of({3}, true, 2);
  Engine engine(spec, {}, 12, {});
  Batcher b(engine, 2, 6, 2, 5, 0.002);  // 2 actors x 2 groups of 3 rows; at most 5 rows a batch
  std::vector<float> obs(6 * 3, 0.5f);
  std::vector<uint8_t> init(6, 1);
  auto req = [&](int a, int g, double at) {
    Request r;
    r.actor = a;
    r.group = g;
    r.first = 3 * g;
    r.n = 3;
    r.arrived = at;
    r.obs = reinterpret_cast<const char*>(obs.data());
    r.is_init = init.data();
    return r;
  };
  b.add(req(0, 0, 10.0));
  EXPECT_FALSE(b.due(10.001));
  EXPECT_TRUE(b.due(10.0021));  // the oldest waited max_wait
  EXPECT_THROW(b.add(req(0, 0, 10.0)), Error);  // one request per group in flight
  b.add(req(1, 1, 10.001));
  EXPECT_TRUE(b.due(10.001));  // 6 rows >= the cap of 5
  auto served = b.run_batch(10.001);
  ASSERT_EQ(served.size(), 1u);  // 3 + 3 > 5: the oldest alone
  EXPECT_EQ(served[0].req.actor, 0);
  b.add(req(0, 0, 10.002));
  b.add(req(0, 1, 10.002));
  b.add(req(1, 0, 10.002));
  EXPECT_EQ(b.waiting(), 4u);  // every group asked: nothing else can come
  EXPECT_TRUE(b.due(10.002));
  const auto t = b.total();
  EXPECT_EQ(t.batches, 1);
  EXPECT_EQ(t.capped, 1);
  EXPECT_EQ(BatchStats::bucket(1), 0);
  EXPECT_EQ(BatchStats::bucket(3), 2);
  EXPECT_EQ(BatchStats::bucket(4), 2);
  EXPECT_EQ(BatchStats::bucket(5), 3);
  EXPECT_EQ(BatchStats::bucket_name(2), "3-4");
  EXPECT_EQ(BatchStats::bucket_name(3), "5-8");
  EXPECT_EQ(t.hist[2], 1);
  EXPECT_EQ(b.drain().size(), 4u);
  EXPECT_EQ(b.waiting(), 0u);
}

TEST(Inference, EmulatedAcceleratorReturnsAUniformPolicyAndSaysSo) {
  const auto spec = spec_of({3}, false, 2);
  EngineOptions eo;
  eo.emulate_batch_us = 50;
  eo.emulate_row_us = 1;
  Engine engine(spec, {}, 4, eo);
  EXPECT_NE(engine.describe().find("emulated"), std::string::npos);
  std::fill(engine.obs(), engine.obs() + 4 * 12, char(1));
  engine.run(4);
  for (int64_t i = 0; i < 4; ++i) {
    EXPECT_EQ(engine.dist()[i * 4 + 0], 0.0f);
    EXPECT_EQ(engine.dist()[i * 4 + 1], 0.0f);
    EXPECT_FLOAT_EQ(engine.dist()[i * 4 + 2], -0.5f);  // the policy's initial log_std
  }
}

TEST(Inference, RanksArePlacedPerHostAndActorsServedOnTheirOwn) {
  Config c = load_config("", {"actor.inference=\"central\""});
  // One host, 5 ranks: learner 0, replay 1, inference 2, actors 3-4.
  Layout one = make_layout(c, 5);
  EXPECT_TRUE(one.central());
  EXPECT_EQ(one.inference_ranks(), std::vector<int>{2});
  EXPECT_EQ(one.actors(), 2);
  EXPECT_EQ(one.actor_rank(0), 3);
  EXPECT_EQ(one.actor_index(4), 1);
  EXPECT_EQ(one.actor_index(2), -1);
  EXPECT_EQ(one.server_of(3), 2);
  EXPECT_EQ(one.served_by(2), (std::vector<int>{3, 4}));
  // Three hosts: n1 holds only the learner and the replay, n2 and n3 four ranks each.
  const std::vector<std::string> hosts = {"n1", "n1", "n2", "n2", "n2", "n2", "n3", "n3", "n3", "n3"};
  Layout three = make_layout(c, 10, hosts);
  EXPECT_EQ(three.inference_ranks(), (std::vector<int>{2, 6}));
  EXPECT_EQ(three.served_by(2), (std::vector<int>{3, 4, 5}));
  EXPECT_EQ(three.served_by(6), (std::vector<int>{7, 8, 9}));
  EXPECT_EQ(three.role_of(6), Role::Inference);
  // A host with a single rank after the learners keeps it as an actor, served by another host.
  const std::vector<std::string> small = {"n1", "n1", "n1", "n1", "n2"};
  Layout spill = make_layout(c, 5, small);
  EXPECT_EQ(spill.inference_ranks(), std::vector<int>{2});
  EXPECT_EQ(spill.server_of(4), 2);
  // Two per node: a host needs three ranks after the learners.
  Config two = load_config("", {"actor.inference=\"central\"", "roles.inference_per_node=2"});
  Layout l2 = make_layout(two, 6);
  EXPECT_EQ(l2.inference_ranks(), (std::vector<int>{2, 3}));
  EXPECT_EQ(l2.server_of(4), 2);
  EXPECT_EQ(l2.server_of(5), 3);
  try {
    make_layout(two, 4);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("inference_per_node"), std::string::npos) << e.what();
  }
  try {
    make_layout(c, 3);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("4 ranks"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("inference"), std::string::npos) << e.what();
  }
  // On the learners' hosts only (their GPUs): n1 holds the learner, the replay and 2 inference ranks;
  // every actor elsewhere is served by them in turn.
  Config gpu = load_config("", {"actor.inference=\"central\"", "roles.inference_per_node=2",
                                "roles.inference_hosts=\"learners\""});
  const std::vector<std::string> het = {"n1", "n1", "n1", "n1", "n2", "n2", "n3", "n3"};
  Layout lh = make_layout(gpu, 8, het);
  EXPECT_EQ(lh.inference_ranks(), (std::vector<int>{2, 3}));
  EXPECT_EQ(lh.actors(), 4);
  EXPECT_EQ(lh.served_by(2), (std::vector<int>{4, 6}));
  EXPECT_EQ(lh.served_by(3), (std::vector<int>{5, 7}));
  EXPECT_THROW(make_layout(gpu, 8, std::vector<std::string>{"n1", "n1", "n1", "n2", "n2", "n2", "n2", "n2"}), ConfigError);
  // Local inference: no inference rank, every rank after the replay an actor.
  Layout local = make_layout(load_config("", {}), 5);
  EXPECT_FALSE(local.central());
  EXPECT_EQ(local.actors(), 3);
  EXPECT_EQ(env_group(10, 3, 0).n + env_group(10, 3, 1).n + env_group(10, 3, 2).n, 10);
  EXPECT_EQ(env_group(10, 3, 2).first, 6);
}

TEST(Inference, MalformedRequestsAndRepliesNameTheSender) {
  const auto spec = spec_of({3}, true, 2);
  auto frame_of = [](wire::Envelope env, size_t payload) {
    std::vector<char> buf(wire::kHeaderRegion + payload, 0);
    wire::write_header(buf.data(), wire::kHeaderRegion, env);
    return buf;
  };
  wire::Envelope env;
  env.kind = wire::Kind::InferRequest;
  env.sender = 7;
  env.arrays = infer_request_arrays(spec, 4);
  auto ok = frame_of(env, wire::payload_bytes(env.arrays));
  const auto msg = wire::decode(ok.data(), ok.size(), 7);
  auto expect_error = [&](const std::function<void()>& f, const std::string& part) {
    try {
      f();
      FAIL() << "expected an error with '" << part << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  expect_error([&] { read_infer_request(msg, spec, 2, 3, 7); }, "rank 7");  // 4 rows, at most 3
  EXPECT_EQ(read_infer_request(msg, spec, 2, 4, 7).n, 4);
  auto bad = env;
  bad.arrays[0].dtype = wire::DType::U8;  // uint8 rows for a float32 spec
  auto f = frame_of(bad, wire::payload_bytes(bad.arrays));
  const auto m2 = wire::decode(f.data(), f.size(), 7);
  expect_error([&] { read_infer_request(m2, spec, 2, 4, 7); }, "expected 'obs' float32");
  // A group index beyond the run's groups.
  auto g = ok;
  std::vector<size_t> off;
  wire::payload_bytes(env.arrays, &off);
  int32_t group[2] = {5, 0};
  std::memcpy(g.data() + wire::kHeaderRegion + off[2], group, sizeof(group));
  const auto m3 = wire::decode(g.data(), g.size(), 7);
  expect_error([&] { read_infer_request(m3, spec, 2, 4, 7); }, "group 5");
  // A reply for another group than the one asked.
  wire::Envelope rep;
  rep.kind = wire::Kind::InferReply;
  rep.sender = 2;
  rep.arrays = infer_reply_arrays(spec, 4, 0);
  auto r = frame_of(rep, wire::payload_bytes(rep.arrays));
  const auto m4 = wire::decode(r.data(), r.size(), 2);
  expect_error([&] { read_infer_reply(m4, spec, 0, 1, 2, 4, 2); }, "asked for group 1");
  EXPECT_EQ(read_infer_reply(m4, spec, 0, 0, 0, 4, 2).n, 4);
}
