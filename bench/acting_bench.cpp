// The actor's per-step inference on image observations: models::Acting::step against the generic
// torch path it replaced (Policy::step with the value head, models::sample, models::log_prob), for
// the CNN encoders on uint8 pixels (nature_cnn on Atari's 4x84x84, impala_cnn on MinAtar-sized
// 4x10x10), E envs, one torch thread (as actor.threads = 1). Random pixels and no env, so the
// figure is the inference ceiling of one actor process. items_per_second is env steps per second.
// Usage: build/bench_acting [--benchmark_filter=nature] [--benchmark_min_time=2s]
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <torch/torch.h>

#include "envs/env.h"
#include "models/acting.h"
#include "models/policy.h"

using namespace mpirl;

namespace {

envs::EnvSpec image_spec(std::vector<int64_t> shape) {
  envs::EnvSpec s;
  s.id = "bench";
  s.obs_shape = std::move(shape);
  s.obs_uint8 = true;
  s.discrete = true;
  s.num_actions = 6;
  return s;
}

void bench(benchmark::State& st, bool generic, const std::string& encoder, std::vector<int64_t> shape, int64_t E) {
  torch::set_num_threads(1);
  const auto spec = image_spec(std::move(shape));
  models::ModelOptions opts;
  opts.encoder = encoder;
  models::Policy policy(spec, opts);
  const int64_t T = 8, D = spec.obs_size(), L = spec.dist_size();
  std::vector<int64_t> obs_shape{E, T + 1};
  obs_shape.insert(obs_shape.end(), spec.obs_shape.begin(), spec.obs_shape.end());
  auto obs = torch::randint(256, obs_shape, torch::kUInt8);
  std::vector<uint8_t> init(size_t(E * (T + 1)), 0);
  std::vector<float> dist(size_t(E * T * L)), logp(size_t(E * T));
  models::Acting acting(policy, E, 1);
  auto gen = at::detail::createCPUGenerator(1);
  torch::Tensor state;
  c10::InferenceMode inference;
  int64_t t = 0;
  for (auto _ : st) {
    auto o = models::obs_rows(spec, obs.data_ptr<uint8_t>() + t * D, E, (T + 1) * D);
    if (generic) {
      auto out = policy->step(o, torch::zeros({E}), state);
      auto a = models::sample(spec, out.dist, gen);
      torch::from_blob(logp.data() + t, {E}, {T}).copy_(models::log_prob(spec, out.dist, a));
      torch::from_blob(dist.data() + t * L, {E, L}, {T * L, 1}).copy_(out.dist);
      benchmark::DoNotOptimize(a.data_ptr<int64_t>());
    } else {
      acting.step(o, init.data() + t, T + 1, {dist.data() + t * L, T * L, logp.data() + t, T});
      benchmark::DoNotOptimize(acting.discrete_actions());
    }
    t = (t + 1) % T;
  }
  st.SetItemsProcessed(int64_t(st.iterations()) * E);
}

}  // namespace

int main(int argc, char** argv) {
  struct Case {
    std::string encoder;
    std::vector<int64_t> shape;
  };
  for (const Case& c : {Case{"nature_cnn", {4, 84, 84}}, Case{"impala_cnn", {4, 10, 10}}})
    for (int64_t E : {16, 64})
      for (bool generic : {true, false})
        benchmark::RegisterBenchmark(fmt::format("{}/E={}/{}", c.encoder, E, generic ? "generic" : "acting").c_str(),
                                     [=](benchmark::State& st) { bench(st, generic, c.encoder, c.shape, E); })
            ->Unit(benchmark::kMicrosecond);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
