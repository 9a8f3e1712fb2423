#pragma once
// The table of algorithms (learner.algo): a new one is a file or folder in learner/algorithms/
// and one line in make_algorithm.cpp (and its name in core/config_schema.cpp's learner.algo).
#include <memory>

#include "core/config.h"
#include "learner/algorithms/algorithm.h"

namespace mpirl::learner {

// learner.algo's algorithm (ConfigError naming the key for one that is not in the table).
std::unique_ptr<Algorithm> make_algorithm(const Config& cfg);

}  // namespace mpirl::learner
