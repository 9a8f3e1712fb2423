// mpirl's reset-aware linear scan as a PyTorch operator, torch.ops.mpirl.linear_scan, in the shape
// of pytorch/extension-cpp: a schema, CPU and CUDA kernels (the learner's own, kernels/scan.h), a
// Meta kernel for fake tensors (torch.compile, torch.export), and autograd registered in C++, so a
// LibTorch caller gets gradients through the dispatcher without Python.
//
//   linear_scan(Tensor a, Tensor b, Tensor? h0=None, bool reverse=False) -> Tensor
//     h_t = a_t * h_{t-1} + b_t over dim 0 (h_{-1} = h0, or 0); reverse: h_t = a_t * h_{t+1} + b_t.
//     A reset at t is a_t = 0. float32, float64, complex64, complex128; [T, ...] of any rank.
//   linear_scan_backward(Tensor a, Tensor h, Tensor? h0, Tensor grad_h, bool reverse) -> (Tensor, Tensor)
//     dL/da and dL/db (the backward is itself a scan run the other way); dL/dh0 is one product of
//     ATen ops in the autograd kernel, so compiled graphs see it.
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/autograd.h>
#include <torch/library.h>
#include <torch/torch.h>

#include "kernels/scan.h"

namespace mpirl::ops {
namespace {

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

Tensor or_undefined(const std::optional<Tensor>& t) { return t.has_value() ? *t : Tensor(); }

// The shape and dtype rules, on symbolic sizes so that fake tensors pass through them too.
void check(const Tensor& a, const Tensor& b, const std::optional<Tensor>& h0, const char* op) {
  TORCH_CHECK(a.dim() >= 1, op, ": inputs need a time dimension (dim 0), got a scalar");
  TORCH_CHECK(a.sym_sizes().equals(b.sym_sizes()), op, ": a ", a.sym_sizes(), " and b ", b.sym_sizes(),
              " differ in shape");
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), op, ": a is ", a.scalar_type(), " but b is ", b.scalar_type());
  TORCH_CHECK(a.device() == b.device(), op, ": a is on ", a.device(), " but b on ", b.device());
  const auto st = a.scalar_type();
  TORCH_CHECK(st == at::kFloat || st == at::kDouble || st == at::kComplexFloat || st == at::kComplexDouble, op,
              ": dtype ", st, " is not supported (float32, float64, complex64, complex128)");
  if (h0.has_value() && h0->defined()) {
    TORCH_CHECK(h0->sym_sizes().equals(a.sym_sizes().slice(1)), op, ": h0 ", h0->sym_sizes(),
                " must be a's shape without time ", a.sym_sizes().slice(1));
    TORCH_CHECK(h0->scalar_type() == st && h0->device() == a.device(), op, ": h0 must match a's dtype and device");
  }
}

Tensor scan_kernel(const Tensor& a, const Tensor& b, const std::optional<Tensor>& h0, bool reverse) {
  check(a, b, h0, "mpirl::linear_scan");
  return kernels::linear_scan_forward(a, b, or_undefined(h0), reverse);
}

Tensor scan_meta(const Tensor& a, const Tensor& b, const std::optional<Tensor>& h0, bool) {
  check(a, b, h0, "mpirl::linear_scan");
  return at::empty_like(a, at::MemoryFormat::Contiguous);
}

std::tuple<Tensor, Tensor> scan_backward_kernel(const Tensor& a, const Tensor& h, const std::optional<Tensor>& h0,
                                                const Tensor& grad_h, bool reverse) {
  check(a, h, h0, "mpirl::linear_scan_backward");
  auto g = kernels::linear_scan_backward(a, h, or_undefined(h0), grad_h, reverse);
  return {g[0], g[1]};
}

std::tuple<Tensor, Tensor> scan_backward_meta(const Tensor& a, const Tensor& h, const std::optional<Tensor>& h0,
                                              const Tensor& grad_h, bool) {
  check(a, h, h0, "mpirl::linear_scan_backward");
  TORCH_CHECK(grad_h.sym_sizes().equals(a.sym_sizes()), "mpirl::linear_scan_backward: grad_h ", grad_h.sym_sizes(),
              " differs from the output's ", a.sym_sizes());
  return {at::empty_like(a, at::MemoryFormat::Contiguous), at::empty_like(a, at::MemoryFormat::Contiguous)};
}

// Both autograd paths call the operators through the dispatcher (not the kernels), so that under
// fake tensors and torch.compile they trace as operators.
Tensor call_scan(const Tensor& a, const Tensor& b, const std::optional<Tensor>& h0, bool reverse) {
  static auto op = c10::Dispatcher::singleton().findSchemaOrThrow("mpirl::linear_scan", "").typed<decltype(scan_kernel)>();
  return op.call(a, b, h0, reverse);
}

std::tuple<Tensor, Tensor> call_scan_backward(const Tensor& a, const Tensor& h, const std::optional<Tensor>& h0,
                                              const Tensor& grad_h, bool reverse) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mpirl::linear_scan_backward", "")
                       .typed<decltype(scan_backward_kernel)>();
  return op.call(a, h, h0, grad_h, reverse);
}

class ScanFunction : public torch::autograd::Function<ScanFunction> {
 public:
  static Tensor forward(AutogradContext* ctx, const Tensor& a, const Tensor& b, const std::optional<Tensor>& h0,
                        bool reverse) {
    Tensor h;
    {
      at::AutoDispatchBelowADInplaceOrView below;
      h = call_scan(a, b, h0, reverse);
    }
    ctx->save_for_backward({a, h, or_undefined(h0)});
    ctx->saved_data["reverse"] = reverse;
    ctx->saved_data["has_h0"] = h0.has_value() && h0->defined();
    return h;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (!grads[0].defined()) return {Tensor(), Tensor(), Tensor(), Tensor()};
    const auto saved = ctx->get_saved_variables();
    const bool reverse = ctx->saved_data["reverse"].toBool();
    const bool has_h0 = ctx->saved_data["has_h0"].toBool();
    const Tensor& a = saved[0];
    const std::optional<Tensor> h0 = has_h0 ? std::optional<Tensor>(saved[2]) : std::nullopt;
    auto [ga, gb] = call_scan_backward(a, saved[1], h0, grads[0].to(a.scalar_type()), reverse);
    Tensor gh0;
    if (has_h0 && TORCH_GUARD_OR_FALSE(a.sym_size(0).sym_eq(0))) {
      gh0 = at::zeros_like(*h0);
    } else if (has_h0) {  // h0 feeds the first step taken: h = a * h0 + b there
      const int64_t first = reverse ? -1 : 0;
      gh0 = a.select(0, first).conj() * gb.select(0, first);
    }
    return {ga, gb, gh0, Tensor()};
  }
};

Tensor scan_autograd(const Tensor& a, const Tensor& b, const std::optional<Tensor>& h0, bool reverse) {
  return ScanFunction::apply(a, b, h0, reverse);
}

// The backward has no derivative of its own: a second-order gradient (create_graph=True) is an
// error rather than the dispatcher's silent "not differentiable" fallback.
std::tuple<Tensor, Tensor> scan_backward_autograd(const Tensor& a, const Tensor& h, const std::optional<Tensor>& h0,
                                                  const Tensor& grad_h, bool reverse) {
  const bool h0_grad = h0.has_value() && h0->defined() && h0->requires_grad();
  TORCH_CHECK(!(at::GradMode::is_enabled() && (a.requires_grad() || h.requires_grad() || grad_h.requires_grad() || h0_grad)),
              "mpirl::linear_scan_backward: double backward (create_graph=True) is not supported");
  at::AutoDispatchBelowADInplaceOrView below;
  return call_scan_backward(a, h, h0, grad_h, reverse);
}

}  // namespace
}  // namespace mpirl::ops

TORCH_LIBRARY(mpirl, m) {
  m.def("linear_scan(Tensor a, Tensor b, Tensor? h0=None, bool reverse=False) -> Tensor");
  m.def("linear_scan_backward(Tensor a, Tensor h, Tensor? h0, Tensor grad_h, bool reverse) -> (Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(mpirl, CPU, m) {
  m.impl("linear_scan", TORCH_FN(mpirl::ops::scan_kernel));
  m.impl("linear_scan_backward", TORCH_FN(mpirl::ops::scan_backward_kernel));
}

#ifdef MPIRL_WITH_CUDA
TORCH_LIBRARY_IMPL(mpirl, CUDA, m) {
  m.impl("linear_scan", TORCH_FN(mpirl::ops::scan_kernel));
  m.impl("linear_scan_backward", TORCH_FN(mpirl::ops::scan_backward_kernel));
}
#endif

TORCH_LIBRARY_IMPL(mpirl, Meta, m) {
  m.impl("linear_scan", TORCH_FN(mpirl::ops::scan_meta));
  m.impl("linear_scan_backward", TORCH_FN(mpirl::ops::scan_backward_meta));
}

TORCH_LIBRARY_IMPL(mpirl, Autograd, m) {
  m.impl("linear_scan", TORCH_FN(mpirl::ops::scan_autograd));
  m.impl("linear_scan_backward", TORCH_FN(mpirl::ops::scan_backward_autograd));
}
