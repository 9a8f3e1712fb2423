#pragma once
// The learning curve at an env-step cadence: learner 0 appends one JSON row to <run>/curve.jsonl
// each time the env steps pass another run.curve_interval_steps (whatever the wall clock does), so
// a 2-second run draws as many points as a 2-hour one of the same budget
// (scripts/plot_metrics.py). A row: env_steps, time_s, episodes (so far), mean_return (the last
// 100 episodes: what run.stop_mean_return compares), interval_return and interval_episodes (the
// episodes that ended since the row before; null return when none did).
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "core/run_dir.h"

namespace mpirl::learner {

class CurveLog {
 public:
  // every <= 0: off (no file).
  CurveLog(std::string path, int64_t every) : path_(std::move(path)), every_(every), next_(every) {}
  bool enabled() const { return every_ > 0; }
  // An episode that ended (its return), before the env-step count that includes it is recorded.
  void episode(double ret) {
    sum_ += ret;
    ++n_;
  }
  // After a reply: a row when env_steps has reached the next point (one row, however many points
  // one reply passed). `force` (the end): a row now, unless the last one was at these env steps
  // and no episode ended since.
  void record(int64_t env_steps, double time_s, int64_t episodes, double window_mean, bool force = false);
  // A resumed run: rows past the checkpoint's env steps move to curve.after-checkpoint-<unix
  // time>.jsonl (the run repeats those steps), and the next point follows the checkpoint's. The
  // first row after a resume counts the episodes since the resume only.
  void resume(int64_t checkpoint_env_steps);

 private:
  std::string path_;
  int64_t every_;
  int64_t next_, last_ = -1;  // the next point's env steps; the last row's
  double sum_ = 0;                // returns of the episodes since the last row
  int64_t n_ = 0;
  std::unique_ptr<MetricsLog> out_;
  int64_t failed_ = 0;            // rows lost in a row (a full disk): logged once
};

}  // namespace mpirl::learner
