#pragma once
// Learner 0 leaving when no peer can be waited for: Open MPI's launcher ending the job (a lost
// rank or node, mpirun stopped or interrupted), or its own fatal error. It saves what needs no
// peer -- the summary first (small), then model.pt -- with local writes only, so bounded in time.
#include <cstdint>
#include <exception>
#include <string>

#include "core/run_dir.h"
#include "envs/env.h"
#include "learner/learner_checkpoint.h"
#include "learner/run_controller.h"
#include "models/policy.h"

namespace mpirl::learner {

struct LeavingContext {
  bool lead;
  const Checkpointer& checkpoints;
  const RunStart& start;
  RunController& run;
  models::Policy& policy;
  const envs::EnvSpec& spec;
  const int64_t& version;  // updates so far (read when leaving)
};

// Returns at once unless the launcher is ending the job (SIGTERM from orted/mpirun; it SIGKILLs
// every rank a second later); then learner 0 saves what it can and every learner exits
// (kExitInterrupted after Ctrl-C, else kExitAborted) without returning.
void leave_if_launcher_ends_job(const LeavingContext& c);
// Learner 0's own fatal error `e`, before the job is aborted: model.pt (if finite) and a summary
// naming the error and the last checkpoint. Other learners: nothing.
void save_on_error(const LeavingContext& c, const std::exception& e);

}  // namespace mpirl::learner
