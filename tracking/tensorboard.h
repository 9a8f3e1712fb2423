#pragma once
// TensorBoard event files, written live: `tensorboard --logdir runs/` shows every run directory
// as one run while it trains. Each file is a TFRecord stream (tracking/record_io.h) of `Event`
// protobuf messages with TensorBoard's field numbers (tracking/proto/tensorboard.proto); the
// first record says file_version "brain.Event:2". Every write is one event, flushed at once, so a
// reader never waits for a buffer. No protobuf type appears in this header.
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mpirl::tracking {

// The file name TensorBoard looks for: events.out.tfevents.<unix seconds>.<hostname>.<pid>.<n>,
// n counting the writers this process opened.
std::string event_file_name();

class TensorBoardWriter {
 public:
  // Opens a new event file in `dir` (created if missing) and writes the file_version record.
  // Throws mpirl::Error naming the path when it cannot.
  explicit TensorBoardWriter(const std::string& dir);
  const std::string& path() const { return path_; }

  // One scalar (simple_value) per number in `row`, tagged prefix + key; nested objects become
  // "key/sub" tags. Strings, booleans, nulls, arrays and non-finite numbers are skipped. All of
  // them go into one event at `step`. Returns how many scalars were written.
  int write_scalars(const nlohmann::json& row, int64_t step, const std::string& prefix = "");
  // A text summary (the text plugin's rank-0 DT_STRING tensor), rendered as Markdown.
  void write_text(const std::string& tag, const std::string& markdown, int64_t step);
  // A histogram of `values` in `buckets` equal-width buckets from their min to their max (one
  // bucket when all are equal); non-finite values are left out, and nothing is written for none.
  void write_histogram(const std::string& tag, const std::vector<double>& values, int64_t step, int buckets = 30);
  // A SessionLog START event at `step`: TensorBoard's readers (purge_orphaned_data, on by default)
  // then drop what earlier files of the directory hold at steps >= `step`. A resumed run writes
  // one, so that the points its predecessor logged after the checkpoint disappear.
  void write_session_start(int64_t step);

 private:
  void write_event(const std::string& serialized_event);
  std::string path_;
  std::ofstream out_;
};

}  // namespace mpirl::tracking
