#pragma once
// Reverb's rate limiter semantics (reverb/cc/rate_limiter.h), counted in items:
//   - no sample until min_size_to_sample items are stored;
//   - with samples_per_insert = r > 0, the difference d = inserts * r - samples is kept within
//     [min_size * r - error_buffer, min_size * r + error_buffer]: an insert that would push d
//     above the top waits for samples, a sample that would push it below the bottom waits for
//     inserts (inserts before min_size is reached are always allowed);
//   - queue mode: inserts also wait while the buffer is full, nothing is ever evicted unsampled.
#include <cstdint>

namespace mpirl::buffer {

struct RateLimiterOptions {
  int64_t min_size_to_sample = 1;
  double samples_per_insert = 0;  // 0 = no ratio
  double error_buffer = 0;
  bool queue = false;
  int64_t capacity = 0;
};

class RateLimiter {
 public:
  explicit RateLimiter(const RateLimiterOptions& o);
  bool can_insert(int64_t n, int64_t size) const;
  bool can_sample(int64_t n, int64_t size) const;
  void inserted(int64_t n) { inserts_ += n; }
  void sampled(int64_t n) { samples_ += n; }
  void restore(int64_t inserts, int64_t samples) { inserts_ = inserts, samples_ = samples; }  // resume
  int64_t inserts() const { return inserts_; }
  int64_t samples() const { return samples_; }
  double min_diff() const { return min_diff_; }
  double max_diff() const { return max_diff_; }

 private:
  RateLimiterOptions o_;
  double min_diff_, max_diff_;
  int64_t inserts_ = 0, samples_ = 0;
};

}  // namespace mpirl::buffer
