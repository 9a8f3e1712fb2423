#include "learner/learner_state.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/json_read.h"
#include "learner/replay_status_json.h"

namespace mpirl::learner {

nlohmann::json to_json(const LearnerState& s) {
  nlohmann::json counts = nlohmann::json::array();
  for (const auto& c : s.counts) counts.push_back(to_array(c));
  return {{"version", s.version},
          {"segment", s.segment},
          {"elapsed_s", s.elapsed_s},
          {"metrics_bytes", s.metrics_bytes},
          {"learner_counts", counts},
          {"learner_counts_fields",
           {"received", "trained", "too_old", "lag_unknown", "restored_sampled", "updates", "optimizer_steps",
            "truncations", "bootstraps"}},
          {"episodes", s.window.episodes},
          {"recent_returns", s.window.returns},
          {"recent_lengths", s.window.lengths},
          {"env_steps", s.replay.env_steps},
          {"replay", to_json(s.replay)}};
}

LearnerState learner_state_from_json(const nlohmann::json& j, const std::string& where) {
  LearnerState s;
  check_json_numbers(j, where);
  try {
    s.version = j.at("version");
    s.segment = j.at("segment");
    s.elapsed_s = j.at("elapsed_s");
    s.metrics_bytes = j.at("metrics_bytes");
    for (const auto& row : j.at("learner_counts")) {
      auto v = row.get<std::vector<int64_t>>();
      if (v.size() != kLearnerCountFields) throw Error(fmt::format("a learner_counts row has {} values, expected {}", v.size(), kLearnerCountFields));
      s.counts.push_back(counts_from(v.data()));
    }
    s.window.episodes = j.at("episodes");
    s.window.returns = j.at("recent_returns").get<std::vector<double>>();
    s.window.lengths = j.at("recent_lengths").get<std::vector<double>>();
    s.replay.env_steps = j.at("env_steps");
  } catch (const std::exception& e) {
    throw Error(fmt::format("{} is malformed: {}", where, e.what()));
  }
  if (s.version < 0 || s.elapsed_s < 0 || s.metrics_bytes < -1 || s.window.returns.size() != s.window.lengths.size())
    throw Error(fmt::format("{} is malformed: negative counters or windows of different lengths", where));
  return s;
}

}  // namespace mpirl::learner
