#pragma once
// The inference rank's server (inference/server.h says what it does), private to inference/:
// server.cpp holds its loop, parameters and reports, server_requests.cpp the actors' requests.
#include <cstdint>
#include <deque>
#include <vector>

#include "comm/param_channel.h"
#include "comm/ranks.h"
#include "comm/transport.h"
#include "core/config.h"
#include "envs/registry.h"
#include "inference/batcher.h"
#include "inference/engine.h"

namespace mpirl::inference {

class Server {
 public:
  Server(const Config& cfg, const Comms& comms);
  void run();

 private:
  // --- server.cpp: parameters from learner 0, statistics to it
  bool poll_params();
  void report(bool final);

  // --- server_requests.cpp: the actors' requests and their replies
  int served_index(int rank) const;
  MsgBuffer& free_buffer(int* index);
  bool receive();
  struct Incoming {
    int buffer, src, count;
  };
  void handle(const Incoming& in);
  void answer_stop(const Request& r);
  void serve();

  const Config& cfg_;
  const Comms& comms_;
  envs::EnvSpec spec_;
  std::vector<int> served_;  // actor ranks, in rank order
  int E_, G_, max_group_ = 1;
  Engine engine_;
  Batcher batcher_;
  ParamChannel params_;
  std::vector<float> flat_;
  std::deque<MsgBuffer> rbufs_;  // receive buffers; a queued request keeps its own (left to MPI if
                                 // the rank unwinds with a receive posted into one)
  std::vector<Incoming> incoming_;  // matched requests still arriving
  std::vector<char> rbuf_busy_;
  SendPool sends_;
  std::vector<char> bye_;
  size_t byes_ = 0;
  int64_t version_ = -1, updates_ = 0;
  bool stopping_ = false;
  double start_ = 0, last_report_ = 0;
  uint64_t report_seq_ = 0;
};

}  // namespace mpirl::inference
