// libFuzzer target: any bytes as a checkpoint's state files, read the way a resume reads them.
// The first byte picks the file: even, learner 0's state.json (learner_state_from_json); odd, the
// replay's replay_state.json (replay_state_from_json). The rest is the file. Each read returns or
// throws mpirl::Error (or a JSON parse error), never crashes and never converts a number with
// undefined behaviour (UBSan: a float of 1e300 read as an integer).
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "buffer/replay_checkpoint.h"
#include "core/error.h"
#include "learner/learner_state.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const bool replay = data[0] & 1;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(data + 1, data + size);
  } catch (const nlohmann::json::exception&) {
    return 0;
  }
  try {
    if (replay) {
      auto st = mpirl::buffer::replay_state_from_json(j, "replay_state.json");
      (void)st;
    } else {
      auto s = mpirl::learner::learner_state_from_json(j, "state.json");
      (void)s;
    }
  } catch (const mpirl::Error&) {
  }
  return 0;
}
