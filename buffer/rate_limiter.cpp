#include "buffer/rate_limiter.h"

#include <limits>

namespace mpirl::buffer {

RateLimiter::RateLimiter(const RateLimiterOptions& o) : o_(o) {
  if (o.samples_per_insert > 0) {
    min_diff_ = double(o.min_size_to_sample) * o.samples_per_insert - o.error_buffer;
    max_diff_ = double(o.min_size_to_sample) * o.samples_per_insert + o.error_buffer;
  } else {
    min_diff_ = -std::numeric_limits<double>::infinity();
    max_diff_ = std::numeric_limits<double>::infinity();
  }
}

bool RateLimiter::can_insert(int64_t n, int64_t size) const {
  if (o_.queue && size + n > o_.capacity) return false;
  if (o_.samples_per_insert <= 0) return true;
  if (inserts_ + n <= o_.min_size_to_sample) return true;
  return double(inserts_ + n) * o_.samples_per_insert - double(samples_) <= max_diff_;
}

bool RateLimiter::can_sample(int64_t n, int64_t size) const {
  if (size < o_.min_size_to_sample || size <= 0) return false;
  if (o_.queue && size < n) return false;
  if (o_.samples_per_insert <= 0) return true;
  return double(inserts_) * o_.samples_per_insert - double(samples_ + n) >= min_diff_;
}

}  // namespace mpirl::buffer
