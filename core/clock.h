#pragma once
// Time and polite waiting. Ranks never busy-poll: every wait tests for work and then sleeps with
// an exponential back-off (10 us .. 1 ms), so oversubscribed ranks leave the CPU to the ranks
// that have work.
#include <chrono>

namespace mpirl {

class Backoff {
 public:
  void idle();  // sleep, doubling the pause each time up to the cap
  void reset() { pause_us_ = kMinUs; }

 private:
  static constexpr int kMinUs = 10, kMaxUs = 1000;
  int pause_us_ = kMinUs;
};

// Monotonic seconds.
double now_seconds();

}  // namespace mpirl
