#pragma once
// What each learner counts, and the recent-returns window: kept in state.json, gathered at every
// checkpoint, summed for the summary. No LibTorch (the hardening build fuzzes state.json's reader).
#include <array>
#include <cstdint>
#include <vector>

namespace mpirl::learner {

// What one learner counted itself (summed over learners for the summary).
struct LearnerCounts {
  int64_t received = 0;         // sequences received from the replay (those drained at the stop too)
  int64_t trained = 0;          // sequences trained on
  int64_t too_old = 0;          // dropped: policy lag above learner.max_policy_lag
  int64_t lag_unknown = 0;      // items from a previous run (restored)
  int64_t restored_sampled = 0; // items trained on that were restored from a dump (by insertion number)
  int64_t updates = 0, optimizer_steps = 0;
  int64_t truncations = 0;      // truncated steps in the batches trained on (from the flags)
  int64_t bootstraps = 0;       // truncation bootstraps valued with current parameters (boot_step)
};

// The recent-returns window (the last 100 finished episodes, oldest first) and the episode count.
struct RunWindow {
  std::vector<double> returns, lengths;
  int64_t episodes = 0;
};

// The counts as one array (for MPI reductions and state.json) and back, in declaration order.
inline constexpr int kLearnerCountFields = 9;
inline std::array<int64_t, kLearnerCountFields> to_array(const LearnerCounts& c) {
  return {c.received, c.trained,         c.too_old,     c.lag_unknown, c.restored_sampled,
          c.updates,  c.optimizer_steps, c.truncations, c.bootstraps};
}
inline LearnerCounts counts_from(const int64_t* v) { return {v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8]}; }

}  // namespace mpirl::learner
