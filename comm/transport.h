#pragma once
// Point-to-point helpers over MPI that never busy-poll (every wait backs off, core/clock.h).
#include <chrono>
#include <deque>
#include <functional>
#include <vector>

#include <mpi.h>

#include "core/clock.h"

namespace mpirl {


// A message buffer and the non-blocking request that may be using it. Destroyed while that request
// is still pending -- a rank unwinding from a fatal error on its way to MPI_Abort -- it leaves its
// storage to MPI instead of freeing it: a peer may still copy out of it (Open MPI's shared-memory
// single copy reads the sender's memory directly, whenever the receiver gets to it) and MPI may
// still write into it. Freed, it would be reused, and the peer would report a second, misleading
// "malformed message" (or the heap would be corrupted under the rank printing its fatal error).
struct MsgBuffer {
  std::vector<char> buf;
  MPI_Request req = MPI_REQUEST_NULL;
  MsgBuffer() = default;
  MsgBuffer(MsgBuffer&& o) noexcept;
  MsgBuffer& operator=(MsgBuffer&&) = delete;
  ~MsgBuffer();
};
// How many buffers were left to MPI by this process (tests).
size_t msg_buffers_left_to_mpi();

// Receives one message with `tag` from `source` (may be MPI_ANY_SOURCE) if one is waiting.
// The buffer grows to fit (and keeps its capacity). Returns the source rank, or -1 if none.
int try_recv(MPI_Comm comm, int source, int tag, std::vector<char>& buf, size_t* size);

// Non-blocking sends whose buffers live until MPI is done with them. Buffers are recycled.
class SendPool {
 public:
  // A free buffer to fill; pass it to send() (ownership stays with the pool).
  std::vector<char>& acquire();
  void send(std::vector<char>& buf, size_t bytes, int dest, int tag, MPI_Comm comm);
  void progress();           // retires completed sends
  size_t in_flight() const;  // sends not yet complete
  void wait_all(const std::function<void()>& while_waiting = {});

 private:
  struct Slot : MsgBuffer {
    bool busy = false;
  };
  std::deque<Slot> slots_;
};

// Waits for `req` with back-off, calling `while_waiting` between tests; fills *status if given.
void wait_request(MPI_Request& req, const std::function<void()>& while_waiting = {}, MPI_Status* status = nullptr);


}  // namespace mpirl
