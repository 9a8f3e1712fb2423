// linear_scan forward and forward+backward against (a) a LibTorch per-time-step loop of the same
// recurrence and (b) torch::nn::GRU over [T, B, C] (the cost of padded sequences of the same
// total size, padding itself not counted), with achieved bandwidth next to the device's measured
// copy bandwidth (out = in.clone() of a [T, B, C] float32 tensor), all measured in this run.
//
//   bench_scan [--device cpu|cuda] [--T 64,256,1024,4096] [--gru-max-T N] [--min-seconds S]
//
// On CPU, glibc is told to keep freed memory (see main) so no variant pays page faults.
// Bytes counted (float32): forward reads a, b and writes h (3 arrays); backward reads a, h, dL/dh
// and writes dL/da, dL/db (5 arrays), so forward+backward moves 8 arrays.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <torch/torch.h>

#include <malloc.h>

#include <chrono>
#include <functional>

#include "kernels/scan.h"

namespace kernels = mpirl::kernels;

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Seconds per call: warm-up, then repeat until min_seconds have passed (at least 3 calls).
double time_it(const std::function<void()>& f, bool cuda, double min_seconds) {
  auto sync = [&] {
    if (cuda) torch::cuda::synchronize();
  };
  f();
  f();
  sync();
  int n = 0;
  double t0 = now(), dt = 0;
  do {
    f();
    ++n;
    sync();
    dt = now() - t0;
  } while (dt < min_seconds || n < 3);
  return dt / n;
}

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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("linear_scan benchmark");
  std::string device = "cpu", Ts = "64,256,1024,4096";
  int64_t gru_max_T = -1;
  double min_s = 0.3;
  int threads = 0;
  app.add_option("--device", device, "cpu or cuda");
  app.add_option("--T", Ts, "sequence lengths");
  app.add_option("--gru-max-T", gru_max_T, "longest T for the GRU baseline (default: 256 on CPU, all on CUDA)");
  app.add_option("--min-seconds", min_s, "minimum timed seconds per measurement");
  app.add_option("--threads", threads, "torch intra-op threads on CPU (default: torch's)");
  CLI11_PARSE(app, argc, argv);
  const bool cuda = device == "cuda";
  if (cuda && !torch::cuda::is_available()) {
    fmt::print(stderr, "--device cuda but no CUDA device is visible\n");
    return 2;
  }
  if (threads > 0) torch::set_num_threads(threads);
  // Keep freed blocks in the heap so large CPU tensors are not page-faulted in again on every
  // call (glibc maps allocations over 32 MB fresh each time); applies to every variant alike.
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  if (gru_max_T < 0) gru_max_T = cuda ? (1 << 30) : 256;
  torch::NoGradGuard outer_ng;
  auto opts = torch::TensorOptions().dtype(torch::kFloat32).device(cuda ? torch::kCUDA : torch::kCPU);
  fmt::print("device {} ({} threads); times in ms per call; GB/s over the bytes the scan must move\n",
             cuda ? "cuda" : "cpu", torch::get_num_threads());
  fmt::print("{:>5} {:>3} {:>5} | {:>9} {:>9} | {:>9} {:>9} | {:>9} {:>7} | {:>9} {:>7} | {:>9} {:>7} | {:>8} {:>6} {:>6}\n",
             "T", "B", "C", "scan fwd", "scan f+b", "loop fwd", "loop f+b", "GRU f+b", "vs GRU", "fwd GB/s", "vs loop",
             "f+b GB/s", "vs loop", "copyGB/s", "fwd%", "f+b%");
  for (auto shape : std::vector<std::pair<int64_t, int64_t>>{{8, 1536}, {64, 256}}) {
    for (int64_t T : parse_list(Ts)) {
      const int64_t B = shape.first, C = shape.second;
      const double arr = double(T * B * C) * 4.0;
      auto a = (torch::rand({T, B, C}, opts) * 0.5 + 0.49) * (torch::rand({T, B, C}, opts) > 0.05).to(torch::kFloat32);
      auto b = torch::randn({T, B, C}, opts);
      auto gh = torch::randn({T, B, C}, opts);
      // Device copy bandwidth on the same size (read + write).
      double t_copy = time_it([&] { auto c = a.clone(); }, cuda, min_s);
      double copy_gbs = 2 * arr / t_copy / 1e9;
      double t_fwd = time_it([&] { kernels::linear_scan_forward(a, b, {}, false); }, cuda, min_s);
      double t_fb = time_it(
          [&] {
            auto hh = kernels::linear_scan_forward(a, b, {}, false);
            kernels::linear_scan_backward(a, hh, {}, gh, false);
          },
          cuda, min_s);
      // The per-step LibTorch loop, with autograd for forward+backward.
      auto loop = [&](bool grad) {
        torch::AutoGradMode g(grad);
        auto A = a.detach().requires_grad_(grad), Bv = b.detach().requires_grad_(grad);
        // unbind: one backward node for all steps (indexing A[t] would add a full-size gradient
        // per step and make the backward quadratic in T).
        auto As = A.unbind(0), Bs = Bv.unbind(0);
        std::vector<torch::Tensor> hs;
        hs.reserve(size_t(T));
        auto hcur = torch::zeros({B, C}, opts);
        for (int64_t t = 0; t < T; ++t) {
          hcur = As[size_t(t)] * hcur + Bs[size_t(t)];
          hs.push_back(hcur);
        }
        auto H = torch::stack(hs);
        if (grad) H.backward(gh);
      };
      double l_fwd = time_it([&] { loop(false); }, cuda, min_s);
      double l_fb = time_it([&] { loop(true); }, cuda, min_s);
      std::string gru_s = "-", gru_x = "-";
      if (T <= gru_max_T) {
        torch::nn::GRU gru(torch::nn::GRUOptions(C, C));
        gru->to(opts.device());
        double t_gru = time_it(
            [&] {
              torch::AutoGradMode g(true);
              auto x = b.detach().requires_grad_(true);
              auto out = std::get<0>(gru->forward(x));
              out.backward(gh);
            },
            cuda, min_s);
        gru_s = fmt::format("{:.2f}", t_gru * 1e3);
        gru_x = fmt::format("{:.0f}x", t_gru / t_fb);
      }
      double fwd_gbs = 3 * arr / t_fwd / 1e9, fb_gbs = 8 * arr / t_fb / 1e9;
      fmt::print(
          "{:>5} {:>3} {:>5} | {:>9.3f} {:>9.3f} | {:>9.2f} {:>9.2f} | {:>9} {:>7} | {:>9.1f} {:>6.0f}x | {:>9.1f} "
          "{:>6.0f}x | {:>8.1f} {:>5.0f}% {:>5.0f}%\n",
          T, B, C, t_fwd * 1e3, t_fb * 1e3, l_fwd * 1e3, l_fb * 1e3, gru_s, gru_x, fwd_gbs, l_fwd / t_fwd, fb_gbs,
          l_fb / t_fb, copy_gbs, 100 * fwd_gbs / copy_gbs, 100 * fb_gbs / copy_gbs);
      std::fflush(stdout);
    }
  }
  return 0;
}
