#include "buffer/selectors.h"

#include <cmath>

#include "core/error.h"

namespace mpirl::buffer {

void FifoSelector::insert(int64_t slot, int64_t seq, double) {
  MPIRL_CHECK(seq_of_[size_t(slot)] < 0, "fifo: slot {} inserted twice", slot);
  MPIRL_CHECK(order_.empty() || order_.back().first < seq, "fifo: insertion numbers must increase");
  seq_of_[size_t(slot)] = seq;
  order_.emplace_back(seq, slot);
  ++n_;
}

void FifoSelector::prune() {
  while (!order_.empty() && seq_of_[size_t(order_.front().second)] != order_.front().first) order_.pop_front();
  if (order_.size() > 2 * seq_of_.size() + 64) {
    std::deque<std::pair<int64_t, int64_t>> keep;
    for (auto& e : order_)
      if (seq_of_[size_t(e.second)] == e.first) keep.push_back(e);
    order_.swap(keep);
  }
}

void FifoSelector::remove(int64_t slot) {
  MPIRL_CHECK(slot >= 0 && size_t(slot) < seq_of_.size() && seq_of_[size_t(slot)] >= 0, "fifo: slot {} not held", slot);
  seq_of_[size_t(slot)] = -1;
  --n_;
  prune();
}

int64_t FifoSelector::sample(std::mt19937_64&, double* prob) {
  MPIRL_CHECK(n_ > 0, "fifo: sample from an empty selector");
  prune();
  *prob = 1.0;
  return order_.front().second;
}

void UniformSelector::insert(int64_t slot, int64_t, double) {
  MPIRL_CHECK(pos_[size_t(slot)] < 0, "uniform: slot {} inserted twice", slot);
  pos_[size_t(slot)] = int64_t(items_.size());
  items_.push_back(slot);
}

void UniformSelector::remove(int64_t slot) {
  int64_t p = pos_[size_t(slot)];
  MPIRL_CHECK(p >= 0, "uniform: slot {} not held", slot);
  int64_t last = items_.back();
  items_[size_t(p)] = last;
  pos_[size_t(last)] = p;
  items_.pop_back();
  pos_[size_t(slot)] = -1;
}

int64_t UniformSelector::sample(std::mt19937_64& rng, double* prob) {
  MPIRL_CHECK(!items_.empty(), "uniform: sample from an empty selector");
  std::uniform_int_distribution<size_t> d(0, items_.size() - 1);
  *prob = 1.0 / double(items_.size());
  return items_[d(rng)];
}

double PrioritizedSelector::weight(double p) const {
  // A zero priority would make an item unreachable forever; keep a tiny floor.
  return std::pow(std::max(p, 1e-8), alpha_);
}

void PrioritizedSelector::insert(int64_t slot, int64_t, double priority) {
  MPIRL_CHECK(tree_.get(slot) == 0, "prioritized: slot {} inserted twice", slot);
  tree_.set(slot, weight(priority));
  ++n_;
}

void PrioritizedSelector::remove(int64_t slot) {
  MPIRL_CHECK(tree_.get(slot) > 0, "prioritized: slot {} not held", slot);
  tree_.set(slot, 0.0);
  --n_;
}

void PrioritizedSelector::update(int64_t slot, double priority) {
  if (tree_.get(slot) > 0) tree_.set(slot, weight(priority));
}

int64_t PrioritizedSelector::sample(std::mt19937_64& rng, double* prob) {
  MPIRL_CHECK(n_ > 0 && tree_.total() > 0, "prioritized: sample from an empty selector");
  // 53 random bits -> [0, 1): cheaper than uniform_real_distribution, same resolution.
  const double u = double(rng() >> 11) * 0x1.0p-53;
  int64_t slot = tree_.find(u * tree_.total());
  *prob = tree_.get(slot) / tree_.total();
  return slot;
}

std::unique_ptr<Selector> make_selector(const std::string& kind, int64_t capacity, double alpha) {
  if (kind == "fifo") return std::make_unique<FifoSelector>(capacity);
  if (kind == "uniform") return std::make_unique<UniformSelector>(capacity);
  if (kind == "prioritized") return std::make_unique<PrioritizedSelector>(capacity, alpha);
  throw Error(fmt::format("unknown replay selector '{}'", kind));
}

}  // namespace mpirl::buffer
