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
    : cfg_(cfg), comms_(comms), run_dir_(run_dir), lead_(comms.rank == 0) {
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
}

void RunController::on_episodes(const std::vector<float>& returns, const std::vector<int32_t>& lengths) {
  for (size_t k = 0; k < returns.size() && k < lengths.size(); ++k) {
    returns_.add(returns[k]);
    lengths_.add(lengths[k]);
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
  // metrics.jsonl was cut back to the checkpoint (app/train.cpp), but the earlier event files still
  // hold the rows written after it. A SessionLog START makes TensorBoard drop the points of earlier
  // files at steps >= its step: one past the checkpoint's env steps keeps the rows metrics.jsonl
  // kept (steps <= the checkpoint's; a final checkpoint's come after every row of its run).
  tensorboard([&](auto& tb) { tb.write_session_start(checkpoint_env_steps + 1); });
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
    j["loss_policy"] = last_.last.policy.item<double>();
    j["loss_value"] = last_.last.value.item<double>();
    j["entropy"] = last_.last.entropy.item<double>();
    j["mean_rho"] = last_.last.mean_rho.item<double>();
    j["clip_fraction"] = last_.last.clip_fraction.item<double>();
    j["grad_norm"] = last_.grad_norm.item<double>();
    j["lr"] = last_.lr;
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
      fmt::format("loss pi {:+.3f} v {:.3f} ent {:.3f}", j.value("loss_policy", 0.0), j.value("loss_value", 0.0),
                  j.value("entropy", 0.0)),
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

void RunController::save_model(models::Policy& policy, const envs::EnvSpec& spec) {
  if (!models::all_finite(policy)) {  // never over the last good one
    spdlog::error("model.pt not written: the parameters are not finite (NaN or inf); the one written before stays");
    return;
  }
  try {  // atomic: a failure (a full disk) leaves the one written before
    models::save_policy(run_dir_, policy, spec, models::model_options(cfg_));  // model.pt and policy.json
  } catch (const std::exception& e) {
    spdlog::error("model.pt not written (the one written before stays; the run goes on): {}", e.what());
  }
}

void RunController::check_best() {
  if (!lead_ || !best_policy_ || cfg_.eval.interval_s > 0 || returns_.q.size() < returns_.n) return;
  const double mean = returns_.mean();
  if (!best_.is_null() && mean <= best_.value("mean_return", -1e300)) return;
  if (!models::all_finite(*best_policy_)) return;
  try {
    models::save_policy(run_dir_, *best_policy_, *best_spec_, models::model_options(cfg_), "model_best.pt");
    best_ = {{"mean_return", mean}, {"update", counts_.updates}, {"env_steps", status_.env_steps},
             {"source", "train (the last 100 episodes)"}, {"file", run_dir_ + "/model_best.pt"}};
  } catch (const std::exception& e) {
    spdlog::warn("model_best.pt not written (the run goes on): {}", e.what());
  }
}

nlohmann::json RunController::summary(const std::string& reason, double wall, const nlohmann::json& extra,
                                      bool final) const {
  auto s = snapshot();
  s["wall_time_s"] = wall;
  s["stop_reason"] = reason;
  s["final_mean_return"] = s["mean_return"];  // the window at the end, episodes drained after the stop included
  if (!decision_.is_null()) s["stop_decision"] = decision_;
  s["learners"] = comms_.layout.learners;
  s["actors"] = comms_.layout.actors();
  s["world_size"] = comms_.layout.world;
  s["replay"] = to_json(status_);
  s["replay_final"] = final;  // false: written before the replay's goodbye (its counters may still move)
  const auto& c = final ? totals_ : counts_;
  if (final) {  // the learners' real total replaces the estimate
    s.erase("learners_samples_per_s_est");
    s["learners_samples_per_s"] = wall > 0 ? double(c.trained) * double(cfg_.actor.rollout_len) / wall : 0.0;
  }
  s["learner_counts"] = {{"received", c.received},           {"trained", c.trained},
                         {"too_old", c.too_old},             {"lag_unknown", c.lag_unknown},
                         {"restored_sampled", c.restored_sampled}, {"updates", c.updates},
                         {"optimizer_steps", c.optimizer_steps}, {"truncations", c.truncations},
                         {"bootstraps", c.bootstraps},       {"summed_over_learners", final}};
  if (status_.dump.dumps > 0 || status_.dump.failures > 0)
    s["replay_dump"] = {{"path", status_.dump.path},
                        {"items", status_.dump.items},
                        {"checksum_crc32", status_.dump.checksum},
                        {"seconds", status_.dump.seconds},
                        {"failures", status_.dump.failures},
                        {"last_error", status_.dump.last_error}};
  if (inference_ && inference_->enabled()) s["inference"] = inference_->summary();
  s["best_policy"] = best_;
  for (auto& [k, v] : fields_.items()) s[k] = v;
  for (auto& [k, v] : extra.items()) s[k] = v;
  return s;
}

void RunController::write_running_summary(const nlohmann::json& extra) {
  try {
    write_json_atomic(run_dir_ + "/summary.json", summary("running", elapsed(), extra, false));
  } catch (const std::exception& e) {
    spdlog::error("summary.json not written (the run goes on): {}", e.what());
  }
}

void RunController::write_summary(const std::string& reason, const nlohmann::json& extra, bool final) {
  if (wall_ == 0) wall_ = elapsed();
  if (final) log(true);
  const auto s = summary(reason, wall_, extra, final);
  try {
    write_json_atomic(run_dir_ + "/summary.json", s);
  } catch (const std::exception& e) {
    spdlog::error("summary.json not written: {}", e.what());
  }
  if (final)
    spdlog::info("run finished ({}): {} env steps in {:.1f} s = {:.0f} SPS, {} updates, final mean return {} -> {}",
                 reason, status_.env_steps, wall_, s["sps"].get<double>(), counts_.updates, s["mean_return"].dump(),
                 run_dir_);
}

}  // namespace mpirl::learner
