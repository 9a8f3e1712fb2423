#include "kernels/returns.h"

#include "runtime/error.h"

namespace mpirl::kernels {

torch::Tensor reverse_linear_recurrence(const torch::Tensor& a, const torch::Tensor& b) {
  MPIRL_CHECK(a.sizes() == b.sizes() && a.dim() >= 1, "recurrence shapes differ");
  const int64_t T = a.size(0);
  auto h = torch::empty_like(b);
  if (T == 0) return h;
  if (a.device().is_cpu() && a.is_contiguous() && b.is_contiguous() && a.scalar_type() == b.scalar_type()) {
    const int64_t n = a.numel() / T;
    AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "reverse_linear_recurrence", [&] {
      const scalar_t* ap = a.data_ptr<scalar_t>();
      const scalar_t* bp = b.data_ptr<scalar_t>();
      scalar_t* hp = h.data_ptr<scalar_t>();
      for (int64_t j = 0; j < n; ++j) hp[(T - 1) * n + j] = bp[(T - 1) * n + j];
      for (int64_t t = T - 2; t >= 0; --t)
        for (int64_t j = 0; j < n; ++j) hp[t * n + j] = ap[t * n + j] * hp[(t + 1) * n + j] + bp[t * n + j];
    });
    return h;
  }
  h[T - 1] = b[T - 1];
  for (int64_t t = T - 2; t >= 0; --t) h[t] = a[t] * h[t + 1] + b[t];
  return h;
}

VTraceReturns vtrace(const torch::Tensor& log_rhos, const torch::Tensor& discounts, const torch::Tensor& cont,
                     const torch::Tensor& rewards, const torch::Tensor& values, const torch::Tensor& next_values,
                     const VTraceOptions& o) {
  torch::NoGradGuard g;
  MPIRL_CHECK(log_rhos.dim() == 2, "vtrace expects [T, B] inputs");
  for (auto* t : {&discounts, &cont, &rewards, &values, &next_values})
    MPIRL_CHECK(t->sizes() == log_rhos.sizes(), "vtrace input shape {} != {}", fmt::join(t->sizes(), ","),
                fmt::join(log_rhos.sizes(), ","));
  auto rhos = log_rhos.exp();
  auto clipped_rhos = rhos.clamp_max(o.rho_bar);
  auto cs = o.lambda * rhos.clamp_max(o.c_bar);
  auto deltas = clipped_rhos * (rewards + discounts * next_values - values);
  auto err = reverse_linear_recurrence((discounts * cs * cont).contiguous(), deltas.contiguous());
  VTraceReturns r;
  r.vs = values + err;
  const int64_t T = log_rhos.size(0);
  auto err_next = torch::cat({err.slice(0, 1, T), torch::zeros_like(err.slice(0, 0, 1))}, 0);
  r.advantages = rewards + discounts * (next_values + cont * err_next) - values;
  r.pg_advantages = rhos.clamp_max(o.pg_rho_bar) * r.advantages;
  return r;
}

}  // namespace mpirl::kernels
