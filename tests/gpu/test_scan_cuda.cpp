// CUDA linear_scan against the CPU kernel (fp32 and complex64, forward and reverse, odd T and N,
// outputs and gradients). A separate binary for GPU machines: configure with -DMPIRL_GPU_TESTS=ON
// and run `ctest -L gpu`; without a visible GPU it fails rather than passing vacuously.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "kernels/scan.h"

using namespace mpirl;

namespace {
bool close(const torch::Tensor& x, const torch::Tensor& ref, double tol) {
  auto diff = (x.cpu() - ref).abs();
  auto bound = tol * (1 + ref.abs());
  return (diff <= bound).all().item<bool>();
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
        auto run = [&](torch::Device dev) {
          auto A = a.to(dev).requires_grad_(true), Bv = b.to(dev).requires_grad_(true), H = h0.to(dev).requires_grad_(true);
          auto h = kernels::linear_scan(A, Bv, H, reverse);
          torch::real(w.to(dev).conj() * h).sum().backward();
          return std::vector<torch::Tensor>{h.detach().cpu(), A.grad().cpu(), Bv.grad().cpu(), H.grad().cpu()};
        };
        auto cpu = run(torch::kCPU), gpu = run(torch::kCUDA);
        const char* names[] = {"h", "dL/da", "dL/db", "dL/dh0"};
        for (int i = 0; i < 4; ++i)
          EXPECT_TRUE(close(gpu[size_t(i)], cpu[size_t(i)], 1e-5))
              << names[i] << " T=" << T << " N=" << N << " reverse=" << reverse << " " << c10::toString(st)
              << " max diff " << (gpu[size_t(i)] - cpu[size_t(i)]).abs().max().item<double>();
      }
    }
  }
}
