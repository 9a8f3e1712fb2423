#pragma once
// The files a trained policy is saved as, side by side in a run directory (learner 0 writes them
// at the end of a run and after each checkpoint: learner/run_summary.cpp; every checkpoint
// holds them too; `mpirl eval`, `mpirl export` and the Python package python/mpirl_policy read them):
//   model.pt     the parameters: torch::save of a CPU copy of the Policy, a TorchScript-style
//                archive whose names are the registered ones (torso0.weight, encoder.conv0.bias,
//                core.nu_log, core.cell.weight_ih, pi.weight, v.bias, log_std, ...);
//   policy.json  what config.toml does not say: the env's observation and action spaces, and the
//                model as built for them (the encoder "auto" resolved to, the core's state size).
#include <string>

#include <nlohmann/json.hpp>

#include "envs/env.h"
#include "models/policy.h"

namespace mpirl::models {

inline constexpr int kPolicyFileVersion = 1;

// policy.json's content:
//   {"format": "mpirl-policy", "version": 1,
//    "env": {"id", "obs_shape": [...], "obs_dtype": "float32" | "uint8",
//            "action": {"type": "discrete", "n": L} | {"type": "box", "dim": A, "low": [...], "high": [...]},
//            "max_episode_steps"},
//    "model": {"encoder" (resolved), "hidden", "activation", "core", "core_size", "core_state",
//              "ffm_context", "state_size", "dist_size", "obs_norm", "obs_norm_clip"}}
// A model.python run's "model" is {"encoder": "python", "python" (file.py:factory), "state_size",
// "dist_size", "obs_norm", "obs_norm_clip"}. state_size < 0: computed (a Python run imports its module).
nlohmann::json policy_spec_json(const envs::EnvSpec& spec, const ModelOptions& opts, int64_t state_size = -1);

// Writes dir/<model_file> (default model.pt: a CPU copy of `policy`, wherever it lives) and
// dir/policy.json, each atomically (core/run_dir.h). Throws mpirl::Error naming the file.
void save_policy(const std::string& dir, Policy& policy, const envs::EnvSpec& spec, const ModelOptions& opts,
                 const std::string& model_file = "model.pt");

// Reads a Policy's parameters and buffers from an archive (a model.pt, or a checkpoint's "model").
// Every parameter must be there. Files written before the normalisation buffers existed lack
// value_shift/value_scale (kept at 0 and 1: what those files meant) and empty obs buffers; a
// missing observation normalisation of a policy that has one is an error naming `what`.
void load_policy_archive(Policy& policy, torch::serialize::InputArchive& ar, const std::string& what);
// The same from a model.pt file; errors name the file.
void load_policy_file(Policy& policy, const std::string& path);

// The first floating-point tensor of a policy archive that holds a NaN or an inf, as
// "name (N of M values)"; "" when all are finite. `sub`: the sub-archive holding the policy ("" =
// the file itself, as in model.pt; "model" in a checkpoint's learner.pt). Throws mpirl::Error
// naming the file when it cannot be read.
std::string nonfinite_policy_tensor(const std::string& path, const std::string& sub = "");

}  // namespace mpirl::models
