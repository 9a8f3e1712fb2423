#pragma once
// Run checkpoints on disk (the files; what goes into them is the learner's and the replay's
// business: learner/learner_checkpoint.h, buffer/replay_checkpoint.h).
//
//   <run>/checkpoints/ckpt-<version, 12 digits>-<unix ms, 13 digits>/
//       config.toml         the resolved config the run had
//       learner.pt          parameters, optimizer state, torch RNG state (learner 0)
//       state.json          counters, the recent-returns window, time, metrics.jsonl length (learner 0)
//       replay.h5           the replay's contents (buffer/hdf5_dump.h) and replay.h5.complete
//       replay_state.json   the replay's counters, pending episode statistics, RNG and limiter state
//       model.pt, policy.json   the policy alone (what `mpirl eval` and Python read)
//       COMPLETE            written last: every file's size and CRC-32 (the replay's dump too), the
//                           version and env steps. Checkpoints sealed before replay.h5 had its CRC
//                           in COMPLETE are checked by its size (the dump's own CRC of the items is
//                           checked when it is restored)
//
// A checkpoint is written into <run>/checkpoints/.tmp-ckpt-<version>-<pid>/ by learner 0 and the
// replay rank (a shared file system, like the run directory), every file fsync'ed; then COMPLETE
// is written atomically, the directory is renamed to its final name and the parent fsync'ed. A
// directory without COMPLETE, or whose files do not match it, is never loaded.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mpirl::ckpt {

// The files every complete checkpoint holds (COMPLETE aside).
const std::vector<std::string>& required_files();

std::string checkpoints_dir(const std::string& run_dir);
// Creates a fresh temporary directory for the checkpoint at `version` (`tag` tells apart two
// checkpoints of one version, e.g. "periodic" and "final"); returns its path.
std::string begin(const std::string& run_dir, int64_t version, const std::string& tag = "ckpt");
// Seals a temporary directory holding every required file: COMPLETE (`info` plus each file's
// bytes and CRC-32), then the rename. Returns the final directory. Throws Error naming what failed.
std::string seal(const std::string& tmp_dir, int64_t version, const nlohmann::json& info);
// "" when `dir` is a complete checkpoint whose files match COMPLETE; otherwise what is wrong.
// `deep`: every file's CRC-32 (reads them all); else sizes only.
std::string verify(const std::string& dir, bool deep = true);

struct Latest {
  std::string dir;                   // "" = none
  nlohmann::json info;               // its COMPLETE
  std::vector<std::string> skipped;  // newer directories that are not complete: "<dir>: <why>"
  std::vector<std::string> skipped_dirs;  // those of them with a finding (not a failure of the check to read)
};
// The newest checkpoint of a run that verifies and, when given, passes `check` ("" = good, else
// why not: e.g. weights that are not finite, which a CRC cannot see).
using CheckpointCheck = std::function<std::string(const std::string& dir)>;
Latest latest(const std::string& run_dir, const CheckpointCheck& check = {});

// Keeps the newest `keep` checkpoints that verify (by name, sizes only) and removes older ones, a
// directory that does not verify once a newer one does (never the newest that verifies), and
// every temporary directory but `in_flight` (left by a killed run). Errors are logged, not thrown.
void prune(const std::string& run_dir, int keep, const std::string& in_flight = "");

// A resumed run moves the checkpoints latest() skipped out of the way, to
// <checkpoints>/rejected-<name> (rejected2-<name>, ... when that exists; kept for a look, never loaded, never counted by prune: one named
// after a later update would otherwise outrank every checkpoint the resumed run seals). Returns
// the new paths; errors are logged, not thrown.
std::vector<std::string> set_aside(const std::vector<std::string>& dirs);

// Removes a directory tree (POSIX calls: LibTorch's own std::filesystem symbols clash with libstdc++'s).
void remove_tree(const std::string& path);

// Keys a resumed run may change (stop conditions, intervals, timeouts, threads, the device); any
// other change between the checkpoint's config and the new one is refused with a ConfigError
// naming the key, both values and `where`. run.name and run.out_dir are not compared (the run
// directory is the one resumed).
const std::vector<std::string>& resume_safe_keys();
void check_resume_config(const std::string& checkpoint_toml, const std::string& new_toml, const std::string& where);

}  // namespace mpirl::ckpt
