#include "learner/run_controller.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <sstream>

#include <fmt/chrono.h>
#include <spdlog/spdlog.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/logging.h"
#include "core/signals.h"
#include "models/policy_file.h"

namespace mpirl::learner {

void RunController::Window::add(double v) {
  q.push_back(v);
  sum += v;
  if (q.size() > n) sum -= q.front(), q.pop_front();
}

double RunController::Window::mean() const { return q.empty() ? std::nan("") : sum / double(q.size()); }

RunController::RunController(const Config& cfg, const Comms& comms, const std::string& run_dir)
    : cfg_(cfg),
      comms_(comms),
      run_dir_(run_dir),
      lead_(comms.rank == 0),
      curve_(run_dir + "/curve.jsonl", lead_ ? cfg.run.curve_interval_steps : 0) {
  if (lead_) metrics_ = std::make_unique<MetricsLog>(run_dir + "/metrics.jsonl");
  if (lead_ && cfg.run.tensorboard) {
    try {
      tb_ = std::make_unique<tracking::TensorBoardWriter>(run_dir);
    } catch (const std::exception& e) {
      spdlog::warn("TensorBoard logging is off for this run: {}", e.what());
    }
    // The resolved config once, as a TOML code block (the text plugin renders Markdown).
    tensorboard([&](auto& tb) { tb.write_text("config", "```toml\n" + cfg.resolved_toml + "\n```", 0); });
  }
}

void RunController::tensorboard(const std::function<void(tracking::TensorBoardWriter&)>& f) {
  if (!tb_) return;
  try {
    f(*tb_);
  } catch (const std::exception& e) {
    spdlog::warn("TensorBoard logging is off for the rest of the run: {}", e.what());
    tb_.reset();
  }
}

void RunController::write_row(const nlohmann::json& row, const std::string& tb_prefix) {
  if (!lead_) return;
  try {  // a full disk costs rows, never the run (logged once; later rows are tried again)
    metrics_->write(row);
    if (metrics_failed_) spdlog::info("metrics.jsonl written again ({} row(s) were lost)", metrics_failed_);
    metrics_failed_ = 0;
  } catch (const std::exception& e) {
    if (metrics_failed_++ == 0) spdlog::error("{}; the run goes on (rows are dropped until a write succeeds)", e.what());
  }
  const auto steps = row.find("env_steps");
  const int64_t step = steps != row.end() && steps->is_number() ? steps->get<int64_t>() : status_.env_steps;
  tensorboard([&](auto& tb) { tb.write_scalars(row, step, tb_prefix); });
}

void RunController::on_eval(const nlohmann::json& row) {
  if (!lead_) return;
  nlohmann::json scalars = nlohmann::json::object();
  for (const auto& [k, v] : row.items())
    if (k.rfind("eval_", 0) == 0 && v.is_number()) scalars[k.substr(5)] = v;
  const int64_t step = row.value("env_steps", status_.env_steps);
  tensorboard([&](auto& tb) { tb.write_scalars(scalars, step, "eval/"); });
}

void RunController::start() { start_ = last_log_ = now_seconds(); }

double RunController::elapsed() const { return now_seconds() - start_; }

void RunController::on_reply(const Batch& b) {
  status_ = b.status;
  on_episodes(b.episode_returns, b.episode_lengths);
  curve_.record(status_.env_steps, elapsed(), episodes_, returns_.mean());
}

void RunController::on_episodes(const std::vector<float>& returns, const std::vector<int32_t>& lengths) {
  for (size_t k = 0; k < returns.size() && k < lengths.size(); ++k) {
    returns_.add(returns[k]);
    lengths_.add(lengths[k]);
    curve_.episode(returns[k]);
    ++episodes_;
  }
}

RunWindow RunController::window() const {
  return {{returns_.q.begin(), returns_.q.end()}, {lengths_.q.begin(), lengths_.q.end()}, episodes_};
}

void RunController::resume(const RunWindow& w, double elapsed_s, const LearnerCounts& counts,
                           const ReplayStatus& checkpoint_status) {
  const int64_t checkpoint_env_steps = checkpoint_status.env_steps;
  status_ = checkpoint_status;
  status_.dump = {};  // this run's dump and checkpoint history starts afresh, as the replay's does
  status_.checkpoint = {};
  returns_ = Window(returns_.n);
  lengths_ = Window(lengths_.n);
  for (double v : w.returns) returns_.add(v);
  for (double v : w.lengths) lengths_.add(v);
  episodes_ = w.episodes;
  counts_ = counts;
  start_ -= elapsed_s;  // time_s, SPS and run.max_wall_seconds count the whole run
  last_log_ = now_seconds();
  // metrics.jsonl was cut back to the checkpoint (app/train_start.cpp), but the earlier event files still
  // hold the rows written after it. A SessionLog START makes TensorBoard drop the points of earlier
  // files at steps >= its step: one past the checkpoint's env steps keeps the rows metrics.jsonl
  // kept (steps <= the checkpoint's; a final checkpoint's come after every row of its run).
  tensorboard([&](auto& tb) { tb.write_session_start(checkpoint_env_steps + 1); });
  curve_.resume(checkpoint_env_steps);
}

void RunController::on_trained(const Batch& b) {
  lag_sum_ += b.lag_sum;
  lag_n_ += b.lag_known;
  lag_max_ = std::max(lag_max_, b.lag_max);
  counts_.trained += b.kept;
  counts_.too_old += b.too_old;
  counts_.lag_unknown += b.lag_unknown;
  counts_.truncations += b.truncations;
  counts_.bootstraps += b.boot.count;
  counts_.restored_sampled += b.restored;  // trained on
}

void RunController::on_update(const UpdateResult& r) {
  last_ = r;
  ++counts_.updates;
  counts_.optimizer_steps += r.steps;
}

bool RunController::wall_limit_reached() const {
  return cfg_.run.max_wall_seconds > 0 && elapsed() >= cfg_.run.max_wall_seconds;
}

std::string RunController::stop_reason() const {
  if (const StopSignal sig = stop_signal(); sig != StopSignal::None) return stop_reason_of(sig);
  if (wall_limit_reached()) return "max_wall_seconds";
  if (!lead_) return "";
  if (status_.env_steps >= cfg_.run.total_env_steps) return "total_env_steps";
  if (!std::isnan(cfg_.run.stop_mean_return) && returns_.q.size() >= returns_.n &&
      returns_.mean() >= cfg_.run.stop_mean_return)
    return "stop_mean_return";
  return "";
}

void RunController::note_stop_decision(const std::string& reason, int64_t version) {
  if (!lead_) return;
  decision_ = {{"reason", reason},
               {"mean_return", returns_.q.empty() ? nlohmann::json(nullptr) : nlohmann::json(returns_.mean())},
               {"window_episodes", returns_.q.size()},
               {"episodes", episodes_},
               {"env_steps", status_.env_steps},
               {"time_s", elapsed()},
               {"update", version}};
  if (reason == "stop_mean_return")
    spdlog::info("stopping: mean return {:.2f} over the last {} episodes >= run.stop_mean_return = {} ({} env steps)",
                 returns_.mean(), returns_.q.size(), cfg_.run.stop_mean_return, status_.env_steps);
}

}  // namespace mpirl::learner
