#pragma once
// The replay role: one rank holding the single global buffer for all learners.
#include "runtime/config.h"
#include "runtime/roles.h"

namespace mpirl::buffer {

// Serves actors' rollouts and learners' sample requests until learner 0 says the run is over,
// every actor has sent ActorDone and every learner LearnerBye.
//  - A rollout is received only while the queue has room for it (back-pressure): actors hold at
//    most actor.max_inflight unacknowledged rollouts, so no rank's memory grows without bound.
//  - Sample requests are served FIFO; each item is sampled exactly once (queue semantics).
//  - Replies to learner 0 carry the episode returns/lengths seen since the last one, and the
//    replay's counters (env steps, fill).
void run_replay(const Config& cfg, const Comms& comms);

}  // namespace mpirl::buffer
