// Central inference (inference/) against local inference (models::Acting): the same parameters and
// observations give identical greedy actions and log-probabilities within 1e-6, for every encoder,
// every core and both action spaces, whatever the batch compositions the batcher forms (requests of
// several actors and groups, shuffled, batches capped), on the CPU path (Policy::act) and on the
// GPU path run on the CPU (Policy::step). A recurrent policy served centrally still satisfies
// "sequence mode equals step mode" across a rollout boundary from the state the actor records.
// The batcher's rules (full, capped, timeout; one request per group), the emulated accelerator,
// the placement of inference ranks and the request/reply checks.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "comm/inference_wire.h"
#include "comm/ranks.h"
#include "core/config.h"
#include "core/error.h"
#include "inference/batcher.h"
#include "inference/engine.h"
#include "models/acting.h"
#include "models/policy.h"
#include "models/sampler.h"

using namespace mpirl;
using namespace mpirl::inference;

namespace {

envs::EnvSpec spec_of(std::vector<int64_t> shape, bool discrete, int64_t n, bool uint8 = false) {
  envs::EnvSpec s;
  s.id = "test";
  s.obs_shape = std::move(shape);
  s.obs_uint8 = uint8;
  s.discrete = discrete;
  (discrete ? s.num_actions : s.action_dim) = n;
  return s;
}

// A actors x E envs over `steps` steps: observations [A, E, steps, obs...] and is_init [A, E, steps].
struct Episode {
  torch::Tensor obs, init;
};
Episode random_inputs(const envs::EnvSpec& spec, int64_t A, int64_t E, int64_t steps) {
  std::vector<int64_t> shape{A, E, steps};
  shape.insert(shape.end(), spec.obs_shape.begin(), spec.obs_shape.end());
  Episode ep;
  ep.obs = spec.obs_uint8 ? torch::randint(256, shape, torch::kUInt8) : torch::randn(shape);
  ep.init = (torch::rand({A, E, steps}) < 0.25).to(torch::kUInt8);
  ep.init.select(2, 0).fill_(1);
  return ep;
}

// Drives central inference as the server does: each step every (actor, group) asks, in a shuffled
// order; batches are run while due (or when every group has asked). Greedy sampling on the actor
// side (models::Sampler), compared with Acting per actor on all its envs at once.
void expect_central_equals_local(const envs::EnvSpec& spec, const models::ModelOptions& opts, bool step_path,
                                 int64_t max_batch_rows, const std::string& what, double tol = 1e-6) {
  SCOPED_TRACE(what + (step_path ? " (Policy::step path)" : " (Policy::act path)"));
  torch::manual_seed(5);
  const int64_t A = 3, E = 5, G = 2, steps = 7, L = spec.dist_size();
  models::Policy local(spec, opts);
  local->eval();
  std::vector<float> flat(size_t(models::num_params(local)));
  models::write_flat(local, flat.data());
  // The local actors: one Acting over all E envs each.
  std::vector<models::Acting> acting;
  for (int64_t a = 0; a < A; ++a) acting.emplace_back(local, E, 100 + uint64_t(a));
  EngineOptions eo;
  eo.step_path = step_path;
  Engine engine(spec, opts, A * E, eo);
  engine.load(flat.data());
  Batcher batcher(engine, int(A), int(E), int(G), max_batch_rows, 1.0);
  std::vector<models::Sampler> samplers;
  for (int64_t a = 0; a < A; ++a) samplers.emplace_back(spec, 200 + uint64_t(a));
  const Episode in = random_inputs(spec, A, E, steps);
  std::mt19937 rng(9);
  c10::InferenceMode guard;
  int64_t batches = 0, rows_in_largest = 0;
  for (int64_t t = 0; t < steps; ++t) {
    // Local: each actor's E envs at once.
    std::vector<float> ldist(size_t(A * E * L)), llogp(size_t(A * E));
    std::vector<int64_t> lact(size_t(A * E));
    for (int64_t a = 0; a < A; ++a) {
      auto o = in.obs.select(0, a).select(1, t).contiguous();
      auto i = in.init.select(0, a).select(1, t).contiguous();
      acting[size_t(a)].step(o, i.data_ptr<uint8_t>(), 1, {ldist.data() + a * E * L, L, llogp.data() + a * E, 1}, true);
      if (spec.discrete) std::memcpy(lact.data() + a * E, acting[size_t(a)].discrete_actions(), size_t(E) * 8);
    }
    // Central: requests per (actor, group), shuffled; copies of the rows they carry live here.
    std::vector<std::pair<int, int>> order;
    for (int a = 0; a < A; ++a)
      for (int g = 0; g < G; ++g) order.push_back({a, g});
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<torch::Tensor> keep;
    std::vector<float> cdist(size_t(A * E * L)), clogp(size_t(A * E));
    std::vector<int64_t> cact(size_t(A * E));
    std::vector<float> box(size_t(A * E * std::max<int64_t>(spec.action_dim, 1)));
    auto run_due = [&](bool force) {
      while (batcher.waiting() > 0 && (force || batcher.due(0.0))) {
        const auto& served = batcher.run_batch(0.0);
        ++batches;
        int64_t rows = 0;
        for (const auto& s : served) {
          rows += s.req.n;
          const int a = s.req.actor;
          const int64_t e0 = s.req.first;
          void* acts = spec.discrete ? static_cast<void*>(cact.data() + a * E + e0) : box.data() + (a * E + e0) * spec.action_dim;
          samplers[size_t(a)].rows(engine.dist() + s.row * L, L, s.req.n, acts,
                                   {cdist.data() + (a * E + e0) * L, L, clogp.data() + a * E + e0, 1}, true);
        }
        rows_in_largest = std::max(rows_in_largest, rows);
      }
    };
    for (auto [a, g] : order) {
      const EnvGroup eg = env_group(int(E), int(G), g);
      auto o = in.obs.select(0, a).select(1, t).narrow(0, eg.first, eg.n).contiguous();
      auto i = in.init.select(0, a).select(1, t).narrow(0, eg.first, eg.n).contiguous();
      keep.push_back(o);
      keep.push_back(i);
      Request r;
      r.actor = a;
      r.group = g;
      r.first = eg.first;
      r.n = eg.n;
      r.obs = static_cast<const char*>(o.data_ptr());
      r.is_init = i.data_ptr<uint8_t>();
      batcher.add(r);
      run_due(false);
    }
    run_due(true);
    // The same rows, log-probs and (greedy) actions; the same core states after the step.
    for (int64_t k = 0; k < A * E * L; ++k) ASSERT_NEAR(cdist[size_t(k)], ldist[size_t(k)], 10 * tol) << "t " << t;
    for (int64_t k = 0; k < A * E; ++k) ASSERT_NEAR(clogp[size_t(k)], llogp[size_t(k)], tol) << "t " << t << " row " << k;
    if (spec.discrete) {
      EXPECT_EQ(cact, lact) << "t " << t;
    }
    if (engine.state_size() > 0)
      for (int64_t a = 0; a < A; ++a) {
        auto st = acting[size_t(a)].state();
        for (int64_t e = 0; e < E; ++e)
          for (int64_t j = 0; j < engine.state_size(); ++j)
            ASSERT_NEAR(batcher.state_of(int(a), int(e))[j], st[e][j].item<float>(), 10 * tol) << "state t " << t;
      }
  }
  if (max_batch_rows > 0) {
    EXPECT_GT(batches, steps);  // several batches per step: the compositions varied
  }
  EXPECT_GT(rows_in_largest, E / G + 1);  // and some held the rows of several requests
}

}  // namespace

TEST(Inference, CentralEqualsLocalForEveryEncoderAndCore) {
  models::ModelOptions mlp;
  for (bool step_path : {false, true}) {
    // The Policy::step path is another computation (torch's linear, the cores' step): looser.
    const double tol = step_path ? 1e-5 : 1e-6;
    expect_central_equals_local(spec_of({7}, true, 4), mlp, step_path, 8, "discrete mlp", tol);
    expect_central_equals_local(spec_of({3}, false, 2), mlp, step_path, 0, "box mlp", tol);
    expect_central_equals_local(spec_of({2, 10, 10}, true, 5, true), mlp, step_path, 7, "uint8 images, impala cnn", tol);
    expect_central_equals_local(spec_of({4, 36, 36}, true, 6, true), mlp, step_path, 0, "uint8 images, nature cnn", tol);
    for (std::string core : {"gru", "lstm", "lru", "ssm", "mingru", "ffm"}) {
      models::ModelOptions rec = mlp;
      rec.core = core;
      rec.core_size = 16;
      rec.core_state = 8;
      expect_central_equals_local(spec_of({7}, true, 4), rec, step_path, 6, "core " + core, tol);
    }
  }
}

TEST(Inference, SequenceModeEqualsStepModeAcrossARolloutBoundary) {
  // An actor's view of a recurrent policy served centrally: state0 of each rollout is the state the
  // replies carried after the previous rollout's last step; the learner's unroll from it must give
  // the rows the actor recorded, over two rollouts with episodes starting anywhere.
  for (std::string core : {"gru", "lru", "ffm"}) {
    SCOPED_TRACE(core);
    torch::manual_seed(7);
    const auto spec = spec_of({5}, true, 3);
    models::ModelOptions opts;
    opts.core = core;
    opts.core_size = 16;
    opts.core_state = 8;
    const int64_t E = 4, T = 6, L = spec.dist_size();
    Engine engine(spec, opts, E, {});
    std::vector<float> flat(size_t(models::num_params(engine.policy())));
    models::write_flat(engine.policy(), flat.data());
    models::Policy learner(spec, opts);
    models::read_flat(learner, flat.data());
    Batcher batcher(engine, 1, int(E), 1, 0, 1.0);
    const int64_t S = engine.state_size();
    const Episode in = random_inputs(spec, 1, E, 2 * T);
    std::vector<float> mirror(size_t(E * S), 0.0f);  // the actor's copy of the states the replies carry
    torch::Tensor state0;
    for (int rollout = 0; rollout < 2; ++rollout) {
      state0 = torch::from_blob(mirror.data(), {E, S}).clone();
      auto recorded = torch::zeros({T, E, L});
      {
        c10::InferenceMode guard;
        for (int64_t t = 0; t < T; ++t) {
          const int64_t step = rollout * T + t;
          auto o = in.obs.select(0, 0).select(1, step).contiguous();
          auto i = in.init.select(0, 0).select(1, step).contiguous();
          Request r;
          r.n = E;
          r.obs = static_cast<const char*>(o.data_ptr());
          r.is_init = i.data_ptr<uint8_t>();
          batcher.add(r);
          const auto& served = batcher.run_batch(0.0);
          ASSERT_EQ(served.size(), 1u);
          std::memcpy(recorded[t].data_ptr<float>(), engine.dist(), size_t(E * L) * sizeof(float));
          std::memcpy(mirror.data(), batcher.state_of(0, 0), size_t(E * S) * sizeof(float));
        }
      }
      torch::NoGradGuard ng;
      auto obs = in.obs.select(0, 0).narrow(1, rollout * T, T).transpose(0, 1);             // [T, E, obs]
      auto init = in.init.select(0, 0).narrow(1, rollout * T, T).transpose(0, 1).to(torch::kFloat32);
      auto out = learner->unroll(obs, init, state0);
      EXPECT_LT((out.dist - recorded).abs().max().item<float>(), 1e-5) << "rollout " << rollout;
    }
    // The second rollout started from a state that was not zero (the boundary carried something).
    EXPECT_GT(state0.abs().max().item<float>(), 0.0f);
  }
}

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
