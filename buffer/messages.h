#pragma once
// The replay's checks of the small messages learners and actors send (comm/protocol.h; the
// sequences themselves are checked by comm/seq_layout.h): each throws mpirl::Error naming the
// kind, the sender and what is wrong.
#include <cstdint>
#include <string>

#include "comm/wire.h"

namespace mpirl::buffer {

struct PriorityUpdateView {
  const int64_t *slots, *generations;
  const float* priorities;
  int64_t n;
};
PriorityUpdateView read_priority_update(const wire::Message& msg, int src);

struct CheckpointRequestView {
  std::string dir;
  bool final;
};
// Only learner 0 (rank 0) sends them.
CheckpointRequestView read_checkpoint_request(const wire::Message& msg, int src);

// SampleRequest: how many sequences (no array: learner.batch_size; a learner of replay shards
// sends one i64 "n" in 0..batch_size, its share of the batch for this shard).
int64_t read_sample_request(const wire::Message& msg, int src, int64_t batch_size);

// ActorDone: the actor's own count of the env steps it sent.
int64_t read_actor_done(const wire::Message& msg, int src);

// The finished-episode statistics a rollout carries after its `first` sequence arrays.
struct EpisodeStatsView {
  const float* returns;
  const int32_t* lengths;
  size_t n;
};
EpisodeStatsView read_episode_stats(const wire::Message& msg, size_t first, int src);

}  // namespace mpirl::buffer
