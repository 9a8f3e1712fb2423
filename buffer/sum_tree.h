#pragma once
// A sum tree over `capacity` non-negative leaf weights: O(log n) set and prefix-sum search, O(1)
// total. Leaves sit at [P, 2P) of one flat array (P = capacity rounded up to a power of two), so
// an update or a descent touches one cache line per level near the root.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace mpirl::buffer {

class SumTree {
 public:
  explicit SumTree(int64_t capacity);
  int64_t capacity() const { return capacity_; }
  void set(int64_t i, double w);
  double get(int64_t i) const { return nodes_[size_t(P_ + i)]; }
  double total() const { return nodes_[1]; }
  // The leaf i with prefix(i) <= u < prefix(i) + w_i, for 0 <= u < total(); leaves of weight 0
  // are never returned.
  int64_t find(double u) const;

 private:
  int64_t capacity_, P_;
  std::vector<double> nodes_;
};

}  // namespace mpirl::buffer
