#pragma once
// The run controller: stop conditions, metrics.jsonl (and its TensorBoard twin), the status
// line, model.pt and summary.json. Every learner keeps one (the wall-clock limit applies to each,
// and each counts what it received and trained on); only learner 0 (`lead`) decides the other stop
// conditions and writes files. Host reads of loss tensors happen once per log row, never per update.
#include <array>
#include <deque>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "comm/protocol.h"
#include "comm/ranks.h"
#include "core/config.h"
#include "core/run_dir.h"
#include "learner/batch_source.h"
#include "learner/curve_log.h"
#include "learner/inference_monitor.h"
#include "learner/learner_counts.h"
#include "learner/replay_status_json.h"
#include "learner/trainer.h"
#include "models/policy.h"
#include "tracking/tensorboard.h"

namespace mpirl::learner {

class RunController {
 public:
  RunController(const Config& cfg, const Comms& comms, const std::string& run_dir);
  bool lead() const { return lead_; }
  void start();
  double elapsed() const;

  void on_reply(const Batch& b);    // the replay's status and the episodes finished (every reply)
  void on_episodes(const std::vector<float>& returns, const std::vector<int32_t>& lengths);
  void set_status(const ReplayStatus& s) { status_ = s; }
  const ReplayStatus& status() const { return status_; }
  // Checkpoints: the window as it is now; a resumed run's window, time so far and counts, and the
  // replay status of its checkpoint (learner 0 marks the resume in TensorBoard, see resume()):
  // the rows written before the first batch (the replay may take a while to restore) show it.
  RunWindow window() const;
  void resume(const RunWindow& w, double elapsed_s, const LearnerCounts& counts, const ReplayStatus& checkpoint_status);
  void on_trained(const Batch& b);  // lag and counts of a batch the learners go on to train on
  void on_update(const UpdateResult& r);  // keeps the loss tensors for the next log row
  void add_wait(double seconds) { wait_s_ += seconds; }
  LearnerCounts& counts() { return counts_; }

  bool wall_limit_reached() const;
  // Why the run should stop now ("" = go on). Any learner: "preempted", "interrupted" or
  // "aborted" (a signal, see core/signals.h), the wall clock; learner 0 also: steps, mean return.
  std::string stop_reason() const;
  // Learner 0, when the learners have agreed to stop: what the decision saw (the return window,
  // episodes and env steps at that moment), kept as summary.json's `stop_decision`. Episodes
  // drained after it move `final_mean_return`, never this.
  void note_stop_decision(const std::string& reason, int64_t version);
  int64_t metrics_bytes() const { return metrics_ ? metrics_->bytes() : 0; }
  void maybe_log();  // learner 0: a metrics row and the status line every run.log_interval_s
  // Learner 0 with inference ranks: their statistics that have arrived (after every update).
  void poll_inference(int64_t version) {
    if (inference_) inference_->poll(version);
  }
  // Learner 0 (a no-op elsewhere): one row appended to metrics.jsonl and, with run.tensorboard,
  // its numbers as TensorBoard scalars tagged tb_prefix + key (nested objects as "key/sub") at
  // step = the row's "env_steps" (the replay's count when the row has none). Any metrics row goes
  // through here, so TensorBoard shows what metrics.jsonl holds.
  void write_row(const nlohmann::json& row, const std::string& tb_prefix = "");
  // Learner 0: an evaluation's row (learner/evaluator.h, already in eval.jsonl) as TensorBoard
  // scalars eval/mean_return, eval/std_return, ... at the env steps of the policy it played.
  void on_eval(const nlohmann::json& row);

  // Learner 0, at the end: model.pt, then summary.json (written again with final=true once the
  // replay has said goodbye). Both are atomic. Never from parameters that are not finite.
  void save_model(models::Policy& policy, const envs::EnvSpec& spec);
  // Learner 0, without evaluation during training: model_best.pt (beside model.pt) from this policy
  // whenever a metrics row's mean return of the last 100 episodes beats the best so far, so the best
  // is exactly the best such row's. With evaluation the evaluator keeps it instead
  // (learner/evaluator.h). A failure is logged, never fatal.
  void set_best_source(models::Policy* policy, const envs::EnvSpec* spec) {
    best_policy_ = policy;
    best_spec_ = spec;
  }
  // The best policy kept so far (null: none), for summary.json; the evaluator reports its own here.
  void set_best(nlohmann::json best) { best_ = std::move(best); }
  void write_summary(const std::string& reason, const nlohmann::json& extra, bool final);
  // Learner 0, while the run goes on (after each sealed checkpoint): summary.json with
  // stop_reason "running" and the fields as they are now, so that a run whose learner 0 dies
  // without a word (a peer's hang-up makes Open MPI end a process at once) still has one.
  void write_running_summary(const nlohmann::json& extra);
  // Fields every summary carries (placement, segment, resumed_from), set once at the start.
  void set_summary_fields(nlohmann::json fields) { fields_ = std::move(fields); }
  void set_totals(const LearnerCounts& all) { totals_ = all; }
  // Central inference: the monitor whose statistics the rows, the status line and the summary carry.
  void set_inference(InferenceMonitor* m) { inference_ = m; }

 private:
  nlohmann::json snapshot() const;
  nlohmann::json summary(const std::string& reason, double wall, const nlohmann::json& extra, bool final) const;
  void log(bool final);
  // Runs f on the TensorBoard writer, if any; a failure is logged once and turns TensorBoard off
  // for the rest of the run (metrics.jsonl goes on).
  void tensorboard(const std::function<void(tracking::TensorBoardWriter&)>& f);

  struct Window {  // mean of the last n values
    explicit Window(size_t n) : n(n) {}
    void add(double v);
    double mean() const;
    size_t n;
    std::deque<double> q;
    double sum = 0;
  };

  const Config& cfg_;
  const Comms& comms_;
  std::string run_dir_;
  bool lead_;
  std::unique_ptr<MetricsLog> metrics_;
  std::unique_ptr<tracking::TensorBoardWriter> tb_;  // learner 0 with run.tensorboard
  CurveLog curve_;  // curve.jsonl (learner 0 with run.curve_interval_steps)
  ReplayStatus status_;
  LearnerCounts counts_, totals_;
  Window returns_{100}, lengths_{100};
  int64_t episodes_ = 0;
  // Policy lag over the items received since the last log row (the recent window).
  int64_t lag_sum_ = 0, lag_n_ = 0, lag_max_ = 0;
  double last_lag_mean_ = 0;
  int64_t last_lag_max_ = 0;
  UpdateResult last_;
  double start_ = 0, last_log_ = 0, wait_s_ = 0, wall_ = 0;
  nlohmann::json fields_ = nlohmann::json::object();
  nlohmann::json decision_;  // null until note_stop_decision()
  InferenceMonitor* inference_ = nullptr;
  nlohmann::json best_;  // the best policy kept (model_best.pt): mean, update, env steps, source
  int64_t metrics_failed_ = 0;  // metrics rows lost in a row (a full disk)
  models::Policy* best_policy_ = nullptr;
  const envs::EnvSpec* best_spec_ = nullptr;
  void check_best();  // after each metrics row
};

}  // namespace mpirl::learner
