#pragma once
// state.json, learner 0's file of a checkpoint (learner/learner_checkpoint.h): its contents and
// their JSON. No LibTorch: the hardening build fuzzes the reader (tests/fuzz/fuzz_state.cpp).
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/protocol.h"
#include "learner/learner_counts.h"

namespace mpirl::learner {

// What state.json holds (learner 0 writes it; every learner reads its own counts from it).
struct LearnerState {
  int64_t version = 0;                // updates so far = the policy version of learner.pt
  int64_t segment = 0;                // of the run that wrote it (0 = not resumed)
  double elapsed_s = 0;               // run time so far (summed over segments)
  int64_t metrics_bytes = 0;          // metrics.jsonl's length when the learner state was taken (-1: all of it)
  std::vector<LearnerCounts> counts;  // per learner
  RunWindow window;                   // the recent-returns window and episode count
  ReplayStatus replay;                // the replay's status at its part of the checkpoint
};
nlohmann::json to_json(const LearnerState& s);
// Throws Error naming `where` and the missing or malformed field.
LearnerState learner_state_from_json(const nlohmann::json& j, const std::string& where);

}  // namespace mpirl::learner
