#pragma once
// The learner role: a BatchSource feeds a Trainer, a RunController decides when to stop and
// writes the run's files. Learner 0 also publishes parameters to the actors. The sequence of
// messages is written down once, in comm/protocol.h.
#include <string>

#include "comm/ranks.h"
#include "core/config.h"
#include "core/run_dir.h"

namespace mpirl::learner {

// Returns the rank's exit code: 0; on learner 0 of a preempted run, kExitPreempted
// (core/signals.h) when a complete checkpoint exists to resume from, 1 when none does, 0 with
// run.checkpoint = "never"; kExitInterrupted after SIGINT. When the Open MPI launcher ends the
// job (SIGTERM from orted/mpirun), every learner leaves with kExitAborted without returning.
int run_learner(const Config& cfg, const Comms& comms, const RunStart& start);

// What makes a complete checkpoint unfit to resume or evaluate that its CRCs cannot show: a policy
// in model.pt or learner.pt that holds NaN or inf (sealed by a diverged run of an older mpirl; this
// one never seals non-finite parameters). "" when both are finite. For ckpt::latest's check.
std::string checkpoint_weights_problem(const std::string& dir);

}  // namespace mpirl::learner
