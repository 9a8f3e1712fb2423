#pragma once
// Evaluation during training (eval.interval_s > 0), on learner 0: every interval it saves the
// current policy to <run>/eval/ (model.pt, policy.json, config.toml) and starts `mpirl eval` on it
// as a separate process (its own env copies, eval.threads torch threads, greedy by default), so
// the learner never waits for an episode. When that process ends its result becomes one row of
// <run>/eval.jsonl, stamped with the update, env steps and time of the snapshot it played. An
// interval that comes while an evaluation still runs is skipped (counted); an evaluation that
// fails is reported with its log (<run>/eval/eval.log) and training goes on. The process ends
// with the learner: it checks that its parent is alive after every vector step.
#include <sys/types.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/config.h"
#include "envs/env.h"
#include "models/policy.h"

namespace mpirl::learner {

class Evaluator {
 public:
  Evaluator(const Config& cfg, const std::string& run_dir);  // learner 0 only; inert when interval_s = 0
  ~Evaluator();
  Evaluator(const Evaluator&) = delete;
  Evaluator& operator=(const Evaluator&) = delete;

  bool enabled() const { return interval_ > 0; }
  // Learner 0's loop: collects a finished evaluation, and starts the next one when it is due.
  // Returns the rows finished since the last call (already appended to eval.jsonl).
  std::vector<nlohmann::json> poll(models::Policy& policy, const envs::EnvSpec& spec, int64_t update,
                                   int64_t env_steps, double time_s);
  // At the end: the evaluation that ended since the last poll, if any (one still playing is
  // stopped by the destructor).
  std::vector<nlohmann::json> finished() { return collect(false); }
  // started / skipped / failed evaluations, for summary.json ("eval").
  nlohmann::json counts() const;
  // The best evaluated policy so far (null: none): whenever an evaluation's mean return beats the
  // best, the policy it played is copied to <run>/model_best.pt (before the next evaluation
  // overwrites it). Its mean, update, env steps and file, for summary.json.
  const nlohmann::json& best() const { return best_; }

 private:
  void start(models::Policy& policy, const envs::EnvSpec& spec);
  std::vector<nlohmann::json> collect(bool wait);  // never throws: a failure is counted and logged
  std::vector<nlohmann::json> collect_or_throw(bool wait);
  void keep_if_best(const nlohmann::json& row);

  const Config& cfg_;
  std::string dir_, eval_dir_;
  double interval_ = 0, last_start_ = 0;
  pid_t child_ = -1;
  nlohmann::json snapshot_;  // update, env_steps, time_s of the policy the running evaluation plays
  int64_t started_ = 0, skipped_ = 0, failed_ = 0;
  bool skip_noted_ = false;
  nlohmann::json best_;
};

}  // namespace mpirl::learner
