#include "kernels/returns.h"

#include "kernels/scan.h"
#include "core/error.h"

namespace mpirl::kernels {
namespace {

void check_same(const char* what, const torch::Tensor& ref, std::initializer_list<const torch::Tensor*> ts) {
  MPIRL_CHECK(ref.dim() == 2, "{} expects [T, B] inputs, got [{}]", what, fmt::join(ref.sizes(), ","));
  for (auto* t : ts)
    MPIRL_CHECK(t->sizes() == ref.sizes(), "{} input shape [{}] != [{}]", what, fmt::join(t->sizes(), ","),
                fmt::join(ref.sizes(), ","));
}

// err_t = b_t + a_t err_{t+1}, err_T = 0.
torch::Tensor backward_recurrence(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& tail = {}) {
  return linear_scan(a.contiguous(), b.contiguous(), tail, /*reverse=*/true);
}

}  // namespace

VTraceReturns vtrace(const torch::Tensor& log_rhos, const torch::Tensor& discounts, const torch::Tensor& cont,
                     const torch::Tensor& rewards, const torch::Tensor& values, const torch::Tensor& next_values,
                     const VTraceOptions& o) {
  torch::NoGradGuard g;
  check_same("vtrace", log_rhos, {&discounts, &cont, &rewards, &values, &next_values});
  auto rhos = log_rhos.exp();
  auto clipped_rhos = rhos.clamp_max(o.rho_bar);
  auto cs = o.lambda * rhos.clamp_max(o.c_bar);
  auto deltas = clipped_rhos * (rewards + discounts * next_values - values);
  auto err = backward_recurrence(discounts * cs * cont, deltas);
  VTraceReturns r;
  r.vs = values + err;
  const int64_t T = log_rhos.size(0);
  auto err_next = torch::cat({err.slice(0, 1, T), torch::zeros_like(err.slice(0, 0, 1))}, 0);
  r.advantages = rewards + discounts * (next_values + cont * err_next) - values;
  r.pg_advantages = rhos.clamp_max(o.pg_rho_bar) * r.advantages;
  return r;
}

GaeReturns gae(const torch::Tensor& discounts, const torch::Tensor& cont, const torch::Tensor& rewards,
               const torch::Tensor& values, const torch::Tensor& next_values, double lambda) {
  torch::NoGradGuard g;
  check_same("gae", rewards, {&discounts, &cont, &values, &next_values});
  auto deltas = rewards + discounts * next_values - values;
  GaeReturns r;
  r.advantages = backward_recurrence(discounts * lambda * cont, deltas);
  r.targets = r.advantages + values;
  return r;
}

torch::Tensor discounted_returns(const torch::Tensor& discounts, const torch::Tensor& cont, const torch::Tensor& rewards,
                                 const torch::Tensor& next_values) {
  torch::NoGradGuard g;
  check_same("discounted_returns", rewards, {&discounts, &cont, &next_values});
  const int64_t T = rewards.size(0);
  if (T == 0) return torch::empty_like(rewards);
  auto b = rewards + discounts * (1 - cont) * next_values;
  return backward_recurrence(discounts * cont, b, next_values[T - 1].contiguous());
}

}  // namespace mpirl::kernels
