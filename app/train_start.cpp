// `mpirl train` on rank 0, before any rank starts its role: the config checked, then a new run
// directory, or the resume from a run's newest complete checkpoint (app/train_start.h).
#include "app/train_start.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>

#include "buffer/replay.h"
#include "comm/ranks.h"
#include "comm/rollout_codec.h"
#include "core/checkpoint.h"
#include "core/config.h"
#include "core/error.h"
#include "envs/registry.h"
#include "learner/checkpoint_weights.h"
#include "models/policy.h"

namespace mpirl::detail {
namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError(fmt::format("cannot read '{}'", path));
  return std::string(std::istreambuf_iterator<char>(in), {});
}

bool path_exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}

// metrics.jsonl continues where the checkpoint left it: rows written after it (by the run that
// was preempted or killed) move to metrics.after-checkpoint-<segment>-<unix time>.jsonl: nothing is lost.
void rewind_metrics(const std::string& run_dir, int64_t bytes, int64_t segment) {
  const std::string path = run_dir + "/metrics.jsonl";
  struct stat st {};
  if (bytes < 0 || ::stat(path.c_str(), &st) != 0 || st.st_size <= bytes) return;  // -1: a final checkpoint
  std::ifstream in(path, std::ios::binary);
  in.seekg(bytes);
  std::string tail(std::istreambuf_iterator<char>(in), {});
  const std::string aside = fmt::format("{}/metrics.after-checkpoint-{}-{}.jsonl", run_dir, segment, ::time(nullptr));
  write_file_atomic(aside, tail);
  if (::truncate(path.c_str(), bytes) != 0)
    throw ConfigError(fmt::format("cannot truncate '{}' to the checkpoint's {} bytes: {}", path, bytes,
                                  std::strerror(errno)));
  fmt::print(stderr, "mpirl: {} rows of metrics.jsonl written after the checkpoint moved to {}\n",
             std::count(tail.begin(), tail.end(), '\n'), aside);
}

// Why a run resumed from `state` (its checkpoint's state.json) would stop at once, with how to
// extend it; "" when it has work left. Resuming such a run would only re-link the replay and
// write another final checkpoint.
std::string finished_reason(const Config& cfg, const nlohmann::json& state, const std::string& run_dir) {
  const int64_t steps = state.at("env_steps").get<int64_t>();
  const double elapsed = state.at("elapsed_s").get<double>();
  const auto returns = state.at("recent_returns").get<std::vector<double>>();
  std::string why, extend;
  if (steps >= cfg.run.total_env_steps) {
    why = fmt::format("{} env steps >= run.total_env_steps = {}", steps, cfg.run.total_env_steps);
    extend = fmt::format("--set run.total_env_steps={}", std::max<int64_t>(2 * cfg.run.total_env_steps, steps + 1));
  } else if (cfg.run.max_wall_seconds > 0 && elapsed >= cfg.run.max_wall_seconds) {
    why = fmt::format("{:.0f} s of training >= run.max_wall_seconds = {}", elapsed, cfg.run.max_wall_seconds);
    extend = fmt::format("--set run.max_wall_seconds={:.0f}", 2 * cfg.run.max_wall_seconds);
  } else if (!std::isnan(cfg.run.stop_mean_return) && returns.size() >= 100) {
    double mean = 0;
    for (size_t i = returns.size() - 100; i < returns.size(); ++i) mean += returns[i];
    mean /= 100;
    if (mean >= cfg.run.stop_mean_return) {
      why = fmt::format("mean return {:.2f} over the last 100 episodes >= run.stop_mean_return = {}", mean,
                        cfg.run.stop_mean_return);
      extend = "--set run.stop_mean_return=nan (or a higher target)";
    }
  }
  if (why.empty()) return "";
  return fmt::format("{} has already finished ({}): nothing to do, and nothing was changed. To train it further, "
                     "raise the limit it met: mpirl train --resume {} {}",
                     run_dir, why, run_dir, extend);
}

// actor.compress_obs = "zstd" needs uint8 image observations ("auto" compresses only those).
void validate_compression(const Config& cfg, const envs::EnvSpec& spec) {
  if (cfg.actor.compress_obs == "zstd" && !obs_compressible(spec))
    throw ConfigError(fmt::format("config key 'actor.compress_obs' = \"zstd\": {} has no uint8 image observations to "
                                  "compress (use \"auto\" or \"none\")", spec.id));
}

// A resumed run: the newest complete checkpoint of `run_dir`, the config checked against its own.
// Returns false when there is none (`required`: that is an error, else a fresh start).
bool prepare_resume(Verdict& v, Config& cfg, const std::string& config_file, const std::vector<std::string>& overrides,
                    const std::string& run_dir, bool required, int world, const std::vector<std::string>& hosts) {
  // A live run must not be resumed under itself: the resume would rewind its metrics.jsonl, prune
  // its checkpoint in progress and write its model.pt.
  if (const std::string live = live_run_here(run_dir); !live.empty())
    throw ConfigError(fmt::format("cannot resume '{}': {}; stop that run first (or wait for it to end)", run_dir, live));
  const auto latest = ckpt::latest(run_dir, learner::checkpoint_weights_problem);
  for (const auto& s : latest.skipped)
    fmt::print(stderr, "mpirl: not loading checkpoint {}{}\n", s,
               latest.dir.empty() ? "" : fmt::format(" (resuming from {} instead)", latest.dir));
  if (latest.dir.empty()) {
    // Checkpoints that all fail to verify are an error, never a silent fresh start.
    if (required || !latest.skipped.empty())
      throw ConfigError(fmt::format("cannot resume '{}': no complete checkpoint in {}{}", run_dir,
                                    ckpt::checkpoints_dir(run_dir),
                                    latest.skipped.empty() ? "" : fmt::format(" ({})", fmt::join(latest.skipped, "; "))));
    return false;
  }
  // No config file: the checkpoint's own config, with the --set overrides on top.
  if (config_file.empty()) cfg = load_config(latest.dir + "/config.toml", overrides);
  ckpt::check_resume_config(read_text(latest.dir + "/config.toml"), cfg.resolved_toml,
                            fmt::format("'{}' from {}", run_dir, latest.dir));
  make_layout(cfg, world, hosts);
  const auto spec = envs::env_spec(cfg);
  models::validate_model_config(cfg, spec);
  validate_compression(cfg, spec);
  buffer::validate_replay_config(cfg);
  nlohmann::json state;
  try {
    state = nlohmann::json::parse(read_text(latest.dir + "/state.json"));
    v.start.segment = state.at("segment").get<int64_t>() + 1;
    v.finished = finished_reason(cfg, state, run_dir);
    if (!v.finished.empty()) return true;  // nothing is touched: no rewind, no new config
    rewind_metrics(run_dir, state.at("metrics_bytes").get<int64_t>(), v.start.segment - 1);
    // Files a killed rank was writing (summary.json, model.pt): no rank of this run writes yet.
    for (const auto& name : remove_stale_temporaries(run_dir))
      fmt::print(stderr, "mpirl: removed {}, a file left half-written when the run was stopped\n", name);
    for (const auto& moved : ckpt::set_aside(latest.skipped_dirs))
      fmt::print(stderr, "mpirl: the skipped checkpoint is kept as {} (never loaded)\n", moved);
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(fmt::format("checkpoint {}: state.json is malformed: {}", latest.dir, e.what()));
  }
  try {
    write_file_atomic(run_dir + "/config.toml", cfg.resolved_toml);
  } catch (const Error& e) {
    throw ConfigError(e.what());
  }
  v.start.resume_from = latest.dir;
  fmt::print(stderr, "mpirl: resuming {} from {} (update {}, {} env steps)\n", run_dir, latest.dir,
             latest.info.value("version", int64_t(-1)), latest.info.value("env_steps", int64_t(-1)));
  return true;
}

}  // namespace

Verdict validate_on_rank0(const std::string& file, const std::vector<std::string>& overrides,
                          const std::string& resume_dir, int world, const std::vector<std::string>& hosts) {
  Verdict v;
  try {
    if (!resume_dir.empty() && !path_exists(resume_dir))
      throw ConfigError(fmt::format("--resume '{}': no such run directory", resume_dir));
    // --resume without a config file: the checkpoint's own config (read in prepare_resume).
    Config cfg = !resume_dir.empty() && file.empty() ? Config{} : load_config(file, overrides);
    std::string run_dir = resume_dir;
    while (run_dir.size() > 1 && run_dir.back() == '/') run_dir.pop_back();
    bool resumed = false;
    if (!run_dir.empty()) {
      resumed = prepare_resume(v, cfg, file, overrides, run_dir, true, world, hosts);
    } else if (cfg.run.resume == "auto") {
      if (cfg.run.name.empty())
        throw ConfigError("config key 'run.resume' = \"auto\" needs a fixed run.name (slurm/train.sbatch sets one from "
                          "the job id), so that a requeued job finds its run");
      run_dir = run_dir_path(cfg);
      resumed = prepare_resume(v, cfg, file, overrides, run_dir, false, world, hosts);
      if (!resumed && path_exists(run_dir)) {
        // A run that ended before its first checkpoint: kept aside, and this one starts afresh.
        const std::string aside = fmt::format("{}.no-checkpoint-{}", run_dir, ::time(nullptr));
        if (::rename(run_dir.c_str(), aside.c_str()) != 0)
          throw ConfigError(fmt::format("cannot move '{}' (no complete checkpoint) aside: {}", run_dir,
                                        std::strerror(errno)));
        fmt::print(stderr, "mpirl: {} held no complete checkpoint: moved to {}, starting afresh\n", run_dir, aside);
      }
    }
    if (!v.finished.empty()) return v;
    if (!resumed) {
      make_layout(cfg, world, hosts);
      const auto spec = envs::env_spec(cfg);  // unknown env id
      models::validate_model_config(cfg, spec);  // a CNN on flat observations
      validate_compression(cfg, spec);
      buffer::validate_replay_config(cfg);
      run_dir = create_run_dir(cfg);
    }
    v.start.run_dir = run_dir;
    v.config_toml = cfg.resolved_toml;
  } catch (const ConfigError& e) {
    v.error = e.what();
  } catch (const Error& e) {  // a checkpoint or run directory that cannot be read
    v.error = e.what();
  }
  return v;
}

}  // namespace mpirl::detail
