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
  // are, once something is due and `channel_idle` (the previous broadcast completed).
  int64_t take(bool channel_idle, int64_t current) {
    if (!due_ || !channel_idle) return -1;
    due_ = false;
    ++published_;
    last_ = current;
    return current;
  }
  int64_t published() const { return published_; }
  int64_t last_version() const { return last_; }

 private:
  bool due_ = false;
  int64_t published_ = 0, last_ = -1;
};

}  // namespace mpirl::learner
