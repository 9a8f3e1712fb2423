#pragma once
// The inference role (actor.inference = "central"): serves the actors of its host with batched
// forward passes of the policy (inference/batcher.h, inference/engine.h) and keeps their envs'
// core states. Parameters arrive from learner 0 over the publish broadcast, as actors receive
// them with local inference; batching statistics go to learner 0 every run.log_interval_s. The
// messages and the stop sequence: comm/protocol.h, comm/inference_wire.h.
#include <cstdint>

#include "comm/ranks.h"
#include "core/config.h"

namespace mpirl::inference {

void run_inference(const Config& cfg, const Comms& comms);

}  // namespace mpirl::inference
