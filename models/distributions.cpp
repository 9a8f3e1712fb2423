// Categorical (logits) and diagonal Gaussian (mean ++ log-std) distributions over a policy's
// `dist` output (models/policy_model.h).
#include <cmath>

#include "models/policy_model.h"

namespace mpirl::models {

torch::Tensor log_prob(const envs::EnvSpec& spec, const torch::Tensor& dist, const torch::Tensor& actions) {
  if (spec.discrete)
    return torch::log_softmax(dist, -1).gather(-1, actions.unsqueeze(-1)).squeeze(-1);
  auto parts = dist.chunk(2, -1);
  auto mean = parts[0], log_std = parts[1];
  auto z = (actions - mean) * torch::exp(-log_std);
  return (-0.5 * z * z - log_std - 0.5 * std::log(2 * M_PI)).sum(-1);
}

torch::Tensor entropy(const envs::EnvSpec& spec, const torch::Tensor& dist) {
  if (spec.discrete) {
    auto lp = torch::log_softmax(dist, -1);
    return -(lp.exp() * lp).sum(-1);
  }
  auto log_std = dist.chunk(2, -1)[1];
  return (log_std + 0.5 + 0.5 * std::log(2 * M_PI)).sum(-1);
}

torch::Tensor sample(const envs::EnvSpec& spec, const torch::Tensor& dist, at::Generator& gen) {
  if (spec.discrete) {
    // Gumbel-max: argmax(logits - log(-log U)).
    auto u = torch::empty_like(dist).uniform_(1e-10, 1.0, gen);
    return (dist - torch::log(-torch::log(u))).argmax(-1);
  }
  auto parts = dist.chunk(2, -1);
  auto eps = torch::empty_like(parts[0]).normal_(0.0, 1.0, gen);
  return parts[0] + torch::exp(parts[1]) * eps;
}

}  // namespace mpirl::models
