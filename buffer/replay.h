#pragma once
// The replay role: one rank holding the single global buffer for all learners.
#include <string>

#include "core/config.h"
#include "comm/ranks.h"
#include "core/run_dir.h"

namespace mpirl::buffer {

// Serves actors' rollouts and learners' sample requests and priority updates until learner 0
// says the run is over, every actor has sent ActorDone and every learner LearnerBye.
//  - A rollout is received only while the rate limiter admits num_envs more items
//    (back-pressure): actors hold at most actor.max_inflight unacknowledged rollouts, so no
//    rank's memory grows without bound.
//  - Each sample request gets an independent batch of learner.batch_size items, with their slots,
//    generations and importance weights; priority updates from any learner apply to the items
//    still there, stale ones are counted and dropped.
//  - Replies to learner 0 carry the episode returns/lengths seen since the last one (at most
//    kMaxEpisodeStatsPerReply each), and every reply carries the replay's status.
//  - HDF5 dumps (buffer/dump_scheduler.h): every replay.dump_interval_s, on SIGUSR2 and at the end;
//    a failed dump is reported, never fatal.
//  - Its part of a checkpoint (buffer/replay_checkpoint.h) when learner 0 asks (comm/protocol.h);
//    a resumed run starts from the checkpoint's items, counters and pending episode statistics.
//  - Dumps, checkpoint parts and the restore at start run on an I/O thread while the loop keeps
//    serving and tells the learners it is busy (buffer/replay_server.h): a slow disk is no stall.
// Returns the rank's exit code: 0, or 3 when the end-of-run dump failed (the learners have
// written the model and summary by then; the summary names the error).
int run_replay(const Config& cfg, const Comms& comms, const RunStart& start);

// Checks the replay settings and a replay.restore file against the run (rank 0, before anything
// is created); throws ConfigError naming the key or file.
void validate_replay_config(const Config& cfg);

// The dump path of a run (with roles.replays = K > 1: the virtual dataset that joins the shards'
// dumps, written by learner 0 at the end), and shard k's own dump: the same path with K = 1,
// else ".shard<k>" before the extension (runs/x/replay.shard0.h5, ...).
std::string dump_path(const Config& cfg, const std::string& run_dir);
std::string shard_dump_path(const Config& cfg, const std::string& run_dir, int shard);

}  // namespace mpirl::buffer

namespace mpirl::buffer {

// `mpirl replay inspect FILE`: checks a dump (format, completeness, checksum) and prints its
// schema, items, episodes and returns, priorities. Returns the exit code (2 for a bad file).
int replay_inspect_main(const std::string& path);

// `mpirl replay roundtrip IN OUT`: restores IN into a fresh buffer of the same run settings and
// dumps it to OUT with no new data (the two hold equal /items data). Returns the exit code.
int replay_roundtrip_main(const std::string& in, const std::string& out);

}  // namespace mpirl::buffer
