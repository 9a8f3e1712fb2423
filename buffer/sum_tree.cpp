#include "buffer/sum_tree.h"

#include <cmath>

#include "core/error.h"

namespace mpirl::buffer {

SumTree::SumTree(int64_t capacity) : capacity_(capacity), P_(1) {
  MPIRL_CHECK(capacity > 0, "sum tree capacity {}", capacity);
  while (P_ < capacity) P_ *= 2;
  nodes_.assign(size_t(2 * P_), 0.0);
}

void SumTree::set(int64_t i, double w) {
  MPIRL_CHECK(i >= 0 && i < capacity_ && w >= 0 && std::isfinite(w), "sum tree set({}, {})", i, w);
  // Recompute each ancestor from its children (no drift from accumulated deltas), carrying the
  // running sum in a register: one sibling load per level.
  size_t k = size_t(P_ + i);
  double sum = w;
  nodes_[k] = w;
  for (; k > 1; k /= 2) {
    sum += nodes_[k ^ 1];
    nodes_[k / 2] = sum;
  }
}

int64_t SumTree::find(double u) const {
  size_t k = 1;
  while (k < size_t(P_)) {
    // A predictable-enough branch beats a branchless select here: speculation runs ahead into
    // the next level's load (measured with bench_replay_ops).
    const size_t l = 2 * k;
    if (u < nodes_[l]) {
      k = l;
    } else {
      u -= nodes_[l];
      k = l + 1;
    }
  }
  // Rounding may land on a zero leaf at the right edge: step back to the last positive one.
  while (nodes_[k] <= 0 && k > size_t(P_)) --k;
  return int64_t(k) - P_;
}

}  // namespace mpirl::buffer
