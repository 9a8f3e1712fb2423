#pragma once
// When the replay rank dumps its buffer: every replay.dump_interval_s, on SIGUSR2 (pid in
// <run>/replay.pid) and at the end of the run (replay.dump = "end"). A failed dump (unwritable
// path, disk full) is logged and counted in the DumpStatus the learners receive; it never ends
// the run, and a dump that already completed stays in place.
#include <string>

#include "buffer/hdf5_dump.h"
#include "buffer/replay_buffer.h"
#include "comm/protocol.h"
#include "core/config.h"

namespace mpirl::buffer {

class DumpScheduler {
 public:
  DumpScheduler(const Config& cfg, const std::string& run_dir);
  // Dumps if SIGUSR2 arrived or the interval has passed (periodic dumps stop once `stopping`).
  bool poll(const ReplayBuffer& rb, bool stopping);
  // The end-of-run dump (if configured). `same_as`: a dump of this very buffer state just written
  // (the final checkpoint's replay.h5), linked instead of written again when it can be. Returns
  // false if it failed.
  bool finish(const ReplayBuffer& rb, const DumpInfo* same_as = nullptr);
  const DumpStatus& status() const { return status_; }

 private:
  bool dump(const ReplayBuffer& rb, const char* why);
  const Config& cfg_;
  std::string path_;
  DumpStatus status_;
  double last_ = 0;
};

}  // namespace mpirl::buffer
