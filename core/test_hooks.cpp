#include "core/test_hooks.h"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>

#include <spdlog/spdlog.h>

#include "core/error.h"

extern char** environ;

namespace mpirl {

const char* test_hook(const char* name) {
  const char* v = std::getenv(name);
  if (!v) return nullptr;
  static std::mutex m;
  static std::set<std::string> announced;
  std::lock_guard<std::mutex> lock(m);
  if (announced.insert(name).second)
    spdlog::warn("test hook {}={} is set on {}: it changes what mpirl does, for tests only", name, v, where());
  return v;
}

std::vector<std::string> test_hooks_set() {
  std::vector<std::string> out;
  for (char** e = environ; e && *e; ++e)
    if (std::strncmp(*e, "MPIRL_TEST_", 11) == 0 || std::strncmp(*e, "MPIRL_FAKE_", 11) == 0) out.emplace_back(*e);
  return out;
}

}  // namespace mpirl
