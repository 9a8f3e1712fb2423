#pragma once
// The replay rank's part of a run checkpoint (core/checkpoint.h): replay.h5 (the buffer's items,
// an ordinary dump: buffer/hdf5_dump.h) and replay_state.json (what the dump does not hold).
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "buffer/hdf5_dump.h"
#include "buffer/replay_buffer.h"
#include "comm/protocol.h"

namespace mpirl::buffer {

struct ReplayCheckpoint {
  ReplayStatus status;                 // the replay's own counters (env steps, rollouts, episodes, ...)
  std::vector<float> returns;          // finished episodes not yet sent to learner 0
  std::vector<int32_t> lengths;
  ReplayBuffer::ResumeState buffer;    // counters, insertion numbers, limiter, sampler RNG
  uint32_t checksum = 0;               // of the items (read_replay_checkpoint: verified on restore)
};

// Writes <dir>/replay.h5 and <dir>/replay_state.json, both fsync'ed. Throws Error naming the file.
DumpInfo write_replay_checkpoint(const ReplayBuffer& rb, const ReplayCheckpoint& st, const std::string& dir,
                                 const std::string& env_id, const std::string& config);
// Restores the items of <dir>/replay.h5 into `rb` (empty, same layout), applies the buffer state
// and returns the rest. Throws Error naming the file and what is wrong.
ReplayCheckpoint read_replay_checkpoint(ReplayBuffer& rb, const std::string& dir, const std::string& env_id);

}  // namespace mpirl::buffer
