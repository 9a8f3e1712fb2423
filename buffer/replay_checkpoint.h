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
#include "core/config.h"
#include "core/run_dir.h"

namespace mpirl::buffer {

struct ReplayCheckpoint {
  ReplayStatus status;                 // the replay's own counters (env steps, rollouts, episodes, ...)
  std::vector<float> returns;          // finished episodes not yet sent to learner 0
  std::vector<int32_t> lengths;
  int64_t dropped = 0;                 // episode statistics dropped before learner 0 had them (over the run)
  ReplayBuffer::ResumeState buffer;    // counters, insertion numbers, limiter, sampler RNG
  uint32_t checksum = 0;               // of the items (read_replay_checkpoint: verified on restore)
  int64_t items = 0;                   // in replay.h5
};

// `part`: the files' stem, "replay" (one replay, or shard 0) or "replay.shard<k>" (shard k > 0:
// replay.shard1.h5 and replay.shard1_state.json); part_name(k) gives it.
std::string part_name(int shard);
// Writes <dir>/replay.h5 (the snapshot's items) and <dir>/replay_state.json, both fsync'ed.
// Throws Error naming the file.
DumpInfo write_replay_checkpoint(const DumpSnapshot& items, const ReplayCheckpoint& st, const std::string& dir,
                                 const std::string& env_id, const std::string& config, const DumpOptions& opts = {},
                                 const std::string& part = "replay");
DumpInfo write_replay_checkpoint(const ReplayBuffer& rb, const ReplayCheckpoint& st, const std::string& dir,
                                 const std::string& env_id, const std::string& config);
// Writes the replay's part and records the outcome in `k` (requests, completed or failures with
// the error, items, CRC-32, seconds); never throws: a failure is reported to learner 0. Returns
// the dump's info (path "" when it failed). May run on the replay's I/O thread: it touches
// nothing but its arguments.
DumpInfo write_checkpoint_part(const DumpSnapshot& items, const ReplayCheckpoint& st, const std::string& dir,
                               const Config& cfg, CheckpointStatus& k, const DumpOptions& opts = {},
                               const std::string& part = "replay");
// The replay rank's resume: read_replay_checkpoint from start.resume_from, then a line in
// <run>/resumed.jsonl with what it holds (items, CRC-32, counters), for checks against the checkpoint.
// The returned status has no dump or checkpoint history (this run's start afresh).
ReplayCheckpoint resume_from_checkpoint(ReplayBuffer& rb, const RunStart& start, const std::string& env_id,
                                        const DumpOptions& opts = {}, const std::string& part = "replay");
// replay_state.json's content (items and checksum: what replay.h5 must hold). Throws Error naming
// `path` and the missing or malformed field; never undefined behaviour (fuzzed: fuzz_state).
ReplayCheckpoint replay_state_from_json(const nlohmann::json& j, const std::string& path);
// Restores the items of <dir>/replay.h5 into `rb` (empty, same layout), applies the buffer state
// and returns the rest. Throws Error naming the file and what is wrong.
ReplayCheckpoint read_replay_checkpoint(ReplayBuffer& rb, const std::string& dir, const std::string& env_id,
                                        const DumpOptions& opts = {}, const std::string& part = "replay");

}  // namespace mpirl::buffer
