#pragma once
// The learner role: a BatchSource feeds a Trainer, a RunController decides when to stop and
// writes the run's files. Learner 0 also publishes parameters to the actors. The sequence of
// messages is written down once, in comm/protocol.h.
#include <string>

#include "comm/ranks.h"
#include "core/config.h"

namespace mpirl::learner {

// run_dir is "" on learners other than 0.
void run_learner(const Config& cfg, const Comms& comms, const std::string& run_dir);

}  // namespace mpirl::learner
