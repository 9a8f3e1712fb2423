#pragma once
// R2D2's targets (Kapturowski et al., ICLR 2019) over time-major [T, B] sequences, in plain tensor
// ops (differentiable where it matters, captured in a CUDA graph like the rest of the step):
//   - the invertible value rescaling h (Pohlen et al. 2018) and its inverse;
//   - Q-values from the policy's two heads, duelling (Wang et al. 2016);
//   - n-step returns that stop at a termination, bootstrap at a truncation and at the sequence's end;
//   - the per-sequence replay priority.
// tests/unit/test_r2d2_targets.cpp checks each against a float64 loop or hand values written apart from
// these; tests/unit/test_r2d2_composed.cpp checks the loss they make up against a float64 walk.
#include <torch/torch.h>

namespace mpirl::learner::r2d2 {

// h(x) = sign(x) (sqrt(|x| + 1) - 1) + eps x and its inverse
// h^-1(y) = sign(y) (((sqrt(1 + 4 eps (|y| + 1 + eps)) - 1) / (2 eps))^2 - 1)   (eps = 0: (|y| + 1)^2 - 1).
torch::Tensor rescale(const torch::Tensor& x, double eps);
torch::Tensor unrescale(const torch::Tensor& y, double eps);

// Q = V + A - mean_a A: the value head (value [...]) and the logits as advantages (dist [..., A]).
torch::Tensor q_values(const torch::Tensor& dist, const torch::Tensor& value);

// n-step returns in return units, for every t in [0, T):
//   G_t = sum_{k < m} gamma^k r_{t+k} + gamma^m X,
// walking k = 0, 1, ... from t: at the first step t+k (k < n) that terminates, m = k+1 and X = 0; that
// truncates, m = k+1 and X = trunc_value[t+k]; that ends the sequence (t+k = T-1), m = k+1 and
// X = boot[T]; otherwise m = n and X = boot[t+n]. A step both terminated and truncated terminates.
// rewards, terminated, truncated (0/1), trunc_value: [T, B]; boot: [T+1, B] (R2D2: the target
// network's Q of the online network's greedy action, in return units).
torch::Tensor n_step_returns(const torch::Tensor& rewards, const torch::Tensor& terminated,
                             const torch::Tensor& truncated, const torch::Tensor& trunc_value, const torch::Tensor& boot,
                             double gamma, int n);

// Per sequence: eta * max_t |delta_t| + (1 - eta) * mean_t |delta_t|. delta [T, B] -> [B].
torch::Tensor sequence_priorities(const torch::Tensor& delta, double eta);

}  // namespace mpirl::learner::r2d2
