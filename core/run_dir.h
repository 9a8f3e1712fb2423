#pragma once
// The run directory runs/<name>/: config.toml, metrics.jsonl, summary.json, model.pt.
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/config.h"

namespace mpirl {

// The directory a run will use (run.out_dir / run.name, or a generated name when run.name = "").
std::string run_dir_path(const Config& cfg);
// Creates it and writes config.toml (atomically); throws ConfigError if it already exists
// (nothing is overwritten) or cannot be created or written.
void create_run_dir(const std::string& dir, const Config& cfg);

class MetricsLog {
 public:
  explicit MetricsLog(const std::string& path);
  void write(const nlohmann::json& row);  // one JSON object per line, flushed

 private:
  std::ofstream out_;
  std::string path_;
};

// Writes `data` to `path` so that a reader sees the old file or the whole new one, and a crash
// never leaves a partial file under the name: PATH.tmp.<pid>, written, checked, fsync'ed, renamed,
// and the directory fsync'ed. Throws mpirl::Error naming the path and the OS error.
void write_file_atomic(const std::string& path, const std::string& data);
void write_json_atomic(const std::string& path, const nlohmann::json& value);
// fsyncs a file or directory; throws mpirl::Error naming it.
void fsync_path(const std::string& path, bool directory);

}  // namespace mpirl
