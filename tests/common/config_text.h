#pragma once
// Config text as an older mpirl wrote it, for the tests of loading and resuming old runs.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

namespace mpirl::testing {

// `toml` (a resolved config) with `key` (section.name) removed: the config.toml of a run made
// before the key existed.
inline std::string without_key(const std::string& toml, const std::string& key) {
  const std::string section = "[" + key.substr(0, key.find('.')) + "]", name = key.substr(key.find('.') + 1) + " = ";
  std::istringstream in(toml);
  std::ostringstream out;
  std::string line, current;
  bool removed = false;
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] == '[') current = line;
    if (!removed && current == section && line.rfind(name, 0) == 0) {
      removed = true;
      continue;
    }
    out << line << "\n";
  }
  EXPECT_TRUE(removed) << key;
  return out.str();
}

}  // namespace mpirl::testing
