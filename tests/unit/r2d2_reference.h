#pragma once
// Float64 references for R2D2's tests, written apart from learner/algorithms/r2d2/targets.h: the
// value rescaling h and its inverse by bisection (h is increasing).
#include <cmath>

namespace r2d2_reference {
inline double h(double x, double eps) { return (x > 0 ? 1 : x < 0 ? -1 : 0) * (std::sqrt(std::abs(x) + 1) - 1) + eps * x; }

inline double h_inverse(double y, double eps, double lo = -1e4, double hi = 1e4) {
  for (int i = 0; i < 200; ++i) (h((lo + hi) / 2, eps) < y ? lo : hi) = (lo + hi) / 2;
  return (lo + hi) / 2;
}
}  // namespace r2d2_reference
