// linear_scan forward and forward+backward against (a) a LibTorch per-time-step loop of the same
// recurrence and (b) torch::nn::GRU over [T, B, C] (the cost of padded sequences of the same
// total size, padding itself not counted), with achieved bandwidth next to the device's measured
// copy bandwidth (out = in.clone() of a [T, B, C] float32 tensor), all measured in this run.
// Google Benchmark: one benchmark per (variant, T, B, C), for T in --T and (B, C) in
// {(8, 1536), (64, 256)}:
//   copy/T:../B:../C:..          in.clone()                        bytes: 2 arrays (read + write)
//   scan_fwd/...                 linear_scan_forward               bytes: 3 arrays
//   scan_fwd_bwd/...             forward + linear_scan_backward    bytes: 8 arrays
//   loop_fwd/..., loop_fwd_bwd/...  the per-step loop (autograd for backward), same byte counts
//   gru_fwd_bwd/...              torch::nn::GRU(C, C) forward + backward, counted as 8 arrays
//
//   bench_scan [--device cpu|cuda] [--T 64,256,1024,4096] [--gru-max-T N] [--threads N]
//              [--min-seconds S] [--benchmark_* flags, e.g. --benchmark_filter=scan_ --benchmark_format=json]
//
// Bytes counted (float32, arr = T * B * C * 4): forward reads a, b and writes h (3 arrays);
// backward reads a, h, dL/dh and writes dL/da, dL/db (5 arrays), so forward+backward moves 8
// arrays. The loop and the GRU are charged the bytes the scan must move for the same pass, so their
// GB/s are "scan-equivalent" rates: ratios of GB/s between variants are ratios of speed.
// Counters: bytes_per_second (SetBytesProcessed; the console shows it in binary units) and GB/s
// (decimal, the same rate); copy% = GB/s / copy's GB/s for the same [T, B, C] (copy runs first for
// each shape; absent if a filter skipped it); x_scan (loop and GRU) = time / the scan's time for
// the same pass and shape.
// Every iteration is timed by hand (UseManualTime): on CUDA the call is followed by
// torch::cuda::synchronize(), so the time is that of the kernels, not of their launch; on CPU the
// wall time (torch's intra-op threads make the main thread's CPU time meaningless).
// On CPU, glibc is told to keep freed memory (see main) so no variant pays page faults.
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <torch/torch.h>

#include <malloc.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/scan.h"

namespace kernels = mpirl::kernels;

namespace {

struct Settings {
  bool cuda = false;
  std::vector<int64_t> Ts{64, 256, 1024, 4096};
  int64_t gru_max_T = -1;  // default: 256 on CPU, all on CUDA
  int threads = 0;
  double min_seconds = 0;  // 0: Google Benchmark's default (--benchmark_min_time)
};

Settings g_settings;

std::vector<int64_t> parse_list(const std::string& s) {
  std::vector<int64_t> out;
  size_t p = 0;
  while (p < s.size()) {
    size_t q = s.find(',', p);
    out.push_back(std::stoll(s.substr(p, q == std::string::npos ? std::string::npos : q - p)));
    if (q == std::string::npos) break;
    p = q + 1;
  }
  return out;
}

// Takes our own flags (--name value or --name=value) out of argv, leaving benchmark's flags for
// benchmark::Initialize. Returns false (after a message) on a bad value.
bool parse_own_flags(int* argc, char** argv, Settings& s) {
  std::string device = "cpu";
  const std::vector<std::string> names{"--device", "--T", "--gru-max-T", "--threads", "--min-seconds"};
  int out = 1;
  for (int i = 1; i < *argc; ++i) {
    std::string arg = argv[i], name, value;
    bool ours = false;
    for (const auto& n : names) {
      if (arg == n) {
        if (i + 1 >= *argc) {
          fmt::print(stderr, "{} needs a value\n", n);
          return false;
        }
        name = n, value = argv[++i], ours = true;
      } else if (arg.rfind(n + "=", 0) == 0) {
        name = n, value = arg.substr(n.size() + 1), ours = true;
      }
      if (ours) break;
    }
    if (!ours) {
      argv[out++] = argv[i];
      continue;
    }
    try {
      if (name == "--device") device = value;
      if (name == "--T") s.Ts = parse_list(value);
      if (name == "--gru-max-T") s.gru_max_T = std::stoll(value);
      if (name == "--threads") s.threads = std::stoi(value);
      if (name == "--min-seconds") s.min_seconds = std::stod(value);
    } catch (const std::exception&) {
      fmt::print(stderr, "bad value for {}: '{}'\n", name, value);
      return false;
    }
  }
  *argc = out;
  argv[out] = nullptr;
  if (device != "cpu" && device != "cuda") {
    fmt::print(stderr, "--device must be cpu or cuda, got '{}'\n", device);
    return false;
  }
  s.cuda = device == "cuda";
  return true;
}

torch::TensorOptions float_options() {
  return torch::TensorOptions().dtype(torch::kFloat32).device(g_settings.cuda ? torch::kCUDA : torch::kCPU);
}

void sync() {
  if (g_settings.cuda) torch::cuda::synchronize();
}

using Shape = std::tuple<int64_t, int64_t, int64_t>;  // T, B, C

// The inputs of one shape, shared by every variant of it (they run one after another); a new
// shape frees the previous one's tensors first.
struct Inputs {
  Shape shape{-1, -1, -1};
  torch::Tensor a, b, gh;
};

const Inputs& inputs_for(const Shape& shape) {
  static Inputs in;
  if (in.shape != shape) {
    in = Inputs{};
    auto [T, B, C] = shape;
    auto opts = float_options();
    torch::NoGradGuard ng;
    // Decays in [0.49, 0.99), about 5% of them resets (0).
    in.a = (torch::rand({T, B, C}, opts) * 0.5 + 0.49) * (torch::rand({T, B, C}, opts) > 0.05).to(torch::kFloat32);
    in.b = torch::randn({T, B, C}, opts);
    in.gh = torch::randn({T, B, C}, opts);
    in.shape = shape;
    sync();
  }
  return in;
}

// Measured GB/s of each copy and seconds per call of each scan pass, for the ratio counters.
std::map<Shape, double> g_copy_gbs;
std::map<std::pair<std::string, Shape>, double> g_scan_seconds;  // key: ("fwd" | "fwd_bwd", shape)

// Runs f once to warm up, then once per iteration, timing each call (synchronised on CUDA), and
// sets the byte counters: `arrays` float32 arrays of the shape's size per call.
double run_timed(benchmark::State& state, const Shape& shape, double arrays, const std::function<void()>& f) {
  f();
  sync();
  double total = 0;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    sync();
    double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    state.SetIterationTime(dt);
    total += dt;
  }
  auto [T, B, C] = shape;
  const double bytes = arrays * double(T * B * C) * 4.0;
  state.SetBytesProcessed(int64_t(bytes * double(state.iterations())));
  const double seconds = state.iterations() ? total / double(state.iterations()) : 0;
  const double gbs = seconds > 0 ? bytes / seconds / 1e9 : 0;
  state.counters["GB/s"] = gbs;
  if (auto it = g_copy_gbs.find(shape); it != g_copy_gbs.end() && it->second > 0)
    state.counters["copy%"] = 100 * gbs / it->second;
  return seconds;
}

void set_x_scan(benchmark::State& state, const std::string& pass, const Shape& shape, double seconds) {
  if (auto it = g_scan_seconds.find({pass, shape}); it != g_scan_seconds.end() && it->second > 0)
    state.counters["x_scan"] = seconds / it->second;
}

void bm_copy(benchmark::State& state, Shape shape) {
  const auto& in = inputs_for(shape);
  torch::NoGradGuard ng;
  double s = run_timed(state, shape, 2, [&] { benchmark::DoNotOptimize(in.a.clone()); });
  state.counters.erase("copy%");  // itself, from its previous run
  auto [T, B, C] = shape;
  if (s > 0) g_copy_gbs[shape] = 2 * double(T * B * C) * 4.0 / s / 1e9;
}

void bm_scan(benchmark::State& state, Shape shape, bool backward) {
  const auto& in = inputs_for(shape);
  torch::NoGradGuard ng;
  double s;
  if (!backward) {
    s = run_timed(state, shape, 3,
                  [&] { benchmark::DoNotOptimize(kernels::linear_scan_forward(in.a, in.b, {}, false)); });
  } else {
    s = run_timed(state, shape, 8, [&] {
      auto h = kernels::linear_scan_forward(in.a, in.b, {}, false);
      benchmark::DoNotOptimize(kernels::linear_scan_backward(in.a, h, {}, in.gh, false));
    });
  }
  g_scan_seconds[{backward ? "fwd_bwd" : "fwd", shape}] = s;
}

// The per-step LibTorch loop, with autograd for forward+backward.
void bm_loop(benchmark::State& state, Shape shape, bool backward) {
  const auto& in = inputs_for(shape);
  auto [T, B, C] = shape;
  auto opts = float_options();
  auto loop = [&, T = T, B = B, C = C] {  // clang 14 cannot capture structured bindings by [&]
    torch::AutoGradMode g(backward);
    auto A = in.a.detach().requires_grad_(backward), Bv = in.b.detach().requires_grad_(backward);
    // unbind: one backward node for all steps (indexing A[t] would add a full-size gradient per
    // step and make the backward quadratic in T).
    auto As = A.unbind(0), Bs = Bv.unbind(0);
    std::vector<torch::Tensor> hs;
    hs.reserve(size_t(T));
    auto hcur = torch::zeros({B, C}, opts);
    for (int64_t t = 0; t < T; ++t) {
      hcur = As[size_t(t)] * hcur + Bs[size_t(t)];
      hs.push_back(hcur);
    }
    auto H = torch::stack(hs);
    if (backward) H.backward(in.gh);
    benchmark::DoNotOptimize(H);
  };
  double s = run_timed(state, shape, backward ? 8 : 3, loop);
  set_x_scan(state, backward ? "fwd_bwd" : "fwd", shape, s);
}

void bm_gru(benchmark::State& state, Shape shape) {
  const auto& in = inputs_for(shape);
  const int64_t C = std::get<2>(shape);
  torch::nn::GRU gru(torch::nn::GRUOptions(C, C));
  gru->to(float_options().device());
  double s = run_timed(state, shape, 8, [&] {
    torch::AutoGradMode g(true);
    auto x = in.b.detach().requires_grad_(true);
    auto out = std::get<0>(gru->forward(x));
    out.backward(in.gh);
  });
  set_x_scan(state, "fwd_bwd", shape, s);
}

void register_all() {
  const auto& s = g_settings;
  const int64_t gru_max_T = s.gru_max_T >= 0 ? s.gru_max_T : (s.cuda ? (int64_t(1) << 40) : 256);
  auto add = [&](const std::string& variant, Shape shape, auto fn) {
    auto [T, B, C] = shape;
    auto* b = benchmark::RegisterBenchmark(fmt::format("{}/T:{}/B:{}/C:{}", variant, T, B, C).c_str(), fn);
    b->UseManualTime()->Unit(benchmark::kMillisecond);
    if (s.min_seconds > 0) b->MinTime(s.min_seconds);
  };
  for (auto [B, C] : std::vector<std::pair<int64_t, int64_t>>{{8, 1536}, {64, 256}}) {
    for (int64_t T : s.Ts) {
      const Shape shape{T, B, C};
      add("copy", shape, [shape](benchmark::State& st) { bm_copy(st, shape); });
      add("scan_fwd", shape, [shape](benchmark::State& st) { bm_scan(st, shape, false); });
      add("scan_fwd_bwd", shape, [shape](benchmark::State& st) { bm_scan(st, shape, true); });
      add("loop_fwd", shape, [shape](benchmark::State& st) { bm_loop(st, shape, false); });
      add("loop_fwd_bwd", shape, [shape](benchmark::State& st) { bm_loop(st, shape, true); });
      if (T <= gru_max_T) add("gru_fwd_bwd", shape, [shape](benchmark::State& st) { bm_gru(st, shape); });
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (!parse_own_flags(&argc, argv, g_settings)) return 2;
  if (g_settings.cuda && !torch::cuda::is_available()) {
    fmt::print(stderr, "--device cuda but no CUDA device is visible\n");
    return 2;
  }
  if (g_settings.threads > 0) torch::set_num_threads(g_settings.threads);
  // Keep freed blocks in the heap so large CPU tensors are not page-faulted in again on every
  // call (glibc maps allocations over 32 MB fresh each time); applies to every variant alike.
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::AddCustomContext("device", g_settings.cuda ? "cuda" : "cpu");
  benchmark::AddCustomContext("torch_threads", std::to_string(torch::get_num_threads()));
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
