#include "core/run_dir.h"

#include <chrono>
#include <ctime>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace mpirl {
namespace fs = std::filesystem;

std::string run_dir_path(const Config& cfg) {
  std::string name = cfg.run.name;
  if (name.empty()) {
    auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    std::tm tm{};
    localtime_r(&now, &tm);
    char stamp[32];
    std::strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
    name = fmt::format("{}-{}-{}", cfg.env.id, cfg.learner.algo, stamp);
  }
  return (fs::path(cfg.run.out_dir) / name).string();
}

void create_run_dir(const std::string& dir, const Config& cfg) {
  std::error_code ec;
  if (fs::exists(dir, ec))
    throw ConfigError(fmt::format("run directory '{}' already exists: choose another run.name (nothing was overwritten)", dir));
  fs::create_directories(dir, ec);
  if (ec) throw ConfigError(fmt::format("cannot create run directory '{}': {}", dir, ec.message()));
  try {
    write_file_atomic((fs::path(dir) / "config.toml").string(), cfg.resolved_toml);
  } catch (const Error& e) {
    throw ConfigError(e.what());
  }
}

MetricsLog::MetricsLog(const std::string& path) : out_(path, std::ios::app), path_(path) {
  if (!out_) throw Error(fmt::format("cannot open metrics file '{}'", path));
  out_.seekp(0, std::ios::end);
  bytes_ = int64_t(out_.tellp());
}

void MetricsLog::write(const nlohmann::json& row) {
  const std::string line = row.dump() + '\n';
  out_ << line;
  out_.flush();
  bytes_ += int64_t(line.size());
  if (!out_) throw Error(fmt::format("cannot write metrics file '{}'", path_));
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
