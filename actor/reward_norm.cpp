#include "actor/reward_norm.h"

#include <cmath>

#include "core/error.h"

namespace mpirl::actor {

RewardNormalizer::RewardNormalizer(int64_t num_envs, double gamma, double epsilon)
    : gamma_(gamma), eps_(epsilon), ret_(size_t(num_envs), 0.0) {
  MPIRL_CHECK(num_envs > 0 && epsilon > 0, "RewardNormalizer: {} envs, epsilon {}", num_envs, epsilon);
}

void RewardNormalizer::step(int64_t first, int64_t n, float* reward, const uint8_t* terminated,
                            const uint8_t* truncated, int64_t stride) {
  MPIRL_CHECK(first >= 0 && n > 0 && first + n <= int64_t(ret_.size()), "RewardNormalizer: envs {}..{} of {}", first,
              first + n - 1, ret_.size());
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    double& g = ret_[size_t(first + i)];
    g = gamma_ * g + double(reward[i * stride]);
    sum += g;
  }
  // This step's returns as one batch (mean, population variance) merged into the running moments.
  const double bm = sum / double(n);
  double bv = 0;
  for (int64_t i = 0; i < n; ++i) bv += (ret_[size_t(first + i)] - bm) * (ret_[size_t(first + i)] - bm);
  bv /= double(n);
  const double delta = bm - mean_, total = count_ + double(n);
  mean_ += delta * double(n) / total;
  var_ = (var_ * count_ + bv * double(n) + delta * delta * count_ * double(n) / total) / total;
  count_ = total;
  const double scale = 1.0 / std::sqrt(var_ + eps_);
  for (int64_t i = 0; i < n; ++i) {
    reward[i * stride] = float(double(reward[i * stride]) * scale);
    if (terminated[i * stride] || truncated[i * stride]) ret_[size_t(first + i)] = 0;
  }
}

}  // namespace mpirl::actor
