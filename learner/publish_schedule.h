#pragma once
// When learner 0 broadcasts parameters. A publish falls due every learner.publish_interval
// updates; it goes out as soon as the previous broadcast has completed, carrying the newest
// parameters (a due publish is never dropped because a broadcast was in flight, and a newer due
// version replaces an older one that has not gone out yet).
#include <cstdint>

namespace mpirl::learner {

class PublishSchedule {
 public:
  void due(int64_t version) { due_ = version; }
  // The version to publish now (-1: nothing). `channel_idle`: the previous broadcast completed.
  int64_t take(bool channel_idle) {
    if (due_ < 0 || !channel_idle) return -1;
    const int64_t v = due_;
    due_ = -1;
    ++published_;
    last_ = v;
    return v;
  }
  int64_t published() const { return published_; }
  int64_t last_version() const { return last_; }

 private:
  int64_t due_ = -1, published_ = 0, last_ = -1;
};

}  // namespace mpirl::learner
