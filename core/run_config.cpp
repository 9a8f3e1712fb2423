// A run's or checkpoint's config.toml, read for eval and export (core/config.h).
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/config.h"
#include "core/error.h"

namespace mpirl {

Config load_run_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError(fmt::format("cannot read '{}'", path));
  std::stringstream ss;
  ss << in.rdbuf();
  std::vector<std::string> defaulted;
  try {
    Config c = parse_resolved_config(ss.str(), &defaulted);
    if (!defaulted.empty())
      fmt::print(stderr, "{} predates {} config key(s); using their defaults: {}\n", path, defaulted.size(),
                 fmt::join(defaulted, ", "));
    return c;
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("{}: {}", path, e.what()));
  }
}

}  // namespace mpirl
