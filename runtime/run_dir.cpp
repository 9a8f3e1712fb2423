#include "runtime/run_dir.h"

#include <chrono>
#include <ctime>
#include <filesystem>

#include "runtime/error.h"

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
  std::ofstream(fs::path(dir) / "config.toml") << cfg.resolved_toml;
}

MetricsLog::MetricsLog(const std::string& path) : out_(path, std::ios::app), path_(path) {
  if (!out_) throw Error(fmt::format("cannot open metrics file '{}'", path));
}

void MetricsLog::write(const nlohmann::json& row) {
  out_ << row.dump() << '\n';
  out_.flush();
}

void write_json_atomic(const std::string& path, const nlohmann::json& value) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream o(tmp);
    o << value.dump(2) << '\n';
    if (!o) throw Error(fmt::format("cannot write '{}'", tmp));
  }
  fs::rename(tmp, path);
}

}  // namespace mpirl
