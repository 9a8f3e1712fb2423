#pragma once
// The learners' side of run checkpoints (core/checkpoint.h; the sequence is in comm/protocol.h).
// Every learner takes part in the collective steps (its counters are gathered; on resume each gets
// its own back); learner 0 writes learner.pt, state.json and config.toml, asks the replay for its
// part and seals the directory once the replay has answered.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/protocol.h"
#include "comm/ranks.h"
#include "core/config.h"
#include "core/run_dir.h"
#include "learner/batch_source.h"
#include "learner/learner_state.h"
#include "learner/run_controller.h"
#include "learner/trainer.h"

namespace mpirl::learner {

// Parameters, optimizer state and RNG states from a learner.pt into `trainer`. The archive is read
// onto the CPU whatever the trainer's device (a GPU learner's RNG states must stay CPU byte
// tensors for set_state; the trainer moves parameters and moments to its device itself). Throws
// Error naming the file when it does not load.
void read_learner_pt(const std::string& path, Trainer& trainer);

// Every learner: parameters, optimizer and RNG from <dir>/learner.pt; returns <dir>/state.json
// with this learner's counts first in `counts` (the others' dropped).
LearnerState load_checkpoint(const std::string& dir, Trainer& trainer, const Comms& comms);

// run.checkpoint_interval_s < 0 ("auto"): periodic checkpoints every kClusterCheckpointIntervalS
// when the ranks span several hosts (a lost node then costs at most that much training), none on
// one host (a crash there loses the machine anyway; the end-of-run checkpoint is still written).
// 300 s: a checkpoint of the default job takes well under a second; one with a 1 GB replay a few
// seconds, about 1% of the interval.
inline constexpr double kClusterCheckpointIntervalS = 300;
double periodic_interval_s(double configured, int hosts);

class Checkpointer {
 public:
  Checkpointer(const Config& cfg, const Comms& comms, const RunStart& start, Trainer& trainer, RunController& run,
               BatchSource& source);
  bool enabled() const { return cfg_.run.checkpoint != "never"; }
  // Learner 0: a periodic checkpoint is due (none in flight; run.checkpoint_interval_s since the
  // last one, or run.checkpoint_every_updates updates after it, counted from start_at()).
  bool due(int64_t version) const;
  void start_at(int64_t version) { last_version_ = version; }
  // Every learner, at an update boundary (`version` updates done): counters gathered; learner 0
  // writes learner.pt and asks the replay. `final`: the replay writes its part at the end.
  void begin(int64_t version, bool final);
  // Learner 0 with a final checkpoint begun: after BatchSource::leave(); every learner calls it
  // (counters gathered again: those drained at the stop included). Returns the sealed directory
  // ("" when the checkpoint failed: logged, and the previous complete one stays).
  std::string finish_final(const ReplayStatus& final_status);
  const std::string& last_sealed() const { return last_sealed_; }

 private:
  struct InFlight {
    std::string tmp;
    LearnerState state;
  };
  std::vector<LearnerCounts> gather_counts();
  void replay_done(InFlight& f, const ReplayStatus& s);  // learner 0: state.json, seal, prune

  const Config& cfg_;
  const Comms& comms_;
  const RunStart& start_;
  Trainer& trainer_;
  RunController& run_;
  BatchSource& source_;
  InFlight periodic_, final_;
  double last_ = 0;
  double interval_ = 0;  // resolved run.checkpoint_interval_s (0: none)
  int64_t last_version_ = 0;
  std::string last_sealed_;
};

}  // namespace mpirl::learner
