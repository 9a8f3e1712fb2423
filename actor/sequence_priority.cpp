#include "actor/sequence_priority.h"

#include <algorithm>
#include <cmath>

namespace mpirl::actor {

PriorityOptions priority_options(const Config& cfg) {
  PriorityOptions o;
  o.burn_in = cfg.r2d2.burn_in;
  o.n_step = cfg.r2d2.n_step;
  o.gamma = cfg.learner.gamma;
  o.eta = cfg.r2d2.priority_eta;
  o.rescale_eps = cfg.r2d2.rescale_eps;
  o.reward_scale = cfg.learner.reward_scale;
  o.reward_clip = cfg.learner.reward_clip;
  return o;
}

namespace {

double rescale(double x, double eps) {
  return (x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0) * (std::sqrt(std::abs(x) + 1) - 1) + eps * x;
}

double unrescale(double y, double eps) {  // the learner's cancellation-free form
  const double u = std::abs(y) + 1 + eps;
  const double s = 2 * u / (1 + std::sqrt(1 + 4 * eps * u));
  return (y > 0 ? 1.0 : y < 0 ? -1.0 : 0.0) * (s * s - 1);
}

double max_q(const float* row, int64_t A) { return *std::max_element(row, row + A); }

}  // namespace

float sequence_priority(const float* q, int64_t q_stride, int64_t A, const int64_t* actions, const float* rewards,
                        const uint8_t* terminated, const uint8_t* truncated, int64_t T, const PriorityOptions& o) {
  double max_abs = 0, sum_abs = 0;
  int64_t count = 0;
  for (int64_t t = o.burn_in; t < T; ++t) {
    double g = 0, disc = 1;
    bool closed = false;
    for (int k = 0; k < o.n_step; ++k) {
      const int64_t u = t + k;
      if (u >= T) break;  // runs past the sequence: the bootstrap Q is the next rollout's
      double r = double(rewards[u]) * o.reward_scale;
      if (o.reward_clip > 0) r = std::clamp(r, -o.reward_clip, o.reward_clip);
      g += disc * r;
      disc *= o.gamma;
      if (terminated[u]) {
        closed = true;
        break;
      }
      if (truncated[u]) break;  // bootstraps from the learner's value of the final observation
      if (k == o.n_step - 1 && u + 1 < T) {
        g += disc * unrescale(max_q(q + (u + 1) * q_stride, A), o.rescale_eps);
        closed = true;
      }
    }
    if (!closed) continue;
    const double taken = q[t * q_stride + actions[t]];
    const double d = std::abs(taken - rescale(g, o.rescale_eps));
    max_abs = std::max(max_abs, d);
    sum_abs += d;
    ++count;
  }
  if (count == 0) return -1.0f;
  return float(o.eta * max_abs + (1 - o.eta) * sum_abs / double(count));
}

}  // namespace mpirl::actor
