#include "core/fault.h"

#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <csignal>
#include <cstring>
#include <string>
#include <thread>

#include "core/clock.h"
#include "core/error.h"
#include "core/test_hooks.h"

namespace mpirl {
namespace {
struct Fault {
  bool armed = false;
  double at = 0;
};

Fault parse() {
  Fault f;
  const char* e = test_hook("MPIRL_TEST_FAULT");
  int rank = -1, me = -2;
  double seconds = 0;
  if (!e || std::sscanf(e, "%d:%lf", &rank, &seconds) != 2) return f;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  f.armed = rank == me;
  f.at = now_seconds() + seconds;
  return f;
}
}  // namespace

void fault_point() {
  static const Fault f = parse();
  if (f.armed && now_seconds() >= f.at) throw Error("injected fault (MPIRL_TEST_FAULT)");
}

void test_update_delay() {
  static const int ms = [] {
    const char* e = test_hook("MPIRL_TEST_UPDATE_DELAY_MS");
    return e ? std::atoi(e) : 0;
  }();
  if (ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

void test_start_delay() {
  const char* e = test_hook("MPIRL_TEST_START_DELAY_MS");
  const int ms = e ? std::atoi(e) : 0;
  if (ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

void kill_point(const char* where) {
  static const std::string spec = [] {
    const char* e = test_hook("MPIRL_TEST_KILL_AT");
    return std::string(e ? e : "");
  }();
  static long reached = 0;
  if (spec.empty()) return;
  const auto colon = spec.rfind(':');
  if (colon == std::string::npos || spec.compare(0, colon, where) != 0) return;
  if (++reached == std::atol(spec.c_str() + colon + 1)) std::raise(SIGKILL);
}

}  // namespace mpirl
