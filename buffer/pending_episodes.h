#pragma once
// Finished-episode statistics the replay holds until a reply to learner 0 carries them (oldest
// first, at most kMaxPending: the oldest are dropped beyond that, and counted, so that learner 0's
// episodes + pending + dropped = the replay's episodes). A checkpoint saves them and the count.
#include <algorithm>
#include <cstdint>
#include <deque>
#include <vector>

namespace mpirl::buffer {

class PendingEpisodes {
 public:
  static constexpr size_t kMaxPending = 100000;
  size_t size() const { return returns_.size(); }
  int64_t dropped() const { return dropped_; }
  void add(const float* r, const int32_t* l, size_t m) {
    returns_.insert(returns_.end(), r, r + m);
    lengths_.insert(lengths_.end(), l, l + m);
    const size_t over = returns_.size() > kMaxPending ? returns_.size() - kMaxPending : 0;
    returns_.erase(returns_.begin(), returns_.begin() + long(over));
    lengths_.erase(lengths_.begin(), lengths_.begin() + long(over));
    dropped_ += int64_t(over);
  }
  // Moves the oldest m (<= size()) into r and l.
  void take(size_t m, float* r, int32_t* l) {
    std::copy_n(returns_.begin(), m, r);
    std::copy_n(lengths_.begin(), m, l);
    returns_.erase(returns_.begin(), returns_.begin() + long(m));
    lengths_.erase(lengths_.begin(), lengths_.begin() + long(m));
  }
  std::vector<float> returns() const { return {returns_.begin(), returns_.end()}; }
  std::vector<int32_t> lengths() const { return {lengths_.begin(), lengths_.end()}; }
  void assign(const std::vector<float>& r, const std::vector<int32_t>& l, int64_t dropped) {
    returns_.assign(r.begin(), r.end());
    lengths_.assign(l.begin(), l.end());
    dropped_ = dropped;
  }

 private:
  std::deque<float> returns_;
  std::deque<int32_t> lengths_;
  int64_t dropped_ = 0;  // beyond kMaxPending, over the run (a resumed one included)
};

}  // namespace mpirl::buffer
