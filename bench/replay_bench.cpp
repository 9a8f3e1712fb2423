// Sum-tree and prioritized-selector operations per second on one core.
//   bench_replay_ops [--capacity 65536,1048576] [--seconds 1]
// An "op" is one update (set a random leaf to a random priority) or one sample (prefix search
// with a uniform draw); the loop alternates them. The sum-tree loop draws its inputs with a
// splitmix64 generator (a few cycles); the selector loop uses the selector's own mt19937_64 for
// sampling, as the replay does.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <chrono>
#include <random>

#include "buffer/selectors.h"
#include "buffer/sum_tree.h"

namespace b = mpirl::buffer;

namespace {
double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

struct SplitMix64 {
  uint64_t s;
  uint64_t operator()() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
};
}  // namespace

int main(int argc, char** argv) {
  CLI::App app("sum tree / prioritized selector ops per second (one thread)");
  std::vector<int64_t> caps{1 << 16, 1 << 20};
  double seconds = 1.0;
  app.add_option("--capacity", caps, "capacities")->delimiter(',');
  app.add_option("--seconds", seconds, "seconds per measurement");
  CLI11_PARSE(app, argc, argv);
  fmt::print("{:>10} | {:>16} | {:>20}\n", "capacity", "sum tree Mops/s", "prioritized Mops/s");
  for (int64_t cap : caps) {
    std::mt19937_64 rng(1);
    std::uniform_int_distribution<int64_t> slot(0, cap - 1);
    std::uniform_real_distribution<double> prio(0.01, 10.0), unit(0.0, 1.0);
    b::SumTree t(cap);
    for (int64_t i = 0; i < cap; ++i) t.set(i, prio(rng));
    int64_t ops = 0, sink = 0;
    SplitMix64 fast{7};
    double t0 = now(), dt = 0;
    while ((dt = now() - t0) < seconds) {
      for (int k = 0; k < 4096; ++k) {
        t.set(int64_t(fast() % uint64_t(cap)), 0.01 + double(fast() >> 11) * 0x1.0p-53 * 10);
        sink += t.find(double(fast() >> 11) * 0x1.0p-53 * t.total());
      }
      ops += 8192;
    }
    double tree = double(ops) / dt / 1e6;
    b::PrioritizedSelector s(cap, 0.6);
    for (int64_t i = 0; i < cap; ++i) s.insert(i, i, prio(rng));
    ops = 0;
    t0 = now();
    double p;
    while ((dt = now() - t0) < seconds) {
      for (int k = 0; k < 4096; ++k) {
        s.update(int64_t(rng() % uint64_t(cap)), 0.01 + double(rng() >> 11) * 0x1.0p-53 * 10);
        sink += s.sample(rng, &p);
      }
      ops += 8192;
    }
    double sel = double(ops) / dt / 1e6;
    fmt::print("{:>10} | {:>16.1f} | {:>20.1f}\n", cap, tree, sel);
    if (sink == 42) fmt::print(" ");
  }
  return 0;
}
