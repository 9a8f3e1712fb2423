#pragma once
// Parameter publishing from learner 0 to the actors with MPI_Ibcast on the `publish`
// communicator (learner 0 is its root). Neither side blocks: the root starts a new broadcast only
// when the previous one has completed (otherwise it skips that publish), and actors keep one
// broadcast posted and test it between env steps. The run ends with a Stop broadcast, so every
// posted broadcast is matched before MPI_Finalize.
//
// Each test is up to `tests_per_poll` MPI_Test calls (stopping when it completes). A large
// broadcast that the transport moves in fragments advances about one step per MPI call, and
// actors test once per env step: a 6.7 MB Atari network to 15 ranks took 346 polls with shared
// memory without single-copy, 18 over TCP and 9 with single-copy at one MPI_Test per poll; 19, 5
// and 2 with 104 (bench/param_broadcast.cpp). The automatic count is one per 64 KiB of
// parameters (1 to 128): small networks test once, as before. An idle test (nothing arriving) cost
// 22-220 ns on shared memory on the 2-core dev VM; over other transports it was not measured.
#include <mpi.h>

#include <cstdint>

#include "comm/transport.h"

namespace mpirl {

class ParamChannel {
 public:
  // tests_per_poll <= 0: auto_tests_per_poll of the message size.
  ParamChannel(MPI_Comm publish, int64_t num_params, int tests_per_poll = 0);
  static int auto_tests_per_poll(size_t message_bytes);
  int tests_per_poll() const { return tests_; }
  ParamChannel(const ParamChannel&) = delete;
  ParamChannel& operator=(const ParamChannel&) = delete;

  // Root side.
  bool idle();  // the previous broadcast has completed
  // Starts broadcasting `params` (num_params floats) as `version`; requires idle().
  void publish(const float* params, int64_t version);
  void wait();  // waits for the broadcast in flight
  // Waits for the previous broadcast, then broadcasts Stop and waits for it.
  void publish_stop();

  // Actor side.
  enum class Got { Nothing, Params, Stop };
  void post();
  // Tests the posted broadcast. On Params, copies them to dst and sets *version, then reposts.
  Got poll(float* dst, int64_t* version);

 private:
  void start(bool stop, const float* params, int64_t version);
  bool test();  // up to tests_ MPI_Test calls on the broadcast in flight; true once it completed
  MPI_Comm comm_;
  int64_t n_;
  int tests_ = 1;
  MsgBuffer msg_;  // the broadcast's frame; kept for MPI if destroyed mid-broadcast (a fatal error)
  uint64_t seq_ = 0;
};

}  // namespace mpirl
