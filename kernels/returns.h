#pragma once
// Off-policy returns. Inputs are time-major [T, B] tensors on any device (float or double).
//
// V-trace (Espeholt et al. 2018) with episode boundaries inside the sequence:
//   rho_t   = min(rho_bar, exp(log_rho_t)),  c_t = lambda * min(c_bar, exp(log_rho_t))
//   delta_t = rho_t * (r_t + discount_t * next_value_t - value_t)
//   err_t   = delta_t + discount_t * c_t * cont_t * err_{t+1},   err_T = 0
//   vs_t    = value_t + err_t
//   adv_t   = r_t + discount_t * (next_value_t + cont_t * err_{t+1}) - value_t   (q_t - V(x_t))
//   pg_adv_t = min(pg_rho_bar, exp(log_rho_t)) * adv_t
// where, for the transition out of step t:
//   discount_t   = gamma * (1 - terminated_t)   (a terminal state has value 0)
//   cont_t       = 1 - (terminated_t | truncated_t)  (the next step belongs to another episode)
//   next_value_t = V(x_{t+1}) if the episode goes on; the value of the last state if truncated
//                  (bootstrap); anything if terminated (multiplied by 0).
// The recurrence is the reverse linear scan h_t = a_t h_{t+1} + b_t with a_t = discount*c*cont
// (kernels/scan.h), as are GAE and discounted returns below.
#include <torch/torch.h>

namespace mpirl::kernels {

struct VTraceOptions {
  double rho_bar = 1.0, c_bar = 1.0, lambda = 1.0, pg_rho_bar = 1.0;
};

struct VTraceReturns {
  torch::Tensor vs;          // [T, B] value targets
  torch::Tensor advantages;  // [T, B] q_t - V(x_t), without importance weight
  torch::Tensor pg_advantages;  // [T, B] clipped-rho weighted advantages
};

VTraceReturns vtrace(const torch::Tensor& log_rhos, const torch::Tensor& discounts, const torch::Tensor& cont,
                     const torch::Tensor& rewards, const torch::Tensor& values, const torch::Tensor& next_values,
                     const VTraceOptions& opts);

// GAE (Schulman et al. 2016) with the same boundary conventions:
//   delta_t = r_t + discount_t * next_value_t - value_t
//   adv_t   = delta_t + discount_t * lambda * cont_t * adv_{t+1},  adv_T = 0
// Returns {advantages, value targets = advantages + values}.
struct GaeReturns {
  torch::Tensor advantages, targets;
};
GaeReturns gae(const torch::Tensor& discounts, const torch::Tensor& cont, const torch::Tensor& rewards,
               const torch::Tensor& values, const torch::Tensor& next_values, double lambda);

// Discounted returns, bootstrapped where the sequence or a truncated episode is cut:
//   R_t = r_t + discount_t * (cont_t ? R_{t+1} : next_value_t),  R_T = next_value_{T-1}
torch::Tensor discounted_returns(const torch::Tensor& discounts, const torch::Tensor& cont, const torch::Tensor& rewards,
                                 const torch::Tensor& next_values);

}  // namespace mpirl::kernels
