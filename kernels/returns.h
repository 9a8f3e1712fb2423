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
// The recurrence is the reverse linear scan h_t = a_t h_{t+1} + b_t with a_t = discount*c*cont.
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

// Reverse linear recurrence h_t = a_t * h_{t+1} + b_t over dim 0, h_T = 0. [T, ...] -> [T, ...].
torch::Tensor reverse_linear_recurrence(const torch::Tensor& a, const torch::Tensor& b);

}  // namespace mpirl::kernels
