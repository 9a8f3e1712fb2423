#include "learner/algorithms/r2d2/targets.h"

namespace mpirl::learner::r2d2 {

torch::Tensor rescale(const torch::Tensor& x, double eps) {
  return x.sign() * ((x.abs() + 1).sqrt() - 1) + eps * x;
}

torch::Tensor unrescale(const torch::Tensor& y, double eps) {
  // (sqrt(1 + 4 eps u) - 1) / (2 eps) written as 2u / (1 + sqrt(1 + 4 eps u)), u = |y| + 1 + eps: no
  // cancellation (in float32 the first form loses 1e-5 relative at eps = 1e-3), and eps = 0 needs no case.
  auto u = y.abs() + (1 + eps);
  auto s = 2 * u / (1 + (1 + 4 * eps * u).sqrt());
  return y.sign() * (s.square() - 1);
}

torch::Tensor q_values(const torch::Tensor& dist, const torch::Tensor& value) {
  return value.unsqueeze(-1) + dist - dist.mean(-1, /*keepdim=*/true);
}

torch::Tensor n_step_returns(const torch::Tensor& rewards, const torch::Tensor& terminated,
                             const torch::Tensor& truncated, const torch::Tensor& trunc_value, const torch::Tensor& boot,
                             double gamma, int n) {
  const int64_t T = rewards.size(0);
  TORCH_CHECK(n >= 1 && T >= 1 && boot.size(0) == T + 1, "n_step_returns: n ", n, ", T ", T, ", boot of ", boot.size(0));
  // The sequence's last step, when it neither terminates nor truncates, is cut like a truncation
  // that bootstraps from boot[T].
  auto last_open = (1 - terminated[T - 1]) * (1 - truncated[T - 1]);
  auto cut = truncated.clone();
  auto cut_value = trunc_value.clone();
  cut[T - 1] = truncated[T - 1] + last_open;
  cut_value[T - 1] = torch::where(last_open > 0.5, boot[T], trunc_value[T - 1]);
  // n steps of padding past the end: every return has stopped by then.
  auto pad = [&](const torch::Tensor& x, int64_t k) { return torch::cat({x, x.new_zeros({k, x.size(1)})}); };
  auto r = pad(rewards, n), te = pad(terminated, n), tr = pad(cut, n), v = pad(cut_value, n), bt = pad(boot, n - 1);
  auto g = torch::zeros_like(rewards), alive = torch::ones_like(rewards);
  double disc = 1;
  for (int k = 0; k < n; ++k) {
    auto rk = r.slice(0, k, k + T), tek = te.slice(0, k, k + T), trk = tr.slice(0, k, k + T);
    g = g + alive * disc * (rk + gamma * (1 - tek) * trk * v.slice(0, k, k + T));
    alive = alive * (1 - tek) * (1 - trk);
    disc *= gamma;
  }
  return g + alive * disc * bt.slice(0, n, n + T);
}

torch::Tensor sequence_priorities(const torch::Tensor& delta, double eta) {
  auto a = delta.abs();
  return eta * std::get<0>(a.max(0)) + (1 - eta) * a.mean(0);
}

}  // namespace mpirl::learner::r2d2
