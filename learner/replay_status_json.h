#pragma once
// The replay's counters (comm/protocol.h, ReplayStatus) as JSON: summary.json's "replay" and a
// checkpoint's state.json.
#include <nlohmann/json.hpp>

#include "comm/protocol.h"

namespace mpirl::learner {

nlohmann::json to_json(const ReplayStatus& s);

}  // namespace mpirl::learner
