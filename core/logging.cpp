#include "core/logging.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <fstream>
#include <memory>

#include <spdlog/sinks/ansicolor_sink.h>
#include <spdlog/spdlog.h>

#include "core/signals.h"

namespace mpirl {
namespace {
bool g_live = false;

std::string parent_stdout() {
  char buf[PATH_MAX];
  const std::string link = "/proc/" + std::to_string(getppid()) + "/fd/1";
  const ssize_t n = readlink(link.c_str(), buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, size_t(n)) : "";
}

std::string parent_comm() {
  std::string comm;
  std::ifstream("/proc/" + std::to_string(getppid()) + "/comm") >> comm;
  return comm;
}
}  // namespace

bool live_terminal(bool own_tty, const std::string& parent_comm, const std::string& parent_stdout,
                   const std::string& term, bool ci) {
  if (!own_tty || ci || term.empty() || term == "dumb") return false;
  if (is_open_mpi_launcher(parent_comm.c_str()) || parent_comm == "slurmstepd")
    // started by a launcher: live only when it is mpirun itself writing to a terminal
    return is_open_mpi_mpirun(parent_comm.c_str()) &&
           (parent_stdout.rfind("/dev/pts/", 0) == 0 || parent_stdout.rfind("/dev/tty", 0) == 0);
  return true;
}

void setup_logging(int rank, const std::string& role, const std::string& progress) {
  const char* term = std::getenv("TERM");
  if (progress == "bar") g_live = true;
  else if (progress == "lines") g_live = false;
  else g_live = live_terminal(isatty(STDOUT_FILENO) != 0, parent_comm(), parent_stdout(), term ? term : "",
                              std::getenv("CI") != nullptr);
  auto sink = std::make_shared<spdlog::sinks::ansicolor_stdout_sink_mt>(
      g_live ? spdlog::color_mode::automatic : spdlog::color_mode::never);
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("", sink));
  // On a live terminal a line first clears the status bar it would otherwise be glued to.
  spdlog::set_pattern(fmt::format("{}[%H:%M:%S.%e] [rank {} {}] %^%l%$: %v", g_live ? "\r\x1b[K" : "", rank, role));
  spdlog::set_level(rank == 0 || role == "replay" || role == "inference" ? spdlog::level::info : spdlog::level::warn);
  if (const char* lvl = std::getenv("MPIRL_LOG_LEVEL")) spdlog::set_level(spdlog::level::from_str(lvl));
}

bool live_status() { return g_live; }

int terminal_columns() {
  winsize w{};
  const int tty = open("/dev/tty", O_RDONLY | O_NOCTTY | O_CLOEXEC);
  const bool ok = tty >= 0 && ioctl(tty, TIOCGWINSZ, &w) == 0 && w.ws_col > 0;
  if (tty >= 0) close(tty);
  return ok ? int(w.ws_col) : 80;
}

}  // namespace mpirl
