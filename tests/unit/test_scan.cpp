// linear_scan against a naive loop and finite differences (fp64, real and complex, forward and
// reverse, random resets), plus GAE / discounted returns against naive loops and hand values.
#include <gtest/gtest.h>
#include <torch/csrc/autograd/function.h>
#include <torch/torch.h>

#include <set>

#include "kernels/returns.h"
#include "kernels/scan.h"

using namespace mpirl;

namespace {

// h_t = a_t h_{t-1} + b_t one element at a time, in the given direction.
torch::Tensor naive_scan(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& h0, bool reverse) {
  const int64_t T = a.size(0);
  auto h = torch::zeros_like(b);
  auto prev = h0.clone();
  for (int64_t s = 0; s < T; ++s) {
    int64_t t = reverse ? T - 1 - s : s;
    prev = a[t] * prev + b[t];
    h[t] = prev;
  }
  return h;
}

// Random decays with about 1 in 5 entries reset to 0 (an episode start).
torch::Tensor random_a(std::vector<int64_t> shape, torch::ScalarType st, torch::Generator& g) {
  auto opts = torch::TensorOptions().dtype(torch::kFloat64);
  auto mag = torch::rand(shape, g, opts) * 0.6 + 0.35;
  auto keep = (torch::rand(shape, g, opts) > 0.2).to(torch::kFloat64);
  if (st == torch::kComplexDouble || st == torch::kComplexFloat) {
    auto phase = torch::rand(shape, g, opts) * 6.28;
    return torch::polar(mag * keep, phase).to(st);
  }
  return (mag * keep).to(st);
}

torch::Tensor random_b(std::vector<int64_t> shape, torch::ScalarType st, torch::Generator& g) {
  auto opts = torch::TensorOptions().dtype(torch::kFloat64);
  if (st == torch::kComplexDouble || st == torch::kComplexFloat)
    return torch::complex(torch::randn(shape, g, opts), torch::randn(shape, g, opts)).to(st);
  return torch::randn(shape, g, opts).to(st);
}

struct Case {
  torch::ScalarType st;
  bool reverse;
};

class ScanCase : public ::testing::TestWithParam<Case> {};

TEST_P(ScanCase, EqualsNaiveLoop) {
  auto [st, reverse] = GetParam();
  auto g = torch::make_generator<at::CPUGeneratorImpl>(7);
  for (auto shape : std::vector<std::vector<int64_t>>{{1, 3}, {37, 5, 3}, {200, 700}}) {
    auto a = random_a(shape, st, g), b = random_b(shape, st, g);
    auto h0 = random_b({shape.begin() + 1, shape.end()}, st, g);
    auto h = kernels::linear_scan(a, b, h0, reverse);
    auto ref = naive_scan(a, b, h0, reverse);
    double tol = (st == torch::kFloat32 || st == torch::kComplexFloat) ? 1e-5 : 1e-12;
    EXPECT_LT((h - ref).abs().max().item<double>(), tol) << "T=" << shape[0];
    // Undefined h0 means zeros.
    auto hz = kernels::linear_scan(a, b, {}, reverse);
    EXPECT_LT((hz - naive_scan(a, b, torch::zeros_like(h0), reverse)).abs().max().item<double>(), tol);
  }
}

// Finite-difference gradient check of L = Re(sum(conj(W) * h)) w.r.t. every real degree of freedom
// of a, b and h0 (PyTorch's convention: the gradient of a complex z is dL/dRe z + i dL/dIm z).
TEST_P(ScanCase, GradientMatchesFiniteDifferences) {
  auto [st, reverse_param] = GetParam();
  const bool reverse = reverse_param;  // a plain variable: clang 14 cannot capture a structured binding
  if (st == torch::kFloat32 || st == torch::kComplexFloat) {
    // Single precision: gradients equal the fp64 ones on the same inputs.
    const auto wide = st == torch::kFloat32 ? torch::kFloat64 : torch::kComplexDouble;
    auto g = torch::make_generator<at::CPUGeneratorImpl>(5);
    std::vector<int64_t> shape{300, 4, 5};
    auto a = random_a(shape, st, g), b = random_b(shape, st, g), h0 = random_b({4, 5}, st, g);
    auto W = random_b(shape, st, g);
    auto grads = [&](torch::ScalarType t) {
      auto A = a.to(t).detach().requires_grad_(true), Bv = b.to(t).detach().requires_grad_(true);
      auto H = h0.to(t).detach().requires_grad_(true);
      auto h = kernels::linear_scan(A, Bv, H, reverse);
      torch::real(W.to(t).conj() * h).sum().backward();
      return std::vector<torch::Tensor>{A.grad().to(wide), Bv.grad().to(wide), H.grad().to(wide)};
    };
    auto lo = grads(st), hi = grads(wide);
    for (int i = 0; i < 3; ++i) EXPECT_LT((lo[i] - hi[i]).abs().max().item<double>(), 1e-4) << "input " << i;
    return;
  }
  const bool cplx = st == torch::kComplexDouble;
  auto g = torch::make_generator<at::CPUGeneratorImpl>(11);
  std::vector<int64_t> shape{13, 2, 3};
  auto a = random_a(shape, st, g).requires_grad_(true);
  auto b = random_b(shape, st, g).requires_grad_(true);
  auto h0 = random_b({2, 3}, st, g).requires_grad_(true);
  auto W = random_b(shape, st, g);
  auto loss = [&](const torch::Tensor& A, const torch::Tensor& Bv, const torch::Tensor& H0) {
    auto h = kernels::linear_scan(A, Bv, H0, reverse);
    return cplx ? torch::real(W.conj() * h).sum() : (W * h).sum();
  };
  loss(a, b, h0).backward();
  torch::NoGradGuard ng;
  const double eps = 1e-6;
  for (int which = 0; which < 3; ++which) {
    torch::Tensor x = which == 0 ? a : which == 1 ? b : h0;
    auto grad = x.grad();
    auto xr = cplx ? torch::view_as_real(x.detach().clone()) : x.detach().clone();
    auto gr = cplx ? torch::view_as_real(grad) : grad;
    auto flat = xr.view(-1);
    auto gflat = gr.reshape(-1);
    double worst = 0;
    for (int64_t i = 0; i < flat.numel(); ++i) {
      double orig = flat[i].item<double>();
      auto eval = [&](double v) {
        flat[i] = v;
        auto xc = cplx ? torch::view_as_complex(xr) : xr;
        auto l = which == 0 ? loss(xc, b.detach(), h0.detach())
                 : which == 1 ? loss(a.detach(), xc, h0.detach())
                              : loss(a.detach(), b.detach(), xc);
        return l.item<double>();
      };
      double fd = (eval(orig + eps) - eval(orig - eps)) / (2 * eps);
      flat[i] = orig;
      worst = std::max(worst, std::abs(fd - gflat[i].item<double>()));
    }
    EXPECT_LT(worst, 1e-6) << "input " << which;
  }
}

INSTANTIATE_TEST_SUITE_P(Types, ScanCase,
                         ::testing::Values(Case{torch::kFloat64, false}, Case{torch::kFloat64, true},
                                           Case{torch::kComplexDouble, false}, Case{torch::kComplexDouble, true},
                                           Case{torch::kFloat32, false}, Case{torch::kComplexFloat, true}));

TEST(Scan, ResetCutsTheHistory) {
  // a = [.5, 0, .5], b = [1, 2, 3], h0 = 10: h = [6, 2, 4].
  auto a = torch::tensor({0.5, 0.0, 0.5}, torch::kFloat64).unsqueeze(1);
  auto b = torch::tensor({1.0, 2.0, 3.0}, torch::kFloat64).unsqueeze(1);
  auto h = kernels::linear_scan(a, b, torch::tensor({10.0}, torch::kFloat64));
  EXPECT_DOUBLE_EQ(h[0][0].item<double>(), 6.0);
  EXPECT_DOUBLE_EQ(h[1][0].item<double>(), 2.0);
  EXPECT_DOUBLE_EQ(h[2][0].item<double>(), 4.0);
}

// a.conj() and -b are lazy views (a conjugate / negative bit over the original memory): the kernels
// read raw pointers, so the binding must resolve them. Compared with the same values materialised,
// outputs and every gradient (the backward's incoming gradient arrives conj-flagged too).
TEST(Scan, ConjugateAndNegativeViewsAreResolved) {
  auto g = torch::make_generator<at::CPUGeneratorImpl>(11);
  for (bool reverse : {false, true}) {
    auto a0 = random_a({33, 4}, torch::kComplexDouble, g), b0 = random_b({33, 4}, torch::kComplexDouble, g);
    auto h00 = random_b({4}, torch::kComplexDouble, g), W = random_b({33, 4}, torch::kComplexDouble, g);
    auto run = [&](bool lazy) {
      auto a = a0.clone().requires_grad_(), b = b0.clone().requires_grad_(), h0 = h00.clone().requires_grad_();
      auto ac = lazy ? a.conj() : a.conj().resolve_conj();
      auto bn = lazy ? at::_neg_view(b) : -b;
      auto h0c = lazy ? h0.conj() : h0.conj().resolve_conj();
      if (lazy) {
        EXPECT_TRUE(ac.is_conj() && bn.is_neg() && h0c.is_conj());
      }
      auto h = kernels::linear_scan(ac, bn, h0c, reverse);
      // L = Re(sum(W * conj(h))): its gradient w.r.t. h is W, whose conj view reaches the backward
      torch::real(W * h.conj()).sum().backward();
      return std::vector<torch::Tensor>{h.detach().resolve_conj(), a.grad(), b.grad(), h0.grad()};
    };
    auto lazy = run(true), plain = run(false);
    auto ref = naive_scan(a0.conj().resolve_conj(), -b0, h00.conj().resolve_conj(), reverse);
    EXPECT_LT((plain[0] - ref).abs().max().item<double>(), 1e-12) << "reverse " << reverse;
    for (size_t i = 0; i < lazy.size(); ++i)
      EXPECT_LT((lazy[i] - plain[i]).abs().max().item<double>(), 1e-12) << "tensor " << i << " reverse " << reverse;
  }
}

// The ATen reference scan (the GPU tests' oracle and the fallback backend) against the kernels:
// outputs and every gradient, real and complex, both directions, with resets.
TEST(Scan, AtenReferenceEqualsTheKernels) {
  auto g = torch::make_generator<at::CPUGeneratorImpl>(13);
  for (auto st : {torch::kFloat64, torch::kComplexDouble})
    for (bool reverse : {false, true}) {
      auto a0 = random_a({41, 3, 2}, st, g), b0 = random_b({41, 3, 2}, st, g), h00 = random_b({3, 2}, st, g);
      auto W = random_b({41, 3, 2}, st, g);
      auto run = [&](bool aten) {
        auto a = a0.clone().requires_grad_(), b = b0.clone().requires_grad_(), h0 = h00.clone().requires_grad_();
        auto h = aten ? kernels::linear_scan_aten(a, b, h0, reverse) : kernels::linear_scan(a, b, h0, reverse);
        (st == torch::kComplexDouble ? torch::real(W.conj() * h).sum() : (W * h).sum()).backward();
        return std::vector<torch::Tensor>{h.detach(), a.grad(), b.grad(), h0.grad()};
      };
      auto ref = run(true), ker = run(false);
      for (size_t i = 0; i < ref.size(); ++i)
        EXPECT_LT((ref[i] - ker[i]).abs().max().item<double>(), 1e-12)
            << "tensor " << i << " " << c10::toString(st) << " reverse " << reverse;
    }
}

// The ATen scan's backward must stay linear in T: indexing a[t] in the loop gave every step its
// own full-size [T, N] gradient (a T = 4097 check ran for minutes). Counted as autograd nodes: one
// per step plus a few, not one per step per input.
TEST(Scan, AtenReferenceBackwardHasOneNodePerStep) {
  const int64_t T = 64;
  auto a = torch::rand({T, 3}).requires_grad_(true), b = torch::randn({T, 3}).requires_grad_(true);
  auto h = kernels::linear_scan_aten(a, b, torch::zeros({3}), false);
  std::set<torch::autograd::Node*> seen;
  std::vector<torch::autograd::Node*> todo{h.grad_fn().get()};
  while (!todo.empty()) {
    auto* n = todo.back();
    todo.pop_back();
    if (!n || !seen.insert(n).second) continue;
    for (const auto& e : n->next_edges()) todo.push_back(e.function.get());
  }
  EXPECT_LE(seen.size(), size_t(T + 8)) << "autograd nodes behind a T = " << T << " scan";
  EXPECT_GE(seen.size(), size_t(T));  // one addcmul per step: the count is the graph's, not a stub's
}

TEST(Scan, RejectsBadInput) {
  auto a = torch::zeros({4, 3});
  EXPECT_THROW(kernels::linear_scan(a, torch::zeros({4, 2})), std::exception);
  EXPECT_THROW(kernels::linear_scan(a, torch::zeros({4, 3}, torch::kFloat64)), std::exception);
  EXPECT_THROW(kernels::linear_scan(a, a, torch::zeros({4})), std::exception);
  EXPECT_THROW(kernels::linear_scan(a.to(torch::kInt32), a.to(torch::kInt32)), std::exception);
}

// Naive GAE / returns: explicit sums over the future of each step within its episode.
TEST(Returns, GaeAndDiscountedReturnsMatchNaiveSums) {
  auto g = torch::make_generator<at::CPUGeneratorImpl>(3);
  const int64_t T = 40, B = 6;
  const double gamma = 0.97, lambda = 0.9;
  auto opts = torch::TensorOptions().dtype(torch::kFloat64);
  auto r = torch::randn({T, B}, g, opts), v = torch::randn({T, B}, g, opts), nv = torch::randn({T, B}, g, opts);
  auto term = (torch::rand({T, B}, g, opts) < 0.08).to(torch::kFloat64);
  auto trunc = (torch::rand({T, B}, g, opts) < 0.08).to(torch::kFloat64) * (1 - term);
  auto disc = gamma * (1 - term), cont = (1 - term) * (1 - trunc);
  auto out = kernels::gae(disc, cont, r, v, nv, lambda);
  auto ret = kernels::discounted_returns(disc, cont, r, nv);
  auto x = [](const torch::Tensor& t, int64_t i, int64_t j) { return t[i][j].item<double>(); };
  double worst_adv = 0, worst_ret = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      double adv = 0, w = 1, R = 0, pw = 1;
      for (int64_t k = t; k < T; ++k) {
        double d = x(disc, k, b);
        adv += w * (x(r, k, b) + d * x(nv, k, b) - x(v, k, b));
        R += pw * x(r, k, b);
        bool end = x(term, k, b) > 0 || x(trunc, k, b) > 0 || k == T - 1;
        if (end) {
          R += pw * d * x(nv, k, b);  // 0 when terminated
          break;
        }
        w *= d * lambda;
        pw *= d;
      }
      worst_adv = std::max(worst_adv, std::abs(adv - x(out.advantages, t, b)));
      worst_ret = std::max(worst_ret, std::abs(R - x(ret, t, b)));
    }
  EXPECT_LT(worst_adv, 1e-6);
  EXPECT_LT(worst_ret, 1e-6);
  EXPECT_LT((out.targets - out.advantages - v).abs().max().item<double>(), 1e-12);
}

TEST(Returns, HandComputedDiscountedReturns) {
  // r = 1 each step, gamma .5; termination at t=1, truncation at t=3 bootstrapping 8, tail 4.
  auto col = [](std::vector<double> x) { return torch::tensor(x, torch::kFloat64).unsqueeze(1); };
  auto term = col({0, 1, 0, 0, 0}), trunc = col({0, 0, 0, 1, 0});
  auto disc = 0.5 * (1 - term), cont = (1 - term) * (1 - trunc);
  auto R = kernels::discounted_returns(disc, cont, col({1, 1, 1, 1, 1}), col({0, 0, 0, 8, 4}));
  // R4 = 1 + .5*4 = 3; R3 = 1 + .5*8 = 5; R2 = 1 + .5*5 = 3.5; R1 = 1; R0 = 1 + .5 = 1.5
  EXPECT_NEAR(R[4][0].item<double>(), 3.0, 1e-12);
  EXPECT_NEAR(R[3][0].item<double>(), 5.0, 1e-12);
  EXPECT_NEAR(R[2][0].item<double>(), 3.5, 1e-12);
  EXPECT_NEAR(R[1][0].item<double>(), 1.0, 1e-12);
  EXPECT_NEAR(R[0][0].item<double>(), 1.5, 1e-12);
}

}  // namespace
