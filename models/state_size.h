#pragma once
// The one model fact the replay rank needs, without LibTorch (the hardening build runs the replay
// rank under AddressSanitizer): floats of recurrent state per env of the configured model for
// `spec` (0 without a core), which every sequence carries as state0. Defined in models/policy.cpp.
#include <cstdint>

#include "core/config.h"
#include "envs/env.h"

namespace mpirl::models {

int64_t state_size(const Config& cfg, const envs::EnvSpec& spec);

}  // namespace mpirl::models
