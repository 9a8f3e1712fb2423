#pragma once
// The config schema: every key, its type, range or choices, and where it goes in Config. Private
// to core/ (core/config_load.cpp parses and core/config_check.cpp checks against it; configs/default.toml lists the keys).
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <toml++/toml.h>

#include "core/config.h"

namespace mpirl::detail {

enum class Kind { Int, Float, String, IntList, Bool };

struct Field {
  Kind kind;
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  std::vector<std::string> choices;  // for strings; empty = any
  bool allow_nan = false;
  std::function<void(Config&, const toml::node&)> set;
};

using Schema = std::map<std::string, Field>;

const Schema& schema();

}  // namespace mpirl::detail
