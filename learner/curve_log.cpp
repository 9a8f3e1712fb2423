#include "learner/curve_log.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

namespace mpirl::learner {

void CurveLog::record(int64_t env_steps, double time_s, int64_t episodes, double window_mean, bool force) {
  if (!enabled() || env_steps == last_ || (!force && env_steps < next_)) return;
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
  std::ostringstream kept;
  std::string line;
  int64_t dropped = 0;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.contains("env_steps") && j["env_steps"].is_number_integer() &&
        j["env_steps"].get<int64_t>() <= checkpoint_env_steps)
      kept << line << '\n';
    else
      ++dropped;
  }
  in.close();
  if (dropped == 0) return;
  try {
    write_file_atomic(path_, kept.str());
  } catch (const std::exception& e) {
    spdlog::warn("curve.jsonl keeps {} row(s) past the checkpoint: {}", dropped, e.what());
  }
}

}  // namespace mpirl::learner
