#pragma once
// What the [r2d2] section decides for more than one layer.
#include "core/config.h"

namespace mpirl {

// R2D2 with r2d2.initial_priority = "actor": the actors act on Q-values (models/: ModelOptions::act_q)
// and send each sequence's priority with it (comm/: the layout's initial_priority field).
inline bool r2d2_actor_priorities(const Config& cfg) {
  return cfg.learner.algo == "r2d2" && cfg.r2d2.initial_priority == "actor";
}

}  // namespace mpirl
