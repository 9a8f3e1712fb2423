#include "learner/replay_status_json.h"

namespace mpirl::learner {

nlohmann::json to_json(const ReplayStatus& s) {
  nlohmann::json j = {{"env_steps", s.env_steps},
                      {"actor_env_steps", s.actor_env_steps},
                      {"rollouts", s.rollouts},
                      {"discarded_rollouts", s.discarded_rollouts},
                      {"episodes", s.episodes},
                      {"inserted", s.inserted},
                      {"restored", s.restored},
                      {"evicted", s.evicted},
                      {"consumed", s.consumed},
                      {"removed", s.removed()},
                      {"fill", s.fill},
                      {"capacity", s.capacity},
                      {"sampled", s.sampled},
                      {"batches", s.batches},
                      {"priority_updates", s.priority_updates},
                      {"stale_priority_updates", s.stale_priority_updates},
                      {"max_priority", s.max_priority},
                      {"sampled_by_learner", s.sampled_by_learner},
                      {"dumps", s.dump.dumps},
                      {"dump_failures", s.dump.failures}};
  return j;
}

}  // namespace mpirl::learner
