#pragma once
// The replay buffer's options as the config sets them (shared by the replay rank and the tools).
#include "buffer/replay_buffer.h"
#include "core/config.h"

namespace mpirl::buffer {

ReplayOptions replay_options(const Config& cfg);

}  // namespace mpirl::buffer
