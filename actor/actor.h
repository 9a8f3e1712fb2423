#pragma once
// The actor role: E envs, split into actor.env_groups groups stepped in turn, with the policy run
// either here (actor.inference = "local": the CPU, no grad) or on an inference rank
// ("central": the actor sends each group's observations and samples from the distribution rows
// that come back, while its other groups step). Rollouts of T steps x E envs are written into one
// of actor.max_inflight preallocated message buffers and sent to the replay with MPI_Isend while
// the next one fills (double buffering). With local inference, new parameters arrive through a
// posted MPI_Ibcast that is tested between steps and swapped in without blocking.
#include <cstdint>

#include "core/config.h"
#include "comm/ranks.h"

namespace mpirl::actor {

// `segment`: 0 for a fresh run, k for its k-th resume (mixed into the env and sampling seeds).
void run_actor(const Config& cfg, const Comms& comms, int64_t segment);

}  // namespace mpirl::actor
