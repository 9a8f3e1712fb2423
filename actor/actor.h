#pragma once
// The actor role: E envs stepped in lock-step with local CPU inference (no grad), rollouts of
// T steps x E envs written into one of actor.max_inflight preallocated message buffers and sent to
// the replay with MPI_Isend while the next one fills (double buffering). New parameters arrive
// through a posted MPI_Ibcast that is tested between steps and swapped in without blocking.
#include <cstdint>

#include "core/config.h"
#include "comm/ranks.h"

namespace mpirl::actor {

// `segment`: 0 for a fresh run, k for its k-th resume (mixed into the env and sampling seeds).
void run_actor(const Config& cfg, const Comms& comms, int64_t segment);

}  // namespace mpirl::actor
