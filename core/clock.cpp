#include "core/clock.h"

#include <algorithm>
#include <thread>

namespace mpirl {

void Backoff::idle() {
  std::this_thread::sleep_for(std::chrono::microseconds(pause_us_));
  pause_us_ = std::min(pause_us_ * 2, max_us_);
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace mpirl
