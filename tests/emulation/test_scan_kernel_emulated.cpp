// The CUDA scan kernel (kernels/cuda/scan_kernel.cuh), compiled as host C++ and run with one
// std::thread per CUDA thread (tests/emulation/cuda_emulation.h), through the launcher's own
// argument mapping (kernels/cuda/scan_launch.h): outputs and gradients against a naive
// double-precision loop and against the CPU kernel, for fp32/fp64/complex64/complex128, forward
// and reverse, with and without h0, T and N crossing tile (kWarps x kSteps = 128 steps) and block
// (32 channels) boundaries. No GPU needed; it checks the kernel's indexing, its tiling and its
// synchronisation, not the GPU's arithmetic or memory model.
// Without torch (for ThreadSanitizer): g++ -std=c++20 -I. -fsanitize=thread
//   tests/emulation/test_scan_kernel_emulated.cpp -lgtest -lgtest_main -pthread
#include "tests/emulation/cuda_emulation.h"
// (the emulation's definitions come first)
#include "kernels/cuda/scan_kernel.cuh"

#include <gtest/gtest.h>

#include <algorithm>
#include <complex>
#include <random>
#include <vector>

#ifdef MPIRL_EMULATION_WITH_CPU_KERNEL
#include "kernels/cpu/scan_cpu.h"
#endif

using namespace mpirl::kernels;
using Z = std::complex<double>;

namespace {

template <typename S>
struct Traits;
template <>
struct Traits<float> {
  static constexpr ScanDType dtype = ScanDType::F32;
  static constexpr double tol = 2e-5;
  static float make(Z z) { return float(z.real()); }
  static Z wide(float s) { return s; }
  static constexpr bool complex = false;
};
template <>
struct Traits<double> {
  static constexpr ScanDType dtype = ScanDType::F64;
  static constexpr double tol = 1e-12;
  static double make(Z z) { return z.real(); }
  static Z wide(double s) { return s; }
  static constexpr bool complex = false;
};
template <typename R>
struct CxTraits {
  static Cx<R> make(Z z) { return {R(z.real()), R(z.imag())}; }
  static Z wide(Cx<R> s) { return {double(s.re), double(s.im)}; }
  static constexpr bool complex = true;
};
template <>
struct Traits<Cx<float>> : CxTraits<float> {
  static constexpr ScanDType dtype = ScanDType::C64;
  static constexpr double tol = 2e-5;
};
template <>
struct Traits<Cx<double>> : CxTraits<double> {
  static constexpr ScanDType dtype = ScanDType::C128;
  static constexpr double tol = 1e-12;
};

// One problem: inputs drawn at random (decays in [0.35, 0.95], one in five reset to 0, random
// phases for complex types), the naive reference in double precision.
template <typename S>
struct Problem {
  int64_t T, N;
  bool reverse, with_h0;
  std::vector<S> a, b, h0, gh;
  std::vector<Z> ref_h, ref_ga, ref_gb;

  Problem(int64_t T_, int64_t N_, bool rev, bool h0_, uint32_t seed) : T(T_), N(N_), reverse(rev), with_h0(h0_) {
    std::mt19937 g(seed);
    std::uniform_real_distribution<double> u(0, 1);
    std::normal_distribution<double> n(0, 1);
    auto draw = [&] { return Traits<S>::complex ? Z(n(g), n(g)) : Z(n(g)); };
    for (int64_t i = 0; i < T * N; ++i) {
      const double mag = u(g) < 0.2 ? 0.0 : 0.35 + 0.6 * u(g);
      a.push_back(Traits<S>::make(Traits<S>::complex ? std::polar(mag, 6.28 * u(g)) : Z(mag)));
      b.push_back(Traits<S>::make(draw()));
      gh.push_back(Traits<S>::make(draw()));
    }
    for (int64_t j = 0; j < N; ++j) h0.push_back(Traits<S>::make(draw()));
    reference();
  }
  Z A(int64_t t, int64_t j) const { return Traits<S>::wide(a[size_t(t * N + j)]); }
  Z H0(int64_t j) const { return with_h0 ? Traits<S>::wide(h0[size_t(j)]) : Z(0); }

  // h_t = a_t h_prev + b_t; g_t = dL/dh_t + conj(a_next) g_next; dL/db = g; dL/da = g conj(h_prev).
  void reference() {
    ref_h.assign(size_t(T * N), 0);
    ref_ga = ref_gb = ref_h;
    auto time = [&](int64_t s) { return reverse ? T - 1 - s : s; };
    for (int64_t j = 0; j < N; ++j) {
      Z h = H0(j);
      for (int64_t s = 0; s < T; ++s) {
        const int64_t t = time(s);
        h = A(t, j) * h + Traits<S>::wide(b[size_t(t * N + j)]);
        ref_h[size_t(t * N + j)] = h;
      }
      Z g = 0;
      for (int64_t s = T - 1; s >= 0; --s) {
        const int64_t t = time(s);
        g = Traits<S>::wide(gh[size_t(t * N + j)]) + (s < T - 1 ? std::conj(A(time(s + 1), j)) * g : Z(0));
        const Z hp = s > 0 ? ref_h[size_t(time(s - 1) * N + j)] : H0(j);
        ref_gb[size_t(t * N + j)] = g;
        ref_ga[size_t(t * N + j)] = g * std::conj(hp);
      }
    }
  }
};

template <typename S>
std::vector<Z> widen(const std::vector<S>& x) {
  std::vector<Z> w;
  for (const S& s : x) w.push_back(Traits<S>::wide(s));
  return w;
}

struct Outputs {
  std::vector<Z> h, ga, gb;
};

// The parameters of both passes over `p`, writing into h, ga, gb (as the binding fills them).
template <typename S>
std::pair<ScanForwardParams, ScanBackwardParams> passes(const Problem<S>& p, std::vector<S>& h, std::vector<S>& ga,
                                                        std::vector<S>& gb) {
  ScanForwardParams f;
  f.T = p.T, f.N = p.N, f.dtype = Traits<S>::dtype, f.reverse = p.reverse;
  f.a = p.a.data(), f.b = p.b.data(), f.h0 = p.with_h0 ? p.h0.data() : nullptr, f.h = h.data();
  ScanBackwardParams bw;
  bw.T = p.T, bw.N = p.N, bw.dtype = Traits<S>::dtype, bw.reverse = p.reverse;
  bw.a = p.a.data(), bw.h = h.data(), bw.h0 = f.h0, bw.grad_h = p.gh.data(), bw.grad_a = ga.data(), bw.grad_b = gb.data();
  return {f, bw};
}

// The forward and backward passes as the launcher runs them, emulated.
template <typename S>
Outputs run_emulated(const Problem<S>& p) {
  std::vector<S> h(p.a.size()), ga(p.a.size()), gb(p.a.size());
  auto [f, bw] = passes(p, h, ga, gb);
  const cuda::LaunchShape shape = cuda::launch_shape(p.N);
  const cuda::ScanKernelArgs fa = cuda::forward_args(f), ba = cuda::backward_args(bw);
  mpirl::emulation::launch(shape.grid_x, shape.block_x, shape.block_y, [&] { cuda::scan_kernel<S, false>(fa); });
  mpirl::emulation::launch(shape.grid_x, shape.block_x, shape.block_y, [&] { cuda::scan_kernel<S, true>(ba); });
  return {widen(h), widen(ga), widen(gb)};
}

#ifdef MPIRL_EMULATION_WITH_CPU_KERNEL
template <typename S>
Outputs run_cpu(const Problem<S>& p) {
  std::vector<S> h(p.a.size()), ga(p.a.size()), gb(p.a.size());
  auto [f, bw] = passes(p, h, ga, gb);
  cpu::scan_forward(f);
  cpu::scan_backward(bw);
  return {widen(h), widen(ga), widen(gb)};
}
#endif

// Largest |x - ref| / (1 + |ref|).
double error(const std::vector<Z>& x, const std::vector<Z>& ref) {
  double e = 0;
  for (size_t i = 0; i < ref.size(); ++i) e = std::max(e, std::abs(x[i] - ref[i]) / (1 + std::abs(ref[i])));
  return e;
}

template <typename S>
class EmulatedScanKernel : public ::testing::Test {};
using Types = ::testing::Types<float, double, Cx<float>, Cx<double>>;
TYPED_TEST_SUITE(EmulatedScanKernel, Types);

TYPED_TEST(EmulatedScanKernel, MatchesNaiveLoopAndCpuKernel) {
  using S = TypeParam;
  static_assert(cuda::kWarps * cuda::kSteps == 128 && cuda::kLanes == 32, "the shapes below assume these tiles");
  // T: one step, inside a tile, exactly one tile, one past it, several tiles with a ragged end.
  // N: one channel, a full block, one past it, three ragged blocks.
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{1, 1}, {7, 33}, {128, 32}, {129, 70}, {300, 5}};
  uint32_t seed = 1;
  for (auto [T, N] : shapes)
    for (bool reverse : {false, true})
      for (bool with_h0 : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "T=" << T << " N=" << N << " reverse=" << reverse << " h0=" << with_h0);
        Problem<S> p(T, N, reverse, with_h0, seed++);
        const Outputs e = run_emulated(p);
        const double tol = Traits<S>::tol;
        EXPECT_LE(error(e.h, p.ref_h), tol) << "h";
        EXPECT_LE(error(e.gb, p.ref_gb), tol) << "dL/db";
        EXPECT_LE(error(e.ga, p.ref_ga), tol) << "dL/da";
#ifdef MPIRL_EMULATION_WITH_CPU_KERNEL
        const Outputs c = run_cpu(p);
        EXPECT_LE(error(e.h, c.h), tol) << "h vs the CPU kernel";
        EXPECT_LE(error(e.gb, c.gb), tol) << "dL/db vs the CPU kernel";
        EXPECT_LE(error(e.ga, c.ga), tol) << "dL/da vs the CPU kernel";
#endif
      }
}

TEST(EmulatedScanKernel, LaunchMappingCoversEveryChannel) {
  for (int64_t N : {1, 31, 32, 33, 64, 65, 1000}) {
    const auto s = cuda::launch_shape(N);
    EXPECT_GE(int64_t(s.grid_x) * s.block_x, N);
    EXPECT_LT(int64_t(s.grid_x - 1) * s.block_x, N) << "no block without a channel";
    EXPECT_EQ(s.block_x, unsigned(cuda::kLanes));
    EXPECT_EQ(s.block_y, unsigned(cuda::kWarps));
  }
  ScanBackwardParams b;
  b.reverse = false;
  EXPECT_TRUE(cuda::backward_args(b).reverse) << "the backward pass runs against the forward direction";
}

}  // namespace
