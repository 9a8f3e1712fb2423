#pragma once
// When the replay rank dumps its buffer: every replay.dump_interval_s, on SIGUSR2 (pid in
// <run>/replay.pid) and at the end of the run (replay.dump = "end"). A failed dump (unwritable
// path, disk full) is logged and counted in the DumpStatus the learners receive; it never ends
// the run, and a dump that already completed stays in place. Periodic and SIGUSR2 dumps run on the
// replay's I/O thread (buffer/io_job.h): due() says when, write() runs there, record() after it.
#include <string>

#include "buffer/hdf5_dump.h"
#include "buffer/replay_buffer.h"
#include "comm/protocol.h"
#include "core/config.h"

namespace mpirl::buffer {

class DumpScheduler {
 public:
  DumpScheduler(const Config& cfg, const std::string& run_dir, int shard = 0);  // shard: of roles.replays
  // Why a dump is due now: "SIGUSR2" (arrived since the last call) or "interval" (periodic dumps
  // stop once `stopping`); nullptr when none is. The interval counts from the end of the last
  // dump: one slower than the interval must not keep the replay dumping (and not inserting).
  const char* due(bool stopping);
  struct Outcome {
    bool ok = false;
    DumpInfo info;
    std::string error;
  };
  // Writes a dump of `snap` to the run's dump path; never throws. Touches no member: safe on the
  // I/O thread while the owner calls status().
  Outcome write(const DumpSnapshot& snap, const DumpOptions& opts) const;
  // The outcome of write(), logged and counted in status().
  void record(const Outcome& o, const char* why);
  // The end-of-run dump (if configured). `same_as`: a dump of this very buffer state just written
  // (the final checkpoint's replay.h5), linked instead of written again when it can be. Returns
  // false if it failed.
  bool finish(const ReplayBuffer& rb, const DumpInfo* same_as = nullptr);
  const DumpStatus& status() const { return status_; }

 private:
  const Config& cfg_;
  std::string path_;
  DumpStatus status_;
  double last_ = 0;
};

}  // namespace mpirl::buffer
