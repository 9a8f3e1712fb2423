#pragma once
// When learner 0 broadcasts parameters. A publish falls due every learner.publish_interval
// updates; it goes out as soon as the previous broadcast has completed, carrying the newest
// parameters under their own version (a due publish is never dropped because a broadcast was in
// flight, and it is labelled with the version of what is sent, not of when it fell due).
#include <cstdint>

namespace mpirl::learner {

class PublishSchedule {
 public:
  void due() { due_ = true; }
  // The version to publish now (-1: nothing): `current`, the version of the parameters as they
  // are, once something is due and `channel_idle` (the previous broadcast completed). `now`
  // (seconds) times the broadcasts: from the take that starts one to the first call that finds
  // the channel idle again, which is when learner 0 can send the next.
  int64_t take(bool channel_idle, int64_t current, double now = 0.0) {
    if (channel_idle && in_flight_) {
      in_flight_ = false;
      ++completed_;
      const double s = now - started_;
      seconds_ += s;
      max_seconds_ = s > max_seconds_ ? s : max_seconds_;
    }
    if (!due_ || !channel_idle) return -1;
    due_ = false;
    ++published_;
    last_ = current;
    in_flight_ = true;
    started_ = now;
    return current;
  }
  // The broadcast in flight is not timed (the first one, which waits for the actors' start-up).
  void untime_in_flight() { in_flight_ = false; }
  int64_t published() const { return published_; }
  int64_t last_version() const { return last_; }
  // Broadcasts seen to complete, and their mean and longest time from start to completion.
  int64_t completed() const { return completed_; }
  double mean_seconds() const { return completed_ ? seconds_ / double(completed_) : 0.0; }
  double max_seconds() const { return max_seconds_; }

 private:
  bool due_ = false, in_flight_ = false;
  int64_t published_ = 0, last_ = -1, completed_ = 0;
  double started_ = 0.0, seconds_ = 0.0, max_seconds_ = 0.0;
};

}  // namespace mpirl::learner
