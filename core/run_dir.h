#pragma once
// The run directory runs/<name>/: config.toml, metrics.jsonl, summary.json, model.pt.
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/config.h"

namespace mpirl {

// How this run starts: decided by rank 0 and the same on every rank.
struct RunStart {
  std::string run_dir;
  std::string resume_from;  // a complete checkpoint (core/checkpoint.h) to continue from; "" = fresh
  int64_t segment = 0;      // 0 for a fresh run; each resume adds one (actors mix it into their seeds)
};

// The directory a run will use: run.out_dir / run.name, or, when run.name = "", a generated
// <env>-<algo>-<date>-<time> with every character other than [A-Za-z0-9._-] made '_' (no colons).
std::string run_dir_path(const Config& cfg);
// Creates the run directory and writes config.toml (atomically); returns its path. A generated
// name that exists gets a suffix (-2, -3, ...). A named directory that exists is refused when it
// holds a model or checkpoints or its run is alive (replay.pid); otherwise (a run that failed
// before saving anything) it is moved to <dir>.failed-<unix time> and the name reused. Throws
// ConfigError naming the directory when it cannot be created or written.
std::string create_run_dir(const Config& cfg);

// Why the run in `dir` is still going on, from here: its replay.pid names a live mpirl process on
// this host (replay.host). "" when it is not, or when that process is on another host (a run
// whose node was lost leaves its replay.pid behind, and a requeued job must resume it).
std::string live_run_here(const std::string& dir);

// <run>/replay.pid (this process's pid, for `kill -USR2 $(cat replay.pid)`) and replay.host (its
// host), written by the replay rank at start and removed by the destructor, at an error's exit
// too: a later kill never reaches an unrelated process, and create_run_dir tells a live run by them.
class ReplayPidFile {
 public:
  // Replay shards: shard 0 writes them (shard > 0: nothing; a SIGUSR2 dump then dumps shard 0).
  explicit ReplayPidFile(const std::string& run_dir, int shard = 0);
  ~ReplayPidFile();
  ReplayPidFile(const ReplayPidFile&) = delete;
  ReplayPidFile& operator=(const ReplayPidFile&) = delete;

 private:
  std::string dir_;
};

class MetricsLog {
 public:
  explicit MetricsLog(const std::string& path);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;
  // One JSON object per line. A row that cannot be written whole (a full disk) is cut off again,
  // so the file stays whole rows; then Error naming the file and the reason.
  void write(const nlohmann::json& row);
  int64_t bytes() const { return bytes_; }  // the file's length after the last row written

 private:
  int fd_ = -1;
  std::string path_;
  int64_t bytes_ = 0;
};

// Writes `data` to `path` so that a reader sees the old file or the whole new one, and a crash
// never leaves a partial file under the name: PATH.tmp.<pid>, written, checked, fsync'ed, renamed,
// and the directory fsync'ed. Throws mpirl::Error naming the path and the OS error.
void write_file_atomic(const std::string& path, const std::string& data);
void write_json_atomic(const std::string& path, const nlohmann::json& value);
// Appends one JSON line with a single O_APPEND write (lines of several ranks never interleave)
// and fsyncs it. Throws mpirl::Error naming the path.
void append_json_line(const std::string& path, const nlohmann::json& value);
// Removes the files a write killed mid-way leaves in `dir` (write_file_atomic's and the replay
// dumps' NAME.tmp.<digits>): every such file, or only those of NAME == `name` when given, never
// `keep` (a name in `dir`). Best effort (a file that cannot be removed stays); returns the names
// removed. Only for a directory no live process is writing such a file into under another pid.
std::vector<std::string> remove_stale_temporaries(const std::string& dir, const std::string& name = "",
                                                  const std::string& keep = "");
// fsyncs a file or directory; throws mpirl::Error naming it.
void fsync_path(const std::string& path, bool directory);

}  // namespace mpirl
