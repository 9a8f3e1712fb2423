#pragma once
// The status of a sharded replay (roles.replays = K) as one replay: what a learner reports in
// summary.json, checkpoints and logs is the merge of the latest status of every shard.
#include <vector>

#include "comm/protocol.h"

namespace mpirl {

// Counters add up (env steps, rollouts, items inserted/evicted/consumed, fill, capacity, samples,
// batches, priority updates, per-learner samples, dumps, checkpoint items); max_priority is the
// largest, priority_mass the sum; a dump or checkpoint counts as done only once every shard has
// done it (the smallest count), failures add up, final_failed / last_ok hold if any / all shards
// say so, the first error found is kept, and the checkpoint's CRC-32 is the XOR of the shards'
// (each shard's own is in its replay_state file). restored_seq_end and importance_exponent are
// per shard (shard 0's are kept: learners use each reply's own); shard is -1. One status is
// returned unchanged.
ReplayStatus merge_shard_status(const std::vector<ReplayStatus>& shards);

}  // namespace mpirl
