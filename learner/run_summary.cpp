// The run controller's files at the end and after each checkpoint: model.pt, model_best.pt and
// summary.json (the run's counters, stop decision and what each role reported).
#include "learner/run_controller.h"

#include <cmath>

#include <spdlog/spdlog.h>

#include "core/error.h"
#include "models/policy_file.h"

namespace mpirl::learner {

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
