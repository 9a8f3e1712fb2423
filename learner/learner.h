#pragma once
// The learner role. Learner 0 also owns the run: stop condition, status line, metrics.jsonl,
// summary.json and the saved model (run_dir is "" on other learners).
#include <string>

#include "runtime/config.h"
#include "runtime/roles.h"

namespace mpirl::learner {

void run_learner(const Config& cfg, const Comms& comms, const std::string& run_dir);

}  // namespace mpirl::learner
