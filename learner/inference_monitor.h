#pragma once
// Learner 0's view of the inference ranks (central inference): the batching statistics each sends
// every run.log_interval_s (inference/batcher.h), for the metrics rows, the status line and
// summary.json, and the final report of each, which learner 0 waits for before its final summary
// (comm/protocol.h). No-op without inference ranks.
#include <functional>
#include <map>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/ranks.h"

namespace mpirl::learner {

class InferenceMonitor {
 public:
  explicit InferenceMonitor(const Comms& comms);
  bool enabled() const { return !ranks_.empty(); }
  // Receives the reports that have arrived (learner 0; cheap when none has: one MPI_Iprobe).
  // `learner_version`: the updates so far; each report's parameter version is one sample of the
  // acting lag (how many updates the policy that acts is behind the learner's), so learner 0
  // polls after every update and the sample is at most one update late.
  void poll(int64_t learner_version);
  // The latest windows of every rank combined: rows per batch, latency, forward time, requests
  // waiting when a batch started; totals of batches and rows. Null before any report.
  nlohmann::json row() const;
  // summary.json's "inference": per rank its last report, and the totals over ranks.
  nlohmann::json summary() const;
  // Waits for every rank's final report, calling `while_waiting` between tests; after `timeout_s`
  // (0 = no limit) throws mpirl::Error naming the ranks still silent (the job then ends, never hangs).
  void wait_finals(const std::function<void()>& while_waiting, double timeout_s);

  // Combines reports' "window" (or "total") objects as the rows above do (exposed for tests).
  static nlohmann::json combine(const std::vector<nlohmann::json>& stats);

 private:
  const Comms& comms_;
  std::vector<int> ranks_;
  std::map<int, nlohmann::json> last_;  // per inference rank: its latest report
  int64_t lag_n_ = 0, lag_sum_ = 0, lag_max_ = 0;  // acting-lag samples (all reports so far)
  std::vector<char> buf_;
};

}  // namespace mpirl::learner
