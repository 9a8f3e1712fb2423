#pragma once
// The replay buffer's options as the config sets them (shared by the replay rank and the tools).
#include "buffer/replay_buffer.h"
#include "core/config.h"

namespace mpirl::buffer {

ReplayOptions replay_options(const Config& cfg);
// The replay rank's options: chunks sized to take one whole rollout frame in place.
ReplayOptions server_options(const Config& cfg, const SeqLayout& layout, int shard = 0);

}  // namespace mpirl::buffer
