#include "learner/exit_code.h"

#include <spdlog/spdlog.h>

#include "core/checkpoint.h"
#include "core/signals.h"
#include "learner/checkpoint_weights.h"

namespace mpirl::learner {

int exit_code(const std::string& reason, const ReplayStatus& final_status, const Checkpointer& checkpoints,
              const RunStart& start) {
  if (reason == "interrupted") return kExitInterrupted;
  if (reason == "nonfinite") return kExitNonFinite;
  if (reason != "preempted") return final_status.dump.final_failed ? kExitDumpFailed : 0;
  if (!checkpoints.enabled()) {
    spdlog::warn("preempted with run.checkpoint = \"never\": nothing to resume; exit 0");
    return 0;
  }
  if (ckpt::latest(start.run_dir, checkpoint_weights_problem).dir.empty()) {
    spdlog::error("preempted, but {} holds no complete checkpoint; exit 1 (a requeued run would start over)",
                  ckpt::checkpoints_dir(start.run_dir));
    return 1;
  }
  return kExitPreempted;
}

}  // namespace mpirl::learner
