#pragma once
// Learner 0's exit code, which mpirun (and Slurm, and train.sbatch's requeue) sees.
#include <string>

#include "comm/protocol.h"
#include "core/run_dir.h"
#include "learner/learner_checkpoint.h"

namespace mpirl::learner {

// 0; kExitInterrupted (130) after an interrupt; kExitNonFinite; kExitDumpFailed when the replay's
// final dump failed; for a preemption kExitPreempted (75: requeue me) only when a complete
// checkpoint exists to resume from (a requeued run without one would start over: 1), 0 with
// run.checkpoint = "never".
int exit_code(const std::string& reason, const ReplayStatus& final_status, const Checkpointer& checkpoints,
              const RunStart& start);

}  // namespace mpirl::learner
