#pragma once
// Learner 0's side of the parameter channel: the newest parameters go to whoever runs the policy
// (every actor, or with central inference the inference ranks) when the schedule
// (learner/publish_schedule.h) says so and the previous broadcast has completed.
#include <cstdint>
#include <vector>

#include "comm/param_channel.h"
#include "comm/ranks.h"
#include "core/clock.h"
#include "learner/publish_schedule.h"
#include "models/policy.h"

namespace mpirl::learner {

class Publisher {
 public:
  Publisher(const Comms& comms, models::Policy& policy, int tests_per_poll)
      : policy_(policy),
        flat_(size_t(models::num_params(policy))),
        channel_(comms.publish, int64_t(flat_.size()), tests_per_poll) {}
  void due() { schedule_.due(); }
  // `version`: of the parameters as they are now (the updates so far).
  void poll(int64_t version) {
    const int64_t v = schedule_.take(channel_.idle(), version, now_seconds());
    if (v < 0) return;
    models::write_flat(policy_, flat_.data());
    channel_.publish(flat_.data(), v);
  }
  // Waits for the broadcast in flight: the first one, at start, which also waits for the actors
  // to build their envs, so it is left out of the broadcast times.
  void wait() {
    channel_.wait();
    schedule_.untime_in_flight();
  }
  void stop() { channel_.publish_stop(); }
  const PublishSchedule& schedule() const { return schedule_; }

 private:
  models::Policy& policy_;
  std::vector<float> flat_;
  ParamChannel channel_;
  PublishSchedule schedule_;
};

}  // namespace mpirl::learner
