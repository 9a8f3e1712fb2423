// The run controller's metrics: one row of metrics.jsonl (and its TensorBoard twin) every
// run.log_interval_s, and learner 0's status line or bar built from it.
#include "learner/run_controller.h"

#include <algorithm>
#include <cmath>
#include <ctime>

#include <fmt/chrono.h>
#include <spdlog/spdlog.h>

#include "core/clock.h"
#include "core/logging.h"

namespace mpirl::learner {

nlohmann::json RunController::snapshot() const {
  const double wall = wall_ > 0 ? wall_ : elapsed();
  auto num_or_null = [](double v) { return std::isnan(v) ? nlohmann::json(nullptr) : nlohmann::json(v); };
  nlohmann::json j;
  j["time_s"] = wall;
  j["env_steps"] = status_.env_steps;
  j["sps"] = wall > 0 ? double(status_.env_steps) / wall : 0.0;
  j["learner_updates"] = counts_.updates;
  const double samples = double(counts_.trained) * double(cfg_.actor.rollout_len);
  j["learner_samples"] = samples;  // learner 0's own, as are the two rates below
  const double rate = wall > 0 ? samples / wall : 0.0;
  j["learner_samples_per_s"] = rate;  // the older, unlabelled name of learner0_samples_per_s
  j["learner0_samples_per_s"] = rate;
  j["learners"] = comms_.layout.learners;
  // Every learner trains on batches of its own: together about this many. summary.json's final
  // write has the learners' real total instead (learners_samples_per_s, from set_totals).
  j["learners_samples_per_s_est"] = rate * double(comms_.layout.learners);
  j["episodes"] = episodes_;
  j["mean_return"] = num_or_null(returns_.mean());
  j["mean_length"] = num_or_null(lengths_.mean());
  j["policy_lag_mean"] = last_lag_mean_;
  j["policy_lag_max"] = last_lag_max_;
  j["items_too_old"] = counts_.too_old;
  j["learner_wait_s"] = wait_s_;
  j["replay_fill"] = status_.fill;
  j["replay_capacity"] = status_.capacity;
  if (inference_ && inference_->enabled())
    if (auto r = inference_->row(); !r.is_null()) j["inference"] = r;  // the inference ranks' last windows
  if (last_.last.total.defined()) {
    j["loss_total"] = last_.last.total.item<double>();
    // What the algorithm has (R2D2: a TD loss and the mean Q, no policy term or entropy).
    auto put = [&](const char* k, const torch::Tensor& t) {
      if (t.defined()) j[k] = t.item<double>();
    };
    put("loss_policy", last_.last.policy);
    put("loss_value", last_.last.value);
    put("entropy", last_.last.entropy);
    put("mean_rho", last_.last.mean_rho);
    put("clip_fraction", last_.last.clip_fraction);
    put("q_mean", last_.last.q_mean);
    j["grad_norm"] = last_.grad_norm.item<double>();
    j["lr"] = last_.lr;
    if (std::isfinite(last_.kl)) j["kl"] = last_.kl;  // learner.kl_target
    j["entropy_coef"] = last_.entropy_coef;
    if (last_.value_sigma.defined()) {  // PopArt's statistics of the value targets
      j["value_mu"] = last_.value_mu.item<double>();
      j["value_sigma"] = last_.value_sigma.item<double>();
    }
  }
  return j;
}

void RunController::log(bool final) {
  // The lag window closes here: this row reports the items received since the last one.
  if (lag_n_ > 0) {
    last_lag_mean_ = double(lag_sum_) / double(lag_n_);
    last_lag_max_ = lag_max_;
  }
  lag_sum_ = lag_n_ = lag_max_ = 0;
  auto j = snapshot();
  last_log_ = now_seconds();
  write_row(j, "train/");
  if (final) curve_.record(status_.env_steps, elapsed(), episodes_, returns_.mean(), true);
  check_best();
  // The recent-returns window (the episodes behind mean_return) as a histogram.
  tensorboard([&](auto& tb) {
    tb.write_histogram("train/episode_return", {returns_.q.begin(), returns_.q.end()}, status_.env_steps);
  });
  auto num = [&](const char* k) { return j[k].is_null() ? std::nan("") : j[k].get<double>(); };
  // Most important first: a bar narrower than the line keeps the leading fields that fit.
  const std::string learner_label =  // its own count, not the learners' total
      comms_.layout.learners > 1 ? fmt::format("learner 0 (of {})", comms_.layout.learners) : "learner";
  std::vector<std::string> fields = {
      fmt::format("[{:7.1f}s] steps {:>10}", num("time_s"), status_.env_steps),
      fmt::format("{:>8.0f} SPS", num("sps")),
      fmt::format("return {:7.1f}", num("mean_return")),
      fmt::format("{} {:>8.0f} samples/s", learner_label, num("learner_samples_per_s")),
      fmt::format("lag {:.1f}/{}", last_lag_mean_, last_lag_max_),
      j.contains("q_mean") ? fmt::format("loss td {:.4f} Q {:.2f}", j.value("loss_value", 0.0), j.value("q_mean", 0.0))
                           : fmt::format("loss pi {:+.3f} v {:.3f} ent {:.3f}", j.value("loss_policy", 0.0),
                                         j.value("loss_value", 0.0), j.value("entropy", 0.0)),
      fmt::format("replay {}/{}", status_.fill, status_.capacity)};
  if (j.contains("inference")) {  // central inference: rows per forward pass, request latency
    const auto& in = j["inference"];
    fields.push_back(fmt::format("infer {:.1f} rows {:.1f} ms lag {:.1f}", in.value("rows_mean", 0.0),
                                 in.value("latency_ms_mean", 0.0), in.value("acting_lag_mean", 0.0)));
  }
  if (live_status() && !final) {
    const size_t width = size_t(std::max(20, terminal_columns() - 1));
    std::string line = fields[0];
    for (size_t i = 1; i < fields.size() && line.size() + 3 + fields[i].size() <= width; ++i) line += " | " + fields[i];
    fmt::print("\r{}\x1b[K", line.substr(0, width));
  } else {
    std::string line;
    for (const auto& f : fields) line += (line.empty() ? "" : " | ") + f;
    const std::time_t t = std::time(nullptr);
    // On a live terminal the final line first clears the bar, as every log line does (core/logging.cpp).
    fmt::print("{}[{:%H:%M:%S}] {}\n", live_status() ? "\r\x1b[K" : "", fmt::localtime(t), line);
  }
  std::fflush(stdout);
}

void RunController::maybe_log() {
  if (!lead_ || now_seconds() - last_log_ < cfg_.run.log_interval_s) return;
  log(false);
}

}  // namespace mpirl::learner
