// CUDA linear_scan against the CPU kernel (fp32 and complex64, forward and reverse, odd T and N,
// outputs and gradients), both measured against the ATen reference scan in float64: the CUDA error may not exceed
// a small multiple of the CPU kernel's own (summation orders differ, so fp32 vs fp32 at a fixed
// 1e-5 would test the order, not the kernel). A separate binary for GPU machines: configure with
// -DMPIRL_GPU_TESTS=ON and run `ctest -L gpu`; without a visible GPU it fails rather than passing
// vacuously.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "kernels/scan.h"

using namespace mpirl;

namespace {
// Largest error relative to (1 + |reference|), on the CPU in double precision.
double rel_error(const torch::Tensor& x, const torch::Tensor& ref) {
  auto r = ref.cpu().to(ref.is_complex() ? torch::kComplexDouble : torch::kFloat64);
  return ((x.cpu().to(r.scalar_type()) - r).abs() / (1 + r.abs())).max().item<double>();
}
}  // namespace

TEST(ScanCuda, MatchesCpuOutputsAndGradients) {
  ASSERT_TRUE(torch::cuda::is_available()) << "no CUDA device visible: run the GPU tests on a GPU machine";
  torch::manual_seed(5);
  for (auto st : {torch::kFloat32, torch::kComplexFloat}) {
    for (bool reverse : {false, true}) {
      for (auto [T, N] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {7, 33}, {128, 64}, {1000, 5}, {4097, 1536 * 8}}) {
        auto mag = torch::rand({T, N}) * 0.6 + 0.35;
        auto keep = (torch::rand({T, N}) > 0.1).to(torch::kFloat32);
        torch::Tensor a, b, h0, w;
        if (st == torch::kFloat32) {
          a = mag * keep;
          b = torch::randn({T, N});
          h0 = torch::randn({N});
          w = torch::randn({T, N});
        } else {
          a = torch::polar(mag * keep, torch::rand({T, N}) * 6.28);
          b = torch::complex(torch::randn({T, N}), torch::randn({T, N}));
          h0 = torch::complex(torch::randn({N}), torch::randn({N}));
          w = torch::complex(torch::randn({T, N}), torch::randn({T, N}));
        }
        // Fresh leaves per run: a.to(kCPU) is `a` itself, so requires_grad_ on it would make the
        // CUDA copies non-leaves (undefined .grad()) and mix both runs' gradients.
        // The oracle: the ATen reference scan (autograd through ATen's own derivatives) in float64.
        auto run = [&](torch::Device dev, torch::ScalarType type, bool aten = false) {
          auto leaf = [&](const torch::Tensor& t) { return t.detach().to(dev, type).clone().requires_grad_(true); };
          auto A = leaf(a), Bv = leaf(b), H = leaf(h0);
          auto h = aten ? kernels::linear_scan_aten(A, Bv, H, reverse) : kernels::linear_scan_native(A, Bv, H, reverse);
          torch::real(w.to(dev, type).conj() * h).sum().backward();
          return std::vector<torch::Tensor>{h.detach().cpu(), A.grad().cpu(), Bv.grad().cpu(), H.grad().cpu()};
        };
        const auto wide = st == torch::kFloat32 ? torch::kFloat64 : torch::kComplexDouble;
        auto ref = run(torch::kCPU, wide, /*aten=*/true), cpu = run(torch::kCPU, st), gpu = run(torch::kCUDA, st);
        const char* names[] = {"h", "dL/da", "dL/db", "dL/dh0"};
        for (int i = 0; i < 4; ++i) {
          const double e_cpu = rel_error(cpu[size_t(i)], ref[size_t(i)]);
          const double e_gpu = rel_error(gpu[size_t(i)], ref[size_t(i)]);
          EXPECT_LE(e_gpu, 4 * e_cpu + 1e-6)
              << names[i] << " T=" << T << " N=" << N << " reverse=" << reverse << " " << c10::toString(st)
              << ": CUDA error " << e_gpu << ", CPU error " << e_cpu << " (against float64)";
        }
      }
    }
  }
}
