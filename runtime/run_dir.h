#pragma once
// The run directory runs/<name>/: config.toml, metrics.jsonl, summary.json, model.pt.
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "runtime/config.h"

namespace mpirl {

// The directory a run will use (run.out_dir / run.name, or a generated name when run.name = "").
std::string run_dir_path(const Config& cfg);
// Creates it and writes config.toml; throws ConfigError if it already exists (nothing is
// overwritten) or cannot be created.
void create_run_dir(const std::string& dir, const Config& cfg);

class MetricsLog {
 public:
  explicit MetricsLog(const std::string& path);
  void write(const nlohmann::json& row);  // one JSON object per line, flushed

 private:
  std::ofstream out_;
  std::string path_;
};

// Writes `value` to path atomically (temporary file + rename).
void write_json_atomic(const std::string& path, const nlohmann::json& value);

}  // namespace mpirl
