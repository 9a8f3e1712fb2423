// Central inference (inference/) against local inference (models::Acting): the same parameters and
// observations give identical greedy actions and log-probabilities within 1e-6, for every encoder,
// every core and both action spaces, whatever the batch compositions the batcher forms (requests of
// several actors and groups, shuffled, batches capped), on the CPU path (Policy::act) and on the
// GPU path run on the CPU (Policy::step). A recurrent policy served centrally still satisfies
// "sequence mode equals step mode" across a rollout boundary from the state the actor records.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "comm/inference_wire.h"
#include "inference/batcher.h"
#include "inference/engine.h"
#include "models/acting.h"
#include "models/policy.h"
#include "models/sampler.h"
#include "tests/common/inference_fixtures.h"

using namespace mpirl;
using namespace mpirl::inference;
using mpirl::testing::spec_of;

namespace {

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
    // R2D2's actor-computed priorities (ModelOptions::act_q): both paths give Q-value rows.
    models::ModelOptions q = mlp;
    q.act_q = true;
    expect_central_equals_local(spec_of({7}, true, 4), q, step_path, 8, "discrete mlp, Q rows", tol);
    q.core = "lru";
    q.core_size = 16;
    q.core_state = 8;
    expect_central_equals_local(spec_of({7}, true, 4), q, step_path, 6, "core lru, Q rows", tol);
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
