// The actor's step (models/acting.h) against the policy's own step and log_prob for every encoder
// and core kind, against hand-computed probabilities (sample frequencies, log-probs, the greedy
// mode), the cores' act step following fresh weights and a mid-rollout reset, and the MLP path,
// alone and with each core, allocating no tensor per step (counted by a CPU allocator that wraps
// the default one; the same counter sees the generic step path allocate).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <c10/core/CPUAllocator.h>

#include <atomic>
#include <cmath>

#include "envs/env.h"
#include "models/acting.h"
#include "models/policy.h"
#include "tests/common/inference_fixtures.h"

using namespace mpirl;
using namespace mpirl::models;

namespace {

using mpirl::testing::spec_of;

// Runs Acting and the reference (Policy::step + models::log_prob) side by side over `steps` steps
// of observations laid out as the actor's rollout ([E, T + 1, obs...], env-major).
void expect_matches_reference(const envs::EnvSpec& spec, const ModelOptions& opts, const std::string& what) {
  SCOPED_TRACE(what);
  torch::manual_seed(3);
  Policy policy(spec, opts);
  policy->eval();
  const int64_t E = 5, T = 6, D = spec.obs_size(), L = spec.dist_size();
  Acting acting(policy, E, 11);
  auto shape = std::vector<int64_t>{E, T + 1};
  shape.insert(shape.end(), spec.obs_shape.begin(), spec.obs_shape.end());
  auto obs = spec.obs_uint8 ? torch::randint(256, shape, torch::kUInt8) : torch::randn(shape);
  auto init = (torch::rand({E, T + 1}) < 0.3).to(torch::kUInt8);
  init.select(1, 0).fill_(1);
  std::vector<float> dist(size_t(E * T * L)), logp(size_t(E * T));
  torch::Tensor ref_state = policy->initial_state(E);
  torch::NoGradGuard g;
  for (int64_t t = 0; t < T; ++t) {
    auto obs_t = obs_rows(spec, static_cast<uint8_t*>(obs.data_ptr()) + t * spec.obs_bytes(), E, (T + 1) * D);
    acting.step(obs_t, init.data_ptr<uint8_t>() + t, T + 1, {dist.data() + t * L, T * L, logp.data() + t, T});
    auto ref = policy->step(obs_t, init.select(1, t).to(torch::kFloat32), ref_state);
    auto got_dist = torch::from_blob(dist.data() + t * L, {E, L}, {T * L, 1});
    EXPECT_LT((got_dist - ref.dist).abs().max().item<float>(), 1e-5) << "step " << t;
    torch::Tensor a = spec.discrete
                          ? torch::from_blob(const_cast<int64_t*>(acting.discrete_actions()), {E}, torch::kInt64)
                          : torch::from_blob(const_cast<float*>(acting.box_actions()), {E, spec.action_dim});
    if (spec.discrete) {  // in range
      EXPECT_GE(a.min().item<int64_t>(), 0);
      EXPECT_LT(a.max().item<int64_t>(), spec.num_actions);
    }
    auto want_logp = log_prob(spec, ref.dist, a);
    auto got_logp = torch::from_blob(logp.data() + t, {E}, {T});
    EXPECT_LT((got_logp - want_logp).abs().max().item<float>(), 1e-4) << "step " << t;
    if (policy->recurrent()) {
      EXPECT_LT((acting.state() - ref_state).abs().max().item<float>(), 1e-5) << "step " << t;
    }
  }
}

struct CountingAllocator final : c10::Allocator {
  c10::Allocator* base = nullptr;
  std::atomic<int64_t> count{0};
  c10::DataPtr allocate(size_t n) override {
    ++count;
    return base->allocate(n);
  }
  c10::DeleterFnPtr raw_deleter() const override { return base->raw_deleter(); }
  void copy_data(void* dest, const void* src, std::size_t n) const override { default_copy_data(dest, src, n); }
};

}  // namespace

TEST(Acting, MatchesThePolicysStepForEveryEncoderAndCore) {
  ModelOptions mlp;
  expect_matches_reference(spec_of({7}, true, 4), mlp, "discrete mlp tanh");
  ModelOptions relu = mlp;
  relu.activation = "relu";
  relu.hidden = {32, 16, 8};
  expect_matches_reference(spec_of({7}, false, 3), relu, "box mlp relu");
  ModelOptions none = mlp;
  none.hidden = {};
  expect_matches_reference(spec_of({7}, true, 3), none, "linear policy (no hidden layer)");
  expect_matches_reference(spec_of({2, 10, 10}, true, 5, true), mlp, "uint8 images, impala cnn");
  ModelOptions flat = mlp;
  flat.encoder = "mlp";
  expect_matches_reference(spec_of({2, 10, 10}, true, 5, true), flat, "uint8 images flattened into the mlp");
  for (std::string core : {"lru", "gru", "lstm", "ssm", "mingru", "ffm"}) {
    ModelOptions rec = mlp;
    rec.core = core;
    rec.core_size = 16;
    rec.core_state = 8;
    expect_matches_reference(spec_of({7}, true, 4), rec, "core " + core);
    rec.hidden = {};  // the core reads the observations straight from the strided rollout rows
    expect_matches_reference(spec_of({7}, false, 2), rec, "box, core " + core + " without an mlp");
  }
}

TEST(Acting, DiscreteSamplesFollowTheSoftmaxOfHandSetLogits) {
  Policy policy(spec_of({3}, true, 3), ModelOptions{});
  {
    torch::NoGradGuard g;
    for (auto& item : policy->named_parameters())
      if (item.key().rfind("pi.", 0) == 0) item.value().zero_();
    policy->named_parameters()["pi.bias"].copy_(torch::tensor({0.0, std::log(2.0), std::log(3.0)}));
  }
  const int64_t E = 1000, steps = 20;
  Acting acting(policy, E, 5);
  std::vector<float> obs(size_t(E * 3), 0.25f), dist(size_t(E * 3)), logp(static_cast<size_t>(E));
  std::vector<uint8_t> init(size_t(E), 0);
  std::vector<int64_t> counts(3, 0);
  const double want_logp[3] = {std::log(1.0 / 6), std::log(2.0 / 6), std::log(3.0 / 6)};
  for (int64_t s = 0; s < steps; ++s) {
    acting.step(torch::from_blob(obs.data(), {E, 3}), init.data(), 1, {dist.data(), 3, logp.data(), 1});
    for (int64_t e = 0; e < E; ++e) {
      const int64_t a = acting.discrete_actions()[e];
      ASSERT_TRUE(a >= 0 && a < 3);
      ++counts[size_t(a)];
      EXPECT_NEAR(logp[size_t(e)], want_logp[a], 1e-5);
    }
  }
  EXPECT_NEAR(dist[1], std::log(2.0), 1e-6);
  // 20000 draws: the standard error of each frequency is below 0.0036; 0.015 is over 4 of them.
  for (int a = 0; a < 3; ++a) EXPECT_NEAR(double(counts[size_t(a)]) / double(E * steps), (a + 1) / 6.0, 0.015) << a;
  acting.step(torch::from_blob(obs.data(), {E, 3}), init.data(), 1, {nullptr, 0, logp.data(), 1}, /*greedy=*/true);
  for (int64_t e = 0; e < E; ++e) ASSERT_EQ(acting.discrete_actions()[e], 2);
  EXPECT_NEAR(logp[0], std::log(0.5), 1e-6);
}

TEST(Acting, BoxSamplesHaveTheHeadsMeanAndStd) {
  Policy policy(spec_of({3}, false, 2), ModelOptions{});
  {
    torch::NoGradGuard g;
    auto params = policy->named_parameters();
    params["pi.weight"].zero_();
    params["pi.bias"].copy_(torch::tensor({0.5, -1.0}));
    params["log_std"].copy_(torch::tensor({-0.5, 0.2}));
  }
  const int64_t E = 4000;
  Acting acting(policy, E, 9);
  std::vector<float> obs(size_t(E * 3), 1.0f), dist(size_t(E * 4)), logp(static_cast<size_t>(E));
  std::vector<uint8_t> init(size_t(E), 0);
  acting.step(torch::from_blob(obs.data(), {E, 3}), init.data(), 1, {dist.data(), 4, logp.data(), 1});
  const double mean[2] = {0.5, -1.0}, log_std[2] = {-0.5, 0.2};
  for (int j = 0; j < 2; ++j) {
    double m = 0, v = 0;
    for (int64_t e = 0; e < E; ++e) m += acting.box_actions()[e * 2 + j];
    m /= double(E);
    for (int64_t e = 0; e < E; ++e) v += std::pow(acting.box_actions()[e * 2 + j] - m, 2);
    const double sd = std::exp(log_std[j]);
    EXPECT_NEAR(m, mean[j], 4 * sd / std::sqrt(double(E))) << j;  // 4 standard errors
    EXPECT_NEAR(std::sqrt(v / double(E - 1)), sd, 0.05 * sd) << j;
  }
  for (int64_t e = 0; e < 50; ++e) {  // the Gaussian log-density by hand, from the returned action
    double lp = 0;
    for (int j = 0; j < 2; ++j) {
      const double z = (acting.box_actions()[e * 2 + j] - mean[j]) / std::exp(log_std[j]);
      lp += -0.5 * z * z - log_std[j] - 0.5 * std::log(2 * M_PI);
    }
    EXPECT_NEAR(logp[size_t(e)], lp, 1e-4) << e;
    EXPECT_FLOAT_EQ(dist[size_t(e * 4 + 3)], 0.2f);
  }
}

namespace {

// Counts the CPU tensor allocations of T - 1 Acting steps (after a first one) and of the generic
// Policy::step path over the same observations, for one model.
std::pair<int64_t, int64_t> count_allocations(const ModelOptions& opts) {
  auto spec = spec_of({64}, true, 4);
  Policy policy(spec, opts);
  const int64_t E = 16, T = 32;
  Acting acting(policy, E, 1);
  auto obs = torch::randn({E, T + 1, 64});
  auto init = (torch::rand({E, T + 1}) < 0.2).to(torch::kUInt8);  // resets on the way
  std::vector<float> dist(size_t(E * T * 4)), logp(size_t(E * T));
  auto step = [&](int64_t t) {
    acting.step(obs_rows(spec, obs.data_ptr<float>() + t * 64, E, (T + 1) * 64), init.data_ptr<uint8_t>() + t, T + 1,
                {dist.data() + t * 4, T * 4, logp.data() + t, T});
  };
  c10::InferenceMode inference;  // as the actor rank
  step(0);
  CountingAllocator counter;
  counter.base = c10::GetCPUAllocator();
  constexpr uint8_t kPriority = 100;
  c10::SetCPUAllocator(&counter, kPriority);
  for (int64_t t = 1; t < T; ++t) step(t);
  const int64_t acting_allocs = counter.count.exchange(0);
  torch::Tensor state = policy->initial_state(E);  // the generic path: value head, new outputs each step
  for (int64_t t = 1; t < T; ++t)
    policy->step(obs_rows(spec, obs.data_ptr<float>() + t * 64, E, (T + 1) * 64), torch::zeros({E}), state);
  const int64_t generic_allocs = counter.count.load();
  c10::SetCPUAllocator(counter.base, kPriority);
  return {acting_allocs, generic_allocs};
}

}  // namespace

TEST(Acting, MlpStepAllocatesNoTensorWithOrWithoutACore) {
  for (std::string core : {"none", "lru", "gru", "lstm", "ssm", "mingru", "ffm"})
    for (bool mlp : {true, false}) {  // without the MLP the core reads the strided rollout rows
      if (core == "none" && !mlp) continue;
      SCOPED_TRACE(core + (mlp ? " after the mlp" : " on the observations"));
      ModelOptions opts;
      opts.core = core;
      opts.core_size = 32;
      opts.core_state = 16;
      if (!mlp) opts.hidden = {};
      const auto [acting_allocs, generic_allocs] = count_allocations(opts);
      EXPECT_EQ(acting_allocs, 0);
      EXPECT_GT(generic_allocs, 5 * 31);  // the counter does see allocations
    }
}

TEST(Acting, CoresFollowFreshWeightsAndAMidRolloutReset) {
  for (std::string core : {"lru", "gru", "lstm", "ssm", "mingru", "ffm"}) {
    SCOPED_TRACE(core);
    ModelOptions opts;
    opts.core = core;
    opts.core_size = 16;
    opts.core_state = 8;
    const auto spec = spec_of({7}, true, 4);
    torch::manual_seed(5);
    Policy policy(spec, opts);
    const int64_t E = 4, T = 6;
    Acting acting(policy, E, 3);
    torch::Tensor ref_state = policy->initial_state(E);
    std::vector<float> flat(size_t(num_params(policy))), dist(size_t(E * 4)), logp(static_cast<size_t>(E));
    torch::NoGradGuard g;
    for (int64_t t = 0; t < T; ++t) {
      if (t == 3) {  // new weights arrive as the actor's do: one flat buffer, read into the parameters
        write_flat(policy, flat.data());
        for (size_t i = 0; i < flat.size(); ++i) flat[i] += 0.2f * std::sin(float(i));
        read_flat(policy, flat.data());
      }
      auto obs = torch::randn({E, 7});
      auto init = torch::zeros({E}, torch::kUInt8);
      if (t == 0) init.fill_(1);
      if (t == 4) init[2] = 1;  // one env starts a new episode mid-rollout, with a nonzero state
      acting.step(obs, init.data_ptr<uint8_t>(), 1, {dist.data(), 4, logp.data(), 1});
      auto ref = policy->step(obs, init.to(torch::kFloat32), ref_state);
      EXPECT_LT((torch::from_blob(dist.data(), {E, 4}) - ref.dist).abs().max().item<float>(), 1e-5) << "step " << t;
      EXPECT_LT((acting.state() - ref_state).abs().max().item<float>(), 1e-5) << "step " << t;
    }
  }
}
