#include "core/checkpoint.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include <spdlog/spdlog.h>
#include <zlib.h>

#include "core/config.h"
#include "core/error.h"
#include "core/fault.h"
#include "core/run_dir.h"

namespace mpirl::ckpt {
namespace {

constexpr char kComplete[] = "COMPLETE";
constexpr int kFormat = 1;

std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return names;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

bool is_dir(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

void make_dir(const std::string& p) {
  if (::mkdir(p.c_str(), 0755) != 0 && errno != EEXIST)
    throw Error(fmt::format("cannot create checkpoint directory '{}': {}", p, std::strerror(errno)));
}

// Size and CRC-32 of a file, read in 4 MiB blocks. Throws Error naming it.
std::pair<int64_t, uint32_t> size_and_crc(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(fmt::format("cannot open '{}': {}", path, std::strerror(errno)));
  std::vector<char> buf(size_t(4) << 20);
  uLong crc = ::crc32(0L, Z_NULL, 0);
  int64_t bytes = 0;
  for (;;) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      throw Error(fmt::format("cannot read '{}': {}", path, std::strerror(err)));
    }
    if (n == 0) break;
    crc = ::crc32(crc, reinterpret_cast<const Bytef*>(buf.data()), uInt(n));
    bytes += n;
  }
  ::close(fd);
  return {bytes, uint32_t(crc)};
}

// Files that carry their own checksum (verified when loaded): COMPLETE records their size only.
// (replay.h5, and replay.shard<k>.h5 of replay shards.)
bool self_checked(const std::string& name) {
  return name == "replay.h5" || (name.rfind("replay.shard", 0) == 0 && name.size() > 3 && name.substr(name.size() - 3) == ".h5");
}

int remove_entry(const char* path, const struct stat*, int flag, struct FTW*) {
  return flag == FTW_DP ? ::rmdir(path) : ::unlink(path);
}

}  // namespace

const std::vector<std::string>& required_files() {
  static const std::vector<std::string> f = {"config.toml", "learner.pt", "state.json", "replay.h5",
                                             "replay_state.json"};
  return f;
}

std::string checkpoints_dir(const std::string& run_dir) { return run_dir + "/checkpoints"; }

std::string begin(const std::string& run_dir, int64_t version, const std::string& tag) {
  const std::string parent = checkpoints_dir(run_dir);
  make_dir(parent);
  const std::string tmp = fmt::format("{}/.tmp-ckpt-{:012d}-{}-{}", parent, version, tag, ::getpid());
  if (is_dir(tmp)) remove_tree(tmp);
  make_dir(tmp);
  return tmp;
}

std::string seal(const std::string& tmp_dir, int64_t version, const nlohmann::json& info) {
  nlohmann::json c = info;
  c["format"] = kFormat;
  c["version"] = version;
  nlohmann::json files = nlohmann::json::object();
  for (const auto& name : required_files())
    if (struct stat st {}; ::stat((tmp_dir + "/" + name).c_str(), &st) != 0)
      throw Error(fmt::format("checkpoint file '{}/{}' is missing: {}", tmp_dir, name, std::strerror(errno)));
  // Every file of the checkpoint (model.pt, policy.json and the replay's dump included), with its
  // CRC-32: a bit flip anywhere makes verify() refuse it, and latest() falls back to an older one.
  for (const auto& name : list_dir(tmp_dir)) {
    const std::string p = tmp_dir + "/" + name;
    if (name == kComplete || is_dir(p)) continue;
    auto [bytes, crc] = size_and_crc(p);
    files[name] = {{"bytes", bytes}, {"crc32", crc}};
    fsync_path(p, false);
  }
  c["files"] = files;
  fsync_path(tmp_dir, true);
  kill_point("seal");
  write_json_atomic(tmp_dir + "/" + kComplete, c);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::system_clock::now().time_since_epoch()).count();
  const std::string parent = tmp_dir.substr(0, tmp_dir.rfind('/'));
  const std::string final_dir = fmt::format("{}/ckpt-{:012d}-{:013d}", parent, version, ms);
  if (::rename(tmp_dir.c_str(), final_dir.c_str()) != 0)
    throw Error(fmt::format("cannot rename checkpoint '{}' to '{}': {}", tmp_dir, final_dir, std::strerror(errno)));
  fsync_path(parent, true);
  return final_dir;
}

// The whole of a small file; false when it cannot be opened.
static bool read_small(const std::string& path, std::string* text) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) text->append(buf, size_t(n));
  ::close(fd);
  return n == 0;
}

// An integer field of COMPLETE within [lo, hi]; false when it is missing, not an integer (a float
// out of range would convert with undefined behaviour) or outside.
static bool int_field(const nlohmann::json& o, const char* key, int64_t lo, int64_t hi, int64_t* out) {
  const auto it = o.find(key);
  if (it == o.end() || !it->is_number_integer()) return false;
  if (it->is_number_unsigned() && it->get<uint64_t>() > uint64_t(INT64_MAX)) return false;
  const int64_t v = it->get<int64_t>();
  if (v < lo || v > hi) return false;
  *out = v;
  return true;
}

std::string verify(const std::string& dir, bool deep) {
  std::string text;
  if (!read_small(dir + "/" + kComplete, &text)) return fmt::format("no {} marker (a partial checkpoint)", kComplete);
  try {
    const nlohmann::json c = nlohmann::json::parse(text);
    int64_t format = 0;
    if (!c.is_object() || !int_field(c, "format", 0, INT64_MAX, &format) || format != kFormat || !c.contains("files") ||
        !c["files"].is_object())
      return fmt::format("{} has an unknown format", kComplete);
    for (const char* k : {"version", "env_steps"})
      if (int64_t v = 0; c.contains(k) && !int_field(c, k, 0, INT64_MAX, &v))
        return fmt::format("{} has a malformed {}", kComplete, k);
    for (const auto& name : required_files())
      if (!c["files"].contains(name) || !c["files"][name].is_object())
        return fmt::format("{} does not list {}", kComplete, name);
    for (const auto& [name, f] : c["files"].items()) {
      if (!f.is_object() || name.find('/') != std::string::npos || name == "." || name == "..")
        return fmt::format("{} lists '{}' malformed", kComplete, name);
      int64_t want_bytes = 0, want_crc = 0;
      if (!int_field(f, "bytes", 0, INT64_MAX, &want_bytes) ||
          (f.contains("crc32") && !int_field(f, "crc32", 0, UINT32_MAX, &want_crc)))
        return fmt::format("{} lists '{}' with a malformed size or CRC-32", kComplete, name);
      const std::string path = dir + "/" + name;
      // Checkpoints sealed before every file had a CRC list replay.h5 by its size (the dump
      // carries its own CRC of the items, checked when restored).
      if (!deep || !f.contains("crc32")) {
        struct stat st {};
        if (::stat(path.c_str(), &st) != 0) return fmt::format("{} is missing", name);
        if (st.st_size != want_bytes) return fmt::format("{} has {} bytes, {} says {}", name, st.st_size, kComplete, want_bytes);
        if (!f.contains("crc32") && !self_checked(name)) return fmt::format("{} lists {} without a CRC-32", kComplete, name);
        continue;
      }
      std::pair<int64_t, uint32_t> got;
      try {
        got = size_and_crc(path);
      } catch (const Error& e) {
        return e.what();
      }
      if (got.first != want_bytes) return fmt::format("{} has {} bytes, {} says {}", name, got.first, kComplete, want_bytes);
      if (got.second != uint32_t(want_crc))
        return fmt::format("{} has CRC-32 {:08x}, {} says {:08x} (corrupt)", name, got.second, kComplete,
                           uint32_t(want_crc));
    }
  } catch (const nlohmann::json::exception& e) {
    return fmt::format("{} is malformed: {}", kComplete, e.what());
  }
  return "";
}

Latest latest(const std::string& run_dir, const CheckpointCheck& check) {
  Latest out;
  const std::string parent = checkpoints_dir(run_dir);
  auto names = list_dir(parent);
  for (auto it = names.rbegin(); it != names.rend(); ++it) {
    if (it->rfind("ckpt-", 0) != 0 || !is_dir(parent + "/" + *it)) continue;
    const std::string dir = parent + "/" + *it;
    std::string why = verify(dir);
    bool definite = true;  // a finding about the checkpoint itself (not a failure to read it now)
    if (why.empty() && check) {
      try {
        why = check(dir);
      } catch (const std::exception& e) {
        why = e.what();
        definite = false;
      }
    }
    if (!why.empty()) {
      out.skipped.push_back(fmt::format("{}: {}", dir, why));
      if (definite) out.skipped_dirs.push_back(dir);
      continue;
    }
    out.dir = dir;
    std::string text;
    read_small(dir + "/" + kComplete, &text);
    out.info = nlohmann::json::parse(text);
    return out;
  }
  return out;
}

void prune(const std::string& run_dir, int keep, const std::string& in_flight) {
  const std::string parent = checkpoints_dir(run_dir);
  auto names = list_dir(parent);
  int kept = 0;
  for (auto it = names.rbegin(); it != names.rend(); ++it) {
    const std::string p = parent + "/" + *it;
    // Only checkpoints that verify count towards `keep` (one that does not is never loaded, and
    // never displaces a good one); one that does not verify goes once a newer one does; stale
    // temporaries go. (Sizes only here: every seal prunes, and reading every replay.h5 again each
    // time would cost more than the checkpoint. latest() reads the CRCs.)
    const bool is_ckpt = it->rfind("ckpt-", 0) == 0;
    const bool good = is_ckpt && verify(p, false).empty();
    const bool old_ckpt = good && ++kept > keep;
    const bool failed_behind_good = is_ckpt && !good && kept > 0;
    const bool stale_tmp = it->rfind(".tmp-ckpt-", 0) == 0 && p != in_flight;
    if (!old_ckpt && !failed_behind_good && !stale_tmp) continue;
    try {
      remove_tree(p);
    } catch (const std::exception& e) {
      spdlog::warn("checkpoint clean-up: {}", e.what());
    }
  }
}

std::vector<std::string> set_aside(const std::vector<std::string>& dirs) {
  std::vector<std::string> out;
  for (const auto& d : dirs) {
    const auto slash = d.rfind('/');
    std::string to = d.substr(0, slash + 1) + "rejected-" + d.substr(slash + 1);
    struct stat st {};
    for (int k = 2; ::stat(to.c_str(), &st) == 0; ++k)  // never onto an earlier rejected one
      to = d.substr(0, slash + 1) + fmt::format("rejected{}-", k) + d.substr(slash + 1);
    if (std::rename(d.c_str(), to.c_str()) != 0) {
      spdlog::warn("cannot move the rejected checkpoint '{}' aside: {}", d, std::strerror(errno));
      continue;
    }
    out.push_back(to);
  }
  return out;
}

void remove_tree(const std::string& path) {
  if (::nftw(path.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0 && errno != ENOENT)
    throw Error(fmt::format("cannot remove '{}': {}", path, std::strerror(errno)));
}

const std::vector<std::string>& resume_safe_keys() {
  static const std::vector<std::string> k = {
      "run.total_env_steps", "run.max_wall_seconds", "run.stop_mean_return", "run.log_interval_s", "run.progress", "run.tensorboard",
      "run.stall_timeout_s", "run.checkpoint", "run.checkpoint_interval_s", "run.checkpoint_every_updates", "run.keep_checkpoints",
      "run.resume", "replay.dump", "replay.dump_interval_s", "actor.threads", "actor.param_tests", "learner.threads",
      "actor.inference", "actor.env_groups", "actor.compress_obs", "actor.compress_level", "roles.inference_per_node", "roles.inference_hosts", "inference.max_batch_rows",
      "inference.max_wait_us", "inference.device", "inference.threads", "inference.emulate_batch_us",
      "inference.emulate_row_us", "learner.frozen", "learner.on_nonfinite", "learner.nonfinite_limit",
      "learner.device", "learner.collective_timeout_s", "learner.cuda_graph", "learner.self_check",
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
