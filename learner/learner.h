#pragma once
// The learner role: a BatchSource feeds a Trainer, a RunController decides when to stop and
// writes the run's files. Learner 0 also publishes parameters to the actors. The sequence of
// messages is written down once, in comm/protocol.h.
#include <string>

#include "comm/ranks.h"
#include "core/config.h"
#include "core/run_dir.h"
#include "learner/checkpoint_weights.h"  // checkpoint_weights_problem, for ckpt::latest

namespace mpirl::learner {

// Returns the rank's exit code: 0; on learner 0 of a preempted run, kExitPreempted
// (core/signals.h) when a complete checkpoint exists to resume from, 1 when none does, 0 with
// run.checkpoint = "never"; kExitInterrupted after SIGINT. When the Open MPI launcher ends the
// job (SIGTERM from orted/mpirun), every learner leaves with kExitAborted without returning.
int run_learner(const Config& cfg, const Comms& comms, const RunStart& start);

}  // namespace mpirl::learner
