#pragma once
// Which stored item a sample returns. All selectors share one interface; the replay buffer keeps
// the items, selectors keep only slot ids (and priorities).
//   fifo:        the oldest item (with max_times_sampled = 1 this is a queue)
//   uniform:     every item equally likely
//   prioritized: item i with probability p_i^alpha / sum_j p_j^alpha (sum tree)
#include <cstdint>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "buffer/sum_tree.h"

namespace mpirl::buffer {

class Selector {
 public:
  virtual ~Selector() = default;
  virtual void insert(int64_t slot, int64_t seq, double priority) = 0;
  virtual void remove(int64_t slot) = 0;
  virtual void update(int64_t slot, double priority) = 0;
  // Draws one slot; *prob is the probability it had of being drawn.
  virtual int64_t sample(std::mt19937_64& rng, double* prob) = 0;
  virtual int64_t size() const = 0;
};

class FifoSelector final : public Selector {
 public:
  explicit FifoSelector(int64_t capacity) : seq_of_(size_t(capacity), -1) {}
  void insert(int64_t slot, int64_t seq, double) override;
  void remove(int64_t slot) override;
  void update(int64_t, double) override {}
  int64_t sample(std::mt19937_64& rng, double* prob) override;
  int64_t size() const override { return n_; }

 private:
  void prune();
  std::deque<std::pair<int64_t, int64_t>> order_;  // (seq, slot), oldest first; removed ones skipped
  std::vector<int64_t> seq_of_;                    // slot -> seq of the item it holds, -1 if none
  int64_t n_ = 0;
};

class UniformSelector final : public Selector {
 public:
  explicit UniformSelector(int64_t capacity) : pos_(size_t(capacity), -1) {}
  void insert(int64_t slot, int64_t, double) override;
  void remove(int64_t slot) override;
  void update(int64_t, double) override {}
  int64_t sample(std::mt19937_64& rng, double* prob) override;
  int64_t size() const override { return int64_t(items_.size()); }

 private:
  std::vector<int64_t> items_, pos_;
};

class PrioritizedSelector final : public Selector {
 public:
  PrioritizedSelector(int64_t capacity, double alpha) : tree_(capacity), alpha_(alpha) {}
  void insert(int64_t slot, int64_t, double priority) override;
  void remove(int64_t slot) override;
  void update(int64_t slot, double priority) override;
  int64_t sample(std::mt19937_64& rng, double* prob) override;
  int64_t size() const override { return n_; }
  const SumTree& tree() const { return tree_; }

 private:
  double weight(double p) const;
  SumTree tree_;
  double alpha_;
  int64_t n_ = 0;
};

std::unique_ptr<Selector> make_selector(const std::string& kind, int64_t capacity, double alpha);

}  // namespace mpirl::buffer
