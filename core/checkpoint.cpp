#include "core/checkpoint.h"

#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include <spdlog/spdlog.h>

#include "core/checkpoint_files.h"
#include "core/error.h"
#include "core/fault.h"
#include "core/run_dir.h"

namespace mpirl::ckpt {
namespace {

using detail::is_dir;
using detail::kComplete;
using detail::kFormat;
using detail::list_dir;
using detail::size_and_crc;

void make_dir(const std::string& p) {
  if (::mkdir(p.c_str(), 0755) != 0 && errno != EEXIST)
    throw Error(fmt::format("cannot create checkpoint directory '{}': {}", p, std::strerror(errno)));
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

}  // namespace mpirl::ckpt
