#pragma once
// The inference rank's bookkeeping, without MPI: the requests waiting, when a batch is due, the
// core state of every env it serves, and the batching statistics. One request is one env group of
// one actor; it is never split across batches. The server (inference/server_requests.cpp) feeds it
// what arrives and sends back what a batch produced.
//
// A batch is due when
//   - every served group has a request waiting ("full": nothing else can arrive),
//   - or the waiting rows reach max_batch_rows ("capped"),
//   - or the oldest request has waited max_wait_s ("timeout").
// A batch takes requests oldest first up to max_batch_rows (at least one request).
#include <cstdint>
#include <deque>
#include <vector>

#include <nlohmann/json.hpp>

#include "inference/engine.h"

namespace mpirl::inference {

struct Request {
  int actor = 0;            // index among the served actors
  int group = 0, first = 0;  // env group and its first env
  int64_t n = 0;            // rows
  uint64_t seq = 0;         // the actor's request number (echoed in the reply)
  double arrived = 0;       // seconds (now_seconds())
  const char* obs = nullptr;         // n rows of obs_bytes
  const uint8_t* is_init = nullptr;  // n bytes
  int buffer = -1;          // the server's receive buffer holding obs/is_init
};

// Batching statistics: cumulative, and since the last report (window).
struct BatchStats {
  static constexpr int kBuckets = 12;  // rows 1, 2, 3-4, 5-8, ..., 1025+
  static int bucket(int64_t rows);
  static std::string bucket_name(int b);
  int64_t batches = 0, rows = 0, rows_max = 0, requests = 0, full = 0, capped = 0, timeout = 0;
  int64_t hist[kBuckets] = {};
  double forward_s = 0, forward_max_s = 0, latency_s = 0, latency_max_s = 0, waiting_sum = 0;
  nlohmann::json to_json() const;
};

class Batcher {
 public:
  Batcher(Engine& engine, int actors, int envs_per_actor, int groups, int64_t max_batch_rows, double max_wait_s);
  // Throws mpirl::Error when the actor already has a request of that group waiting.
  void add(const Request& r);
  size_t waiting() const { return queue_.size(); }
  int64_t waiting_rows() const { return rows_; }
  // Whether a batch should start at `now`.
  bool due(double now) const;
  // Runs one batch; returns the requests it served, in the order of their rows in the engine's
  // outputs (`row` = the first row of each). The state table holds their states after the step.
  struct Served {
    Request req;
    int64_t row = 0;
  };
  const std::vector<Served>& run_batch(double now);
  // Completes the latency statistics of the last batch (its replies have been handed to MPI).
  void replied(double now);
  // Every waiting request, removed (a stopping server answers them with Stop).
  std::vector<Request> drain();
  // Env e of served actor a: its core state (S floats) as of its last step.
  const float* state_of(int actor, int env) const { return table_.data() + (int64_t(actor) * E_ + env) * S_; }
  int64_t state_size() const { return S_; }
  const BatchStats& total() const { return total_; }
  // The statistics since the last call, and resets them.
  BatchStats take_window();

 private:
  Engine& engine_;
  int A_, E_, G_;
  int64_t S_, max_rows_;
  double max_wait_s_;
  std::deque<Request> queue_;
  int64_t rows_ = 0;
  std::vector<char> pending_;  // [A, G]: a request of that group waits
  std::vector<float> table_;   // [A, E, S]
  std::vector<Served> served_;
  BatchStats total_, window_;
};

}  // namespace mpirl::inference
