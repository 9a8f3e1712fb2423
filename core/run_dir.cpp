#include "core/run_dir.h"

#include <dirent.h>

#include <chrono>
#include <ctime>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace mpirl {
namespace fs = std::filesystem;

namespace {

// A name safe for tar, scp and shells: env ids such as "gym:CartPole-v1" or "py:pkg.mod:Env"
// lose their colons and slashes.
std::string safe_name(std::string s) {
  for (char& c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) c = '_';
  return s;
}

bool exists(const std::string& p) {
  std::error_code ec;
  return fs::exists(fs::symlink_status(p, ec));
}

// Whether a run directory holds anything a run saved: a model or a checkpoint.
bool holds_results(const std::string& dir) {
  std::error_code ec;
  if (exists(dir + "/model.pt")) return true;
  const std::string ck = dir + "/checkpoints";
  return fs::is_directory(ck, ec) && !fs::is_empty(ck, ec);
}

// Why <dir>'s run may still be going on: its replay.pid names a live process on this host, or a
// process on another host (replay.host), which cannot be checked from here. "" = it is not.
// <dir>/replay.pid and replay.host (pid 0: none), and this host's name.
struct ReplayPid {
  long pid = 0;
  std::string host, here;
};
ReplayPid read_replay_pid(const std::string& dir) {
  ReplayPid r;
  std::ifstream in(dir + "/replay.pid");
  if (!(in >> r.pid) || r.pid <= 0) r.pid = 0;
  std::ifstream(dir + "/replay.host") >> r.host;
  char here[256] = {};
  ::gethostname(here, sizeof(here) - 1);
  r.here = here;
  return r;
}

std::string live_replay(const std::string& dir) {
  const auto [pid, host, here] = read_replay_pid(dir);
  if (pid == 0) return "";
  if (!host.empty() && host != here)
    return fmt::format("its replay.pid {} is on host {}; if that run is over, remove {}/replay.pid", pid, host, dir);
  if (::kill(pid_t(pid), 0) == 0 || errno == EPERM) return fmt::format("replay.pid {} is alive", pid);
  return "";
}

}  // namespace

std::string live_run_here(const std::string& dir) {
  const auto [pid, host, here] = read_replay_pid(dir);
  if (pid == 0 || (!host.empty() && host != here)) return "";
  if (::kill(pid_t(pid), 0) != 0 && errno != EPERM) return "";
  // A pid reused by another program is not the run.
  std::ifstream cmd(fmt::format("/proc/{}/cmdline", pid), std::ios::binary);
  const std::string line((std::istreambuf_iterator<char>(cmd)), {});
  if (cmd.is_open() && line.find("mpirl") == std::string::npos) return "";
  return fmt::format("its replay rank is running (replay.pid {} on this host, {})", pid, here);
}

namespace {

void write_config(const std::string& dir, const Config& cfg) {
  try {
    write_file_atomic((fs::path(dir) / "config.toml").string(), cfg.resolved_toml);
  } catch (const Error& e) {
    throw ConfigError(e.what());
  }
}

}  // namespace

std::string run_dir_path(const Config& cfg) {
  std::string name = cfg.run.name;
  if (name.empty()) {
    auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    std::tm tm{};
    localtime_r(&now, &tm);
    char stamp[32];
    std::strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
    name = safe_name(fmt::format("{}-{}-{}", cfg.env.id, cfg.learner.algo, stamp));
  }
  return (fs::path(cfg.run.out_dir) / name).string();
}

std::string create_run_dir(const Config& cfg) {
  const std::string dir = run_dir_path(cfg);
  std::error_code ec;
  fs::create_directories(fs::path(dir).parent_path().empty() ? "." : fs::path(dir).parent_path(), ec);
  if (ec) throw ConfigError(fmt::format("cannot create run.out_dir '{}': {}", cfg.run.out_dir, ec.message()));
  if (cfg.run.name.empty()) {
    // A generated name: the first of NAME, NAME-2, NAME-3, ... that mkdir creates (atomic, so two
    // runs started in the same second get different directories).
    for (int k = 1; k < 1000; ++k) {
      const std::string d = k == 1 ? dir : fmt::format("{}-{}", dir, k);
      if (::mkdir(d.c_str(), 0755) == 0) {
        write_config(d, cfg);
        return d;
      }
      if (errno != EEXIST) throw ConfigError(fmt::format("cannot create run directory '{}': {}", d, std::strerror(errno)));
    }
    throw ConfigError(fmt::format("cannot create run directory '{}': 999 runs of that name exist", dir));
  }
  if (exists(dir)) {
    // A run that saved something is never touched. One that failed before saving anything (a
    // model or a checkpoint) is moved aside, so that its name can be used again; its logs stay.
    if (holds_results(dir))
      throw ConfigError(fmt::format("run directory '{}' already exists and holds a model or checkpoints: continue it "
                                    "with --resume {} or choose another run.name (nothing was overwritten)",
                                    dir, dir));
    if (const std::string why = live_replay(dir); !why.empty())
      throw ConfigError(fmt::format("run directory '{}' already exists and its run may still be going on ({}): "
                                    "choose another run.name",
                                    dir, why));
    const std::string aside = fmt::format("{}.failed-{}", dir, ::time(nullptr));
    if (::rename(dir.c_str(), aside.c_str()) != 0)
      throw ConfigError(fmt::format("run directory '{}' already exists (a run that saved no model or checkpoint) and "
                                    "cannot be moved aside: {}",
                                    dir, std::strerror(errno)));
    fmt::print(stderr, "mpirl: {} held no model or checkpoint (a failed start): moved to {}\n", dir, aside);
  }
  if (::mkdir(dir.c_str(), 0755) != 0)
    throw ConfigError(errno == EEXIST
                          ? fmt::format("run directory '{}' already exists: choose another run.name (nothing was "
                                        "overwritten)", dir)
                          : fmt::format("cannot create run directory '{}': {}", dir, std::strerror(errno)));
  write_config(dir, cfg);
  return dir;
}

ReplayPidFile::ReplayPidFile(const std::string& run_dir, int shard) : dir_(shard == 0 ? run_dir : "") {
  if (dir_.empty()) return;
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  write_file_atomic(dir_ + "/replay.host", fmt::format("{}\n", host));  // whose pid it is
  write_file_atomic(dir_ + "/replay.pid", fmt::format("{}\n", ::getpid()));
}

ReplayPidFile::~ReplayPidFile() {
  if (dir_.empty()) return;
  ::unlink((dir_ + "/replay.pid").c_str());
  ::unlink((dir_ + "/replay.host").c_str());
}

MetricsLog::MetricsLog(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error(fmt::format("cannot open metrics file '{}': {}", path, std::strerror(errno)));
  struct stat st {};
  bytes_ = ::fstat(fd_, &st) == 0 ? int64_t(st.st_size) : 0;
}

MetricsLog::~MetricsLog() {
  if (fd_ >= 0) ::close(fd_);
}

void MetricsLog::write(const nlohmann::json& row) {
  const std::string line = row.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + '\n';
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : ENOSPC;
      if (done > 0 && ::ftruncate(fd_, bytes_) != 0) {}  // whole rows only: the part written goes again
      throw Error(fmt::format("cannot write metrics file '{}': {}", path_, std::strerror(err)));
    }
    done += size_t(n);
  }
  bytes_ += int64_t(line.size());
}

void append_json_line(const std::string& path, const nlohmann::json& value) {
  const std::string line = value.dump() + '\n';
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(fmt::format("cannot open '{}': {}", path, std::strerror(errno)));
  const ssize_t w = ::write(fd, line.data(), line.size());
  const int err = errno;
  const bool ok = w == ssize_t(line.size()) && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok) throw Error(fmt::format("cannot append to '{}': {}", path, std::strerror(err)));
}

std::vector<std::string> remove_stale_temporaries(const std::string& dir, const std::string& name,
                                                  const std::string& keep) {
  std::vector<std::string> stale;
  // POSIX, not std::filesystem::directory_iterator (LibTorch exports its own copy of it).
  DIR* d = ::opendir(dir.empty() ? "." : dir.c_str());
  if (!d) return stale;
  while (const dirent* e = ::readdir(d)) {
    const std::string entry = e->d_name;
    const size_t at = entry.rfind(".tmp.");
    if (at == std::string::npos || at == 0 || entry == keep) continue;
    if (!name.empty() && entry.compare(0, at, name) != 0) continue;
    if (entry.size() == at + 5 || entry.find_first_not_of("0123456789", at + 5) != std::string::npos) continue;
    stale.push_back(entry);
  }
  ::closedir(d);
  std::vector<std::string> removed;
  for (auto& entry : stale)
    if (::unlink((fs::path(dir) / entry).c_str()) == 0) removed.push_back(entry);
  return removed;
}

void fsync_path(const std::string& p, bool directory) {
  int fd = ::open(p.c_str(), directory ? O_RDONLY | O_DIRECTORY : O_RDONLY);
  if (fd < 0) throw Error(fmt::format("cannot open '{}' to fsync: {}", p, std::strerror(errno)));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) throw Error(fmt::format("fsync of '{}' failed: {}", p, std::strerror(err)));
}

void write_file_atomic(const std::string& path, const std::string& data) {
  const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(fmt::format("cannot create '{}': {}", tmp, std::strerror(errno)));
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    ssize_t w = ::write(fd, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw Error(fmt::format("cannot write '{}': {}", tmp, std::strerror(err)));
    }
    p += w;
    left -= size_t(w);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw Error(fmt::format("cannot write '{}': {}", tmp, std::strerror(err)));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw Error(fmt::format("cannot rename '{}' to '{}': {}", tmp, path, std::strerror(err)));
  }
  auto parent = fs::path(path).parent_path();
  fsync_path(parent.empty() ? "." : parent.string(), true);
}

void write_json_atomic(const std::string& path, const nlohmann::json& value) {
  write_file_atomic(path, value.dump(2) + "\n");
}

}  // namespace mpirl
