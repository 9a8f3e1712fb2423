#include "models/sampler.h"

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

Sampler::Rng::Rng(uint64_t seed) {
  for (auto& w : s) w = splitmix64(seed);
}

uint64_t Sampler::Rng::next() {  // xoshiro256** (Blackman & Vigna)
  const uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return r;
}

double Sampler::Rng::uniform() { return (double(next() >> 11) + 0.5) * 0x1.0p-53; }

double Sampler::Rng::normal() {
  if (has_spare) {
    has_spare = false;
    return spare;
  }
  const double r = std::sqrt(-2.0 * std::log(uniform())), phi = 2.0 * M_PI * uniform();
  spare = r * std::sin(phi);
  has_spare = true;
  return r * std::cos(phi);
}

Sampler::Sampler(const envs::EnvSpec& spec, uint64_t seed) : spec_(spec), rng_(seed) {
  if (spec_.discrete) scratch_.resize(size_t(spec_.num_actions));
}

double apex_epsilon(int64_t i, int64_t n, double base, double alpha) {
  return n <= 1 ? base : std::pow(base, 1.0 + alpha * double(i) / double(n - 1));
}

std::vector<double> epsilons(const EpsilonLadder& l, int64_t first, int64_t count, int64_t total) {
  std::vector<double> v(static_cast<size_t>(count));
  for (int64_t e = 0; e < count; ++e) v[size_t(e)] = apex_epsilon(first + e, total, l.base, l.alpha);
  return v;
}

void Sampler::discrete(const float* logits, int64_t stride, int64_t n, int64_t* actions, const Rows& out,
                       bool greedy, const double* eps) {
  const int64_t L = spec_.num_actions;
  double* g = scratch_.data();
  for (int64_t e = 0; e < n; ++e) {
    const float* l = logits + e * stride;
    if (eps && !greedy) {  // epsilon-greedy: uniform with probability eps, else the first largest logit
      const int64_t best = std::max_element(l, l + L) - l;
      const bool explore = rng_.uniform() < eps[e];
      const int64_t a = explore ? std::min<int64_t>(L - 1, int64_t(rng_.uniform() * double(L))) : best;
      actions[e] = a;
      if (out.logp) out.logp[e * out.logp_stride] = float(std::log((a == best ? 1 - eps[e] : 0.0) + eps[e] / double(L)));
      if (out.dist && out.dist + e * out.dist_stride != l) std::memcpy(out.dist + e * out.dist_stride, l, size_t(L) * sizeof(float));
      continue;
    }
    const double m = *std::max_element(l, l + L);
    double sum = 0;
    for (int64_t j = 0; j < L; ++j) sum += std::exp(double(l[j]) - m);
    // Gumbel-max: argmax_j l_j - log(-log u_j) is a sample of softmax(l).
    for (int64_t j = 0; j < L; ++j) g[j] = greedy ? double(l[j]) : double(l[j]) - std::log(-std::log(rng_.uniform()));
    const int64_t a = std::max_element(g, g + L) - g;
    actions[e] = a;
    if (out.logp) out.logp[e * out.logp_stride] = float(double(l[a]) - m - std::log(sum));
    if (out.dist && out.dist + e * out.dist_stride != l) std::memcpy(out.dist + e * out.dist_stride, l, size_t(L) * sizeof(float));
  }
}

void Sampler::box(const float* mean, int64_t mean_stride, const float* log_std, int64_t log_std_stride, int64_t n,
                  float* actions, const Rows& out, bool greedy) {
  const int64_t A = spec_.action_dim;
  for (int64_t e = 0; e < n; ++e) {
    const float* mu = mean + e * mean_stride;
    const float* ls = log_std + e * log_std_stride;
    float* a = actions + e * A;
    double lp = 0;
    for (int64_t j = 0; j < A; ++j) {
      const double z = greedy ? 0.0 : rng_.normal();
      a[j] = float(double(mu[j]) + std::exp(double(ls[j])) * z);
      lp += -0.5 * z * z - double(ls[j]) - kHalfLog2Pi;
    }
    if (out.logp) out.logp[e * out.logp_stride] = float(lp);
    if (out.dist) {
      float* d = out.dist + e * out.dist_stride;
      if (d != mu) std::memmove(d, mu, size_t(A) * sizeof(float));
      if (d + A != ls) std::memmove(d + A, ls, size_t(A) * sizeof(float));
    }
  }
}

void Sampler::rows(const float* dist, int64_t stride, int64_t n, void* actions, const Rows& out, bool greedy,
                   const double* eps) {
  if (spec_.discrete) return discrete(dist, stride, n, static_cast<int64_t*>(actions), out, greedy, eps);
  box(dist, stride, dist + spec_.action_dim, stride, n, static_cast<float*>(actions), out, greedy);
}

}  // namespace mpirl::models
