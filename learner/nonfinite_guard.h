#pragma once
// learner.on_nonfinite: what the learners do about optimizer steps skipped because the gradient
// norm was not finite (the trainer skips them on the device: learner/trainer.h). Every learner
// reads the trainer's counters at the same updates (every kCheckEvery), and the counters are the
// same on every learner (the norm is of the averaged gradients), so all decide alike with no
// collective of their own; a stop goes through the learners' usual stop agreement.
//   skip      skipped steps are counted and logged; nonfinite_limit in a row stop the run
//   rollback  nonfinite_limit in a row: back to the last state found finite (a device copy taken
//             every kSnapshotEvery healthy updates), the learning rate halved; a 4th time stops
//   stop      the first skipped step stops the run
// The state the run stops with is the last finite one (the bad steps never reached it), so the
// final checkpoint and model.pt are written from it.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "core/config.h"
#include "learner/trainer.h"

namespace mpirl::learner {

class NonFiniteGuard {
 public:
  static constexpr int64_t kCheckEvery = 16, kSnapshotEvery = 256, kMaxRollbacks = 3;
  NonFiniteGuard(const Config& cfg, bool lead);
  // After update `version` (updates so far). Returns why the run must stop ("" = go on).
  std::string after_update(Trainer& trainer, int64_t version);
  // For summary.json: the policy, steps skipped, the update they were first seen at, rollbacks.
  nlohmann::json summary(Trainer& trainer) const;

 private:
  const Config& cfg_;
  bool lead_;
  int64_t nan_at_ = -1;  // test hook MPIRL_TEST_NAN_AT_UPDATE
  int64_t reported_ = 0, first_seen_ = -1, rollbacks_ = 0;
  std::string stopped_;
};

}  // namespace mpirl::learner
