#include "models/acting.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace mpirl::models {
Acting::Acting(Policy policy, int64_t num_envs, uint64_t seed)
    : policy_(std::move(policy)), spec_(policy_->spec()), E_(num_envs), buf_(policy_->act_buffers(num_envs)),
      state_(policy_->initial_state(num_envs)), sampler_(spec_, seed) {
  TORCH_CHECK(buf_.head.device().is_cpu(), "Acting runs the policy on the CPU (it is on ", buf_.head.device(), ")");
  if (spec_.discrete) {
    discrete_.resize(size_t(E_));
  } else {
    box_.resize(size_t(E_ * spec_.action_dim));
  }
}

void Acting::step(const torch::Tensor& obs, const uint8_t* is_init, int64_t init_stride, const Rows& out, bool greedy) {
  TORCH_CHECK(obs.size(0) == E_, "Acting::step: ", obs.size(0), " observation rows for ", E_, " envs");
  if (policy_->recurrent()) {
    float* init = buf_.init.data_ptr<float>();
    for (int64_t e = 0; e < E_; ++e) init[e] = is_init[e * init_stride] ? 1.0f : 0.0f;
  }
  const torch::Tensor& head = policy_->act(obs, state_, buf_);
  const float* h = head.data_ptr<float>();
  if (policy_->python()) {  // whole rows: logits, or mean ++ log-std
    void* actions = spec_.discrete ? static_cast<void*>(discrete_.data()) : static_cast<void*>(box_.data());
    sampler_.rows(h, head.size(1), E_, actions, out, greedy, eps_.empty() ? nullptr : eps_.data());
    return;
  }
  if (spec_.discrete) {
    sampler_.discrete(h, spec_.num_actions, E_, discrete_.data(), out, greedy, eps_.empty() ? nullptr : eps_.data());
  } else {
    const torch::Tensor log_std = policy_->log_std().contiguous();
    sampler_.box(h, spec_.action_dim, log_std.data_ptr<float>(), 0, E_, box_.data(), out, greedy);
  }
}

void Acting::write_actions(void* rollout, int64_t t, int64_t T) const {
  if (spec_.discrete) {
    auto* a = static_cast<int64_t*>(rollout);
    for (int64_t e = 0; e < E_; ++e) a[e * T + t] = discrete_[size_t(e)];
    return;
  }
  const int64_t A = spec_.action_dim;
  auto* a = static_cast<float*>(rollout);
  for (int64_t e = 0; e < E_; ++e) std::memcpy(a + (e * T + t) * A, box_.data() + e * A, size_t(A) * sizeof(float));
}

}  // namespace mpirl::models
