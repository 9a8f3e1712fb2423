#pragma once
// What the learners decide and combine together, each a collective over comms.learners that every
// learner makes at the same point of its loop (learner/learner.cpp): the per-update agreement, the
// normalisers' averaging, and the end-of-run parameter comparison and count totals.
#include <cstdint>
#include <string>

#include "comm/ranks.h"
#include "learner/normalizers.h"
#include "learner/run_controller.h"
#include "models/policy.h"

namespace mpirl::learner {

// What every learner must decide together before an update (one MAX all-reduce): a stop anywhere
// stops all, at the same update (an interrupt wins over a preemption, which wins over any other
// reason; the launcher ending the job never gets here: each learner leaves at once); a
// checkpoint (due on learner 0) is taken by all at the same update boundary; the update happens
// unless no learner kept any sequence (every one too old), since all learners must take the same
// optimizer steps.
struct Agreed {
  int stop = 0;  // 0 go on, 1 stop, 2 preempted, 3 interrupted
  bool update = false, checkpoint = false;
  int64_t env_steps = 0;  // the most any learner has heard of: where the schedules stand
};
Agreed agree(const Comms& comms, const std::string& reason, bool kept_any, bool checkpoint, int64_t env_steps);

// The normalisers' batch moments averaged over the learners (host MPI_Allreduce; none with one).
AverageFn learner_average(const Comms& comms);

// Largest parameter difference between learner 0 and the others (0 when they stayed identical;
// meaningful on learner 0).
double param_difference(const Comms& comms, models::Policy& policy);

// The learners' counts summed onto learner 0.
LearnerCounts sum_counts(const Comms& comms, const LearnerCounts& c);

}  // namespace mpirl::learner
