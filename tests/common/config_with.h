#pragma once
// A config from the defaults and `--set`-style overrides ("section.key=value"), for unit tests.
#include <string>
#include <vector>

#include "core/config.h"

namespace mpirl::testing {

inline Config cfg_with(std::vector<std::string> sets) { return load_config("", sets); }

}  // namespace mpirl::testing
