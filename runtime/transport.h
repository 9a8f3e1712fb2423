#pragma once
// Point-to-point helpers over MPI that never busy-poll: every wait tests its requests and then
// sleeps with an exponential back-off (10 us .. 1 ms), so oversubscribed ranks leave the CPU to
// the ranks that have work.
#include <chrono>
#include <deque>
#include <functional>
#include <vector>

#include <mpi.h>

namespace mpirl {

class Backoff {
 public:
  void idle();  // sleep, doubling the pause each time up to the cap
  void reset() { pause_us_ = kMinUs; }

 private:
  static constexpr int kMinUs = 10, kMaxUs = 1000;
  int pause_us_ = kMinUs;
};

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

// Waits for `req` with back-off, calling `while_waiting` between tests.
void wait_request(MPI_Request& req, const std::function<void()>& while_waiting = {});

double now_seconds();

}  // namespace mpirl
