// Sum-tree and prioritized-selector operations on one core (Google Benchmark).
//   bench_replay_ops [--benchmark_filter=SumTree] [--benchmark_min_time=1] [--benchmark_format=json]
// An "op" is one update (set a random leaf to a random priority) or one sample (prefix search
// with a uniform draw); each benchmark alternates them, kPairs pairs per iteration, and reports
// items_per_second = ops per second. The arguments are capacities. The sum-tree loop draws its
// inputs with a seeded splitmix64 generator (a few cycles); the selector loop uses one seeded
// mt19937_64, for its inputs and for sampling, as the replay does. Every run of a benchmark
// starts from the same seeded tree.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>

#include "buffer/selectors.h"
#include "buffer/sum_tree.h"

namespace b = mpirl::buffer;

namespace {

constexpr int kPairs = 4096;  // update + sample pairs per benchmark iteration

struct SplitMix64 {
  uint64_t s;
  uint64_t operator()() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
};

double unit(uint64_t r) { return double(r >> 11) * 0x1.0p-53; }  // 53 random bits -> [0, 1)

void BM_SumTreeUpdateSample(benchmark::State& state) {
  const int64_t cap = state.range(0);
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> prio(0.01, 10.0);
  b::SumTree t(cap);
  for (int64_t i = 0; i < cap; ++i) t.set(i, prio(rng));
  SplitMix64 fast{7};
  int64_t sink = 0;
  for (auto _ : state) {
    for (int k = 0; k < kPairs; ++k) {
      t.set(int64_t(fast() % uint64_t(cap)), 0.01 + unit(fast()) * 10);
      sink += t.find(unit(fast()) * t.total());
    }
    benchmark::DoNotOptimize(sink);
  }
  state.SetItemsProcessed(state.iterations() * 2 * kPairs);
}

void BM_PrioritizedSelectorUpdateSample(benchmark::State& state) {
  const int64_t cap = state.range(0);
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> prio(0.01, 10.0);
  b::PrioritizedSelector s(cap, 0.6);
  for (int64_t i = 0; i < cap; ++i) s.insert(i, i, prio(rng));
  int64_t sink = 0;
  double p = 0;
  for (auto _ : state) {
    for (int k = 0; k < kPairs; ++k) {
      s.update(int64_t(rng() % uint64_t(cap)), 0.01 + unit(rng()) * 10);
      sink += s.sample(rng, &p);
    }
    benchmark::DoNotOptimize(sink);
    benchmark::DoNotOptimize(p);
  }
  state.SetItemsProcessed(state.iterations() * 2 * kPairs);
}

}  // namespace

BENCHMARK(BM_SumTreeUpdateSample)->Arg(1 << 12)->Arg(1 << 16)->Arg(1 << 20);
BENCHMARK(BM_PrioritizedSelectorUpdateSample)->Arg(1 << 12)->Arg(1 << 16)->Arg(1 << 20);

BENCHMARK_MAIN();
