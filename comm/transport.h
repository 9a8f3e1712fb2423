#pragma once
// Point-to-point helpers over MPI that never busy-poll (every wait backs off, core/clock.h).
#include <chrono>
#include <deque>
#include <functional>
#include <vector>

#include <mpi.h>

#include "core/clock.h"

namespace mpirl {


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
  struct Slot {
    std::vector<char> buf;
    MPI_Request req = MPI_REQUEST_NULL;
    bool busy = false;
  };
  std::deque<Slot> slots_;
};

// Waits for `req` with back-off, calling `while_waiting` between tests; fills *status if given.
void wait_request(MPI_Request& req, const std::function<void()>& while_waiting = {}, MPI_Status* status = nullptr);


}  // namespace mpirl
