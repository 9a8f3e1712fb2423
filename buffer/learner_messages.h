#pragma once
// The replay's checks of what learners send besides sample requests (comm/protocol.h): each
// throws mpirl::Error naming the kind, the sender and what is wrong.
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

}  // namespace mpirl::buffer
