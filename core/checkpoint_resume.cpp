// Resuming from a checkpoint: the config keys a resumed run may change, and the check of its config
// against the checkpoint's (core/checkpoint.h).
#include "core/checkpoint.h"

#include <algorithm>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/error.h"

namespace mpirl::ckpt {

const std::vector<std::string>& resume_safe_keys() {
  static const std::vector<std::string> k = {
      "run.total_env_steps", "run.max_wall_seconds", "run.stop_mean_return", "run.log_interval_s", "run.curve_interval_steps", "run.progress", "run.tensorboard",
      "run.stall_timeout_s", "run.checkpoint", "run.checkpoint_interval_s", "run.checkpoint_every_updates", "run.keep_checkpoints",
      "run.resume", "replay.dump", "replay.dump_interval_s", "actor.threads", "actor.param_tests", "learner.threads",
      "actor.inference", "actor.env_groups", "actor.compress_obs", "actor.compress_level", "roles.inference_per_node", "roles.inference_hosts", "inference.max_batch_rows",
      "inference.max_wait_us", "inference.device", "inference.threads", "inference.emulate_batch_us",
      "inference.emulate_row_us", "learner.frozen", "learner.on_nonfinite", "learner.nonfinite_limit",
      "learner.device", "learner.collective_timeout_s", "learner.cuda_graph", "learner.grad_by_hand", "learner.self_check",
      "eval.interval_s", "eval.episodes", "eval.threads", "eval.greedy",
      "kernels.scan_backend"};
  return k;
}

void check_resume_config(const std::string& checkpoint_toml, const std::string& new_toml, const std::string& where) {
  const auto& safe = resume_safe_keys();
  for (const auto& c : config_changes(checkpoint_toml, new_toml)) {
    if (c.key == "run.name" || c.key == "run.out_dir") continue;
    if (std::find(safe.begin(), safe.end(), c.key) != safe.end()) continue;
    // Checkpoints from before shards existed had one replay.
    if (c.key == "roles.replays" && c.before == "(absent)" && c.after == "1") continue;
    if (c.key == "roles.replays")
      throw ConfigError(fmt::format(
          "cannot resume {}: roles.replays changed from {} to {}; the checkpoint holds one replay part per shard and "
          "is not re-sharded: resume with roles.replays = {}",
          where, c.before, c.after, c.before == "(absent)" ? "1" : c.before));
    throw ConfigError(fmt::format(
        "cannot resume {}: config key '{}' changed from {} to {}; a resumed run may change only {}", where, c.key,
        c.before, c.after, fmt::join(safe, ", ")));
  }
}

}  // namespace mpirl::ckpt
