#include "kernels/scan.h"

#include <atomic>

#include "kernels/cpu/scan_cpu.h"
#include "core/error.h"
#ifdef MPIRL_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "kernels/cuda/scan_cuda.h"
#endif

namespace mpirl::kernels {
namespace {

ScanDType scan_dtype(const torch::Tensor& t) {
  switch (t.scalar_type()) {
    case torch::kFloat32: return ScanDType::F32;
    case torch::kFloat64: return ScanDType::F64;
    case torch::kComplexFloat: return ScanDType::C64;
    case torch::kComplexDouble: return ScanDType::C128;
    default:
      throw Error(fmt::format("linear_scan: dtype {} is not supported (float32, float64, complex64, complex128)",
                              c10::toString(t.scalar_type())));
  }
}

void check_inputs(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& h0) {
  MPIRL_CHECK(a.dim() >= 1, "linear_scan: inputs need a time dimension, got a scalar");
  MPIRL_CHECK(a.sizes() == b.sizes(), "linear_scan: a [{}] and b [{}] differ in shape", fmt::join(a.sizes(), ","),
              fmt::join(b.sizes(), ","));
  MPIRL_CHECK(a.scalar_type() == b.scalar_type(), "linear_scan: a is {} but b is {}", c10::toString(a.scalar_type()),
              c10::toString(b.scalar_type()));
  MPIRL_CHECK(a.device() == b.device(), "linear_scan: a on {} but b on {}", a.device().str(), b.device().str());
  if (h0.defined()) {
    MPIRL_CHECK(h0.sizes() == a.sizes().slice(1), "linear_scan: h0 [{}] must be a's shape without time [{}]",
                fmt::join(h0.sizes(), ","), fmt::join(a.sizes().slice(1), ","));
    MPIRL_CHECK(h0.scalar_type() == a.scalar_type() && h0.device() == a.device(),
                "linear_scan: h0 must match a's dtype and device");
  }
  scan_dtype(a);
}

// What the kernels read through a raw pointer: contiguous memory holding the values themselves.
// contiguous() alone keeps PyTorch's lazy conjugate and negative bits (a.conj() is a view whose
// memory holds a, not conj(a)), so they are resolved first.
torch::Tensor plain(const torch::Tensor& t) {
  return t.defined() ? t.resolve_conj().resolve_neg().contiguous() : t;
}

// The parameters every scan pass shares.
template <typename P>
void fill_common(P& p, const torch::Tensor& a, bool reverse) {
  p.T = a.size(0);
  p.N = p.T ? a.numel() / p.T : 0;
  p.dtype = scan_dtype(a);
  p.reverse = reverse;
}

#ifdef MPIRL_WITH_CUDA
#define MPIRL_CUDA_FN(f) cuda::f
#else
#define MPIRL_CUDA_FN(f) nullptr
#endif

// Runs a pass on a's device: the CPU kernel, or the CUDA launcher on the current stream.
template <typename P, typename CpuFn, typename CudaFn>
void run_on_device(const torch::Tensor& a, const P& p, CpuFn cpu_fn, CudaFn cuda_fn, const char* what) {
  if (!a.is_cuda()) return cpu_fn(p);
#ifdef MPIRL_WITH_CUDA
  c10::cuda::CUDAGuard guard(a.device());
  int code = cuda_fn(p, at::cuda::getCurrentCUDAStream().stream());
  MPIRL_CHECK(code >= 0, "linear_scan: a CUDA error was pending before the {} (earlier work failed): {}", what,
              cuda::error_string(code));
  MPIRL_CHECK(code == 0, "linear_scan: CUDA {} failed: {}", what, cuda::error_string(code));
#else
  (void)cuda_fn;
  throw Error(fmt::format("linear_scan: {} on a CUDA tensor, but mpirl was built without CUDA kernels", what));
#endif
}

class LinearScanFn : public torch::autograd::Function<LinearScanFn> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& a, const torch::Tensor& b,
                               const torch::Tensor& h0, bool reverse) {
    auto h = linear_scan_forward(a, b, h0, reverse);
    ctx->save_for_backward({a, h, h0});
    ctx->saved_data["reverse"] = reverse;
    return h;
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    auto saved = ctx->get_saved_variables();
    auto g = linear_scan_backward(saved[0], saved[1], saved[2], grads[0], ctx->saved_data["reverse"].toBool());
    return {g[0], g[1], g[2], torch::Tensor()};
  }
};

}  // namespace

torch::Tensor linear_scan_forward(const torch::Tensor& a_in, const torch::Tensor& b_in, const torch::Tensor& h0_in,
                                  bool reverse) {
  check_inputs(a_in, b_in, h0_in);
  auto a = plain(a_in), b = plain(b_in), h0 = plain(h0_in);
  auto h = torch::empty_like(a, torch::MemoryFormat::Contiguous);
  ScanForwardParams p;
  fill_common(p, a, reverse);
  p.a = a.data_ptr();
  p.b = b.data_ptr();
  p.h0 = h0.defined() ? h0.data_ptr() : nullptr;
  p.h = h.data_ptr();
  run_on_device(a, p, cpu::scan_forward, MPIRL_CUDA_FN(scan_forward), "forward scan");
  return h;
}

std::vector<torch::Tensor> linear_scan_backward(const torch::Tensor& a_in, const torch::Tensor& h_in,
                                                const torch::Tensor& h0_in, const torch::Tensor& gh_in, bool reverse) {
  check_inputs(a_in, h_in, h0_in);
  MPIRL_CHECK(gh_in.sizes() == a_in.sizes(), "linear_scan backward: gradient shape differs from the output's");
  auto a = plain(a_in), h = plain(h_in), gh = plain(gh_in.to(a.scalar_type())), h0 = plain(h0_in);
  auto ga = torch::empty_like(a, torch::MemoryFormat::Contiguous);
  auto gb = torch::empty_like(a, torch::MemoryFormat::Contiguous);
  ScanBackwardParams p;
  fill_common(p, a, reverse);
  p.a = a.data_ptr();
  p.h = h.data_ptr();
  p.h0 = h0.defined() ? h0.data_ptr() : nullptr;
  p.grad_h = gh.data_ptr();
  p.grad_a = ga.data_ptr();
  p.grad_b = gb.data_ptr();
  run_on_device(a, p, cpu::scan_backward, MPIRL_CUDA_FN(scan_backward), "backward scan");
  torch::Tensor gh0;
  if (h0.defined() && p.T > 0) {
    const int64_t first = reverse ? p.T - 1 : 0;  // the step that consumed h0
    gh0 = a[first].conj() * gb[first];
  }
  return {ga, gb, gh0};
}

torch::Tensor linear_scan_aten(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& h0, bool reverse) {
  check_inputs(a, b, h0);
  const int64_t T = a.size(0);
  std::vector<torch::Tensor> hs(static_cast<size_t>(T));
  torch::Tensor h = h0.defined() ? h0 : torch::zeros(a.sizes().slice(1), a.options());
  // unbind, not a[t]: autograd turns each a[t] into a zero [T, N] gradient with one row set, so a
  // backward through T indexings moves T^2 N numbers (a T = 4097, N = 12288 check ran for minutes
  // on an H100 machine's CPU); unbind's backward stacks the T row gradients once.
  const auto as = a.unbind(0), bs = b.unbind(0);
  for (int64_t s = 0; s < T; ++s) {
    const size_t t = size_t(reverse ? T - 1 - s : s);
    h = torch::addcmul(bs[t], as[t], h);  // a_t * h + b_t
    hs[t] = h;
  }
  return T ? torch::stack(hs) : torch::empty_like(a);
}

namespace {
std::atomic<ScanBackend> g_backend{ScanBackend::Native};
}  // namespace

void set_scan_backend(ScanBackend b) { g_backend = b; }
ScanBackend scan_backend() { return g_backend; }
const char* scan_backend_name(ScanBackend b) { return b == ScanBackend::Aten ? "aten" : "native"; }

torch::Tensor linear_scan(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& h0, bool reverse) {
  return g_backend == ScanBackend::Aten ? linear_scan_aten(a, b, h0, reverse) : linear_scan_native(a, b, h0, reverse);
}

torch::Tensor linear_scan_native(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& h0,
                                 bool reverse) {
  // A defined h0 keeps the autograd signature fixed; zeros cost one [N] tensor.
  auto h0z = h0.defined() ? h0 : torch::zeros(a.sizes().slice(1), a.options());
  if (!a.requires_grad() && !b.requires_grad() && !h0z.requires_grad()) return linear_scan_forward(a, b, h0z, reverse);
  return LinearScanFn::apply(a, b, h0z, reverse);
}

}  // namespace mpirl::kernels
