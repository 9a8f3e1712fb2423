#pragma once
// Time and polite waiting. Ranks never busy-poll: every wait tests for work and then sleeps with
// an exponential back-off (10 us .. 1 ms), so oversubscribed ranks leave the CPU to the ranks
// that have work.
#include <chrono>

namespace mpirl {

class Backoff {
 public:
  Backoff() = default;
  // A lower cap for waits whose latency matters (an actor's wait for its actions, the inference
  // rank's wait for requests): still a sleep, never a spin.
  explicit Backoff(int max_us) : max_us_(max_us < kMinUs ? kMinUs : max_us) {}
  void idle();  // sleep, doubling the pause each time up to the cap
  void reset() { pause_us_ = kMinUs; }

 private:
  static constexpr int kMinUs = 10, kMaxUs = 1000;
  int max_us_ = kMaxUs;
  int pause_us_ = kMinUs;
};

// Monotonic seconds.
double now_seconds();

}  // namespace mpirl
