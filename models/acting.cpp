#include "models/acting.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace mpirl::models {
namespace {

constexpr double kHalfLog2Pi = 0.91893853320467274178;  // log(2 pi) / 2

uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

Acting::Rng::Rng(uint64_t seed) {
  for (auto& w : s) w = splitmix64(seed);
}

uint64_t Acting::Rng::next() {  // xoshiro256** (Blackman & Vigna)
  const uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return r;
}

double Acting::Rng::uniform() { return (double(next() >> 11) + 0.5) * 0x1.0p-53; }

double Acting::Rng::normal() {
  if (has_spare) {
    has_spare = false;
    return spare;
  }
  const double r = std::sqrt(-2.0 * std::log(uniform())), phi = 2.0 * M_PI * uniform();
  spare = r * std::sin(phi);
  has_spare = true;
  return r * std::cos(phi);
}

Acting::Acting(Policy policy, int64_t num_envs, uint64_t seed)
    : policy_(std::move(policy)), spec_(policy_->spec()), E_(num_envs), buf_(policy_->act_buffers(num_envs)),
      state_(policy_->initial_state(num_envs)), rng_(seed) {
  TORCH_CHECK(buf_.head.device().is_cpu(), "Acting runs the policy on the CPU (it is on ", buf_.head.device(), ")");
  if (spec_.discrete) {
    discrete_.resize(size_t(E_));
    scratch_.resize(size_t(spec_.num_actions));
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
  if (spec_.discrete) discrete_rows(head.data_ptr<float>(), out, greedy);
  else box_rows(head.data_ptr<float>(), out, greedy);
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

void Acting::discrete_rows(const float* head, const Rows& out, bool greedy) {
  const int64_t L = spec_.num_actions;
  double* g = scratch_.data();
  for (int64_t e = 0; e < E_; ++e) {
    const float* l = head + e * L;
    const double m = *std::max_element(l, l + L);
    double sum = 0;
    for (int64_t j = 0; j < L; ++j) sum += std::exp(double(l[j]) - m);
    // Gumbel-max: argmax_j l_j - log(-log u_j) is a sample of softmax(l).
    for (int64_t j = 0; j < L; ++j) g[j] = greedy ? double(l[j]) : double(l[j]) - std::log(-std::log(rng_.uniform()));
    const int64_t a = std::max_element(g, g + L) - g;
    discrete_[size_t(e)] = a;
    if (out.logp) out.logp[e * out.logp_stride] = float(double(l[a]) - m - std::log(sum));
    if (out.dist) std::memcpy(out.dist + e * out.dist_stride, l, size_t(L) * sizeof(float));
  }
}

void Acting::box_rows(const float* mean, const Rows& out, bool greedy) {
  const int64_t A = spec_.action_dim;
  const torch::Tensor log_std = policy_->log_std().contiguous();
  const float* ls = log_std.data_ptr<float>();
  for (int64_t e = 0; e < E_; ++e) {
    const float* mu = mean + e * A;
    float* a = box_.data() + e * A;
    double lp = 0;
    for (int64_t j = 0; j < A; ++j) {
      const double z = greedy ? 0.0 : rng_.normal();
      a[j] = float(double(mu[j]) + std::exp(double(ls[j])) * z);
      lp += -0.5 * z * z - double(ls[j]) - kHalfLog2Pi;
    }
    if (out.logp) out.logp[e * out.logp_stride] = float(lp);
    if (out.dist) {
      std::memcpy(out.dist + e * out.dist_stride, mu, size_t(A) * sizeof(float));
      std::memcpy(out.dist + e * out.dist_stride + A, ls, size_t(A) * sizeof(float));
    }
  }
}

}  // namespace mpirl::models
