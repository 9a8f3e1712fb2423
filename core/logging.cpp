#include "core/logging.h"

#include <unistd.h>

#include <cstdlib>

#include <spdlog/spdlog.h>

namespace mpirl {

void setup_logging(int rank, const std::string& role) {
  spdlog::set_pattern(fmt::format("[%H:%M:%S.%e] [rank {} {}] %^%l%$: %v", rank, role));
  spdlog::set_level(rank == 0 || role == "replay" ? spdlog::level::info : spdlog::level::warn);
  if (const char* lvl = std::getenv("MPIRL_LOG_LEVEL")) spdlog::set_level(spdlog::level::from_str(lvl));
}

bool live_status() {
  static const bool live = [] {
    const char* force = std::getenv("MPIRL_STATUS");
    if (force) return std::string(force) == "live";
    const char* term = std::getenv("TERM");
    return isatty(STDOUT_FILENO) && term && *term && std::string(term) != "dumb" && !std::getenv("CI");
  }();
  return live;
}

}  // namespace mpirl
