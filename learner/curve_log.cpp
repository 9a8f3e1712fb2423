#include "learner/curve_log.h"

#include <cmath>
#include <ctime>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

namespace mpirl::learner {

void CurveLog::record(int64_t env_steps, double time_s, int64_t episodes, double window_mean, bool force) {
  // The end forces a row, also at the last row's env steps when episodes came in since (episodes
  // can arrive without new steps: held back during a checkpoint, or drained at the stop).
  const bool due = force ? env_steps != last_ || n_ > 0 : env_steps >= next_ && env_steps != last_;
  if (!enabled() || !due) return;
  nlohmann::json row = {{"env_steps", env_steps},
                        {"time_s", time_s},
                        {"episodes", episodes},
                        {"mean_return", std::isfinite(window_mean) ? nlohmann::json(window_mean) : nlohmann::json()},
                        {"interval_return", n_ > 0 ? nlohmann::json(sum_ / double(n_)) : nlohmann::json()},
                        {"interval_episodes", n_}};
  last_ = env_steps;
  next_ = (env_steps / every_ + 1) * every_;
  sum_ = 0;
  n_ = 0;
  try {  // a full disk costs points, never the run
    if (!out_) out_ = std::make_unique<MetricsLog>(path_);
    out_->write(row);
    failed_ = 0;
  } catch (const std::exception& e) {
    if (failed_++ == 0) spdlog::error("{}; the run goes on (curve points are dropped until a write succeeds)", e.what());
  }
}

void CurveLog::resume(int64_t checkpoint_env_steps) {
  if (!enabled()) return;
  next_ = (checkpoint_env_steps / every_ + 1) * every_;
  last_ = checkpoint_env_steps;
  out_.reset();
  std::ifstream in(path_);
  if (!in) return;
  std::ostringstream kept, past;
  std::string line;
  int64_t dropped = 0;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    const bool before = !j.is_discarded() && j.contains("env_steps") && j["env_steps"].is_number_integer() &&
                        j["env_steps"].get<int64_t>() <= checkpoint_env_steps;
    (before ? kept : past) << line << '\n';
    dropped += before ? 0 : 1;
  }
  in.close();
  if (dropped == 0) return;
  // As metrics.jsonl's: the rows of the steps the resumed run repeats move aside, nothing is lost.
  const std::string aside = path_.substr(0, path_.size() - std::string(".jsonl").size()) +
                            fmt::format(".after-checkpoint-{}.jsonl", ::time(nullptr));
  try {
    write_file_atomic(aside, past.str());
    write_file_atomic(path_, kept.str());
    spdlog::info("{} row(s) of curve.jsonl written after the checkpoint moved to {}", dropped, aside);
  } catch (const std::exception& e) {
    spdlog::warn("curve.jsonl keeps {} row(s) past the checkpoint: {}", dropped, e.what());
  }
}

}  // namespace mpirl::learner
