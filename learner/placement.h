#pragma once
// Where a learner runs: its device (the GPU pick of learner/device.h, made with what this process
// sees) and the placement table of every rank that summary.json carries.
#include <nlohmann/json.hpp>

#include "comm/ranks.h"
#include "core/config.h"
#include "learner/gradient_reducer.h"

namespace mpirl::learner {

// The learner's device, and what the choice of gradient reducer needs to know about it.
// `picked`: the GPU index chosen (-1: CPU), for the placement table. Test seam (tests/cluster):
// MPIRL_FAKE_GPUS=N on a machine without CUDA makes the pick as if N GPUs were visible on every
// node; the learner still trains on the CPU and reports the pick.
ReducerRequest pick_device(const Config& cfg, const Comms& comms, int* picked);

// Every learner calls it (a gather over the learners); learner 0 gets the table: rank, role,
// host, and for learners the GPU each picked (-1: CPU).
nlohmann::json rank_table(const Comms& comms, int picked);

}  // namespace mpirl::learner
