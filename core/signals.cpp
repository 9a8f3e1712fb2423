#include "core/signals.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <string>

namespace mpirl {
namespace {
// One flag per kind (set from the handler, never cleared) and the last signal's number.
std::atomic<bool> g_preempt{false}, g_interrupt{false}, g_abort{false};
std::atomic<int> g_number{0};
std::atomic<bool> g_parent_is_launcher{false};

void record(int sig, bool from_launcher) {
  g_number.store(sig);
  if (sig == SIGINT) g_interrupt.store(true);
  else if (sig == SIGTERM && from_launcher) g_abort.store(true);
  else g_preempt.store(true);
}

extern "C" void on_stop_signal(int sig, siginfo_t* info, void*) {
  // getppid() is async-signal-safe; si_pid is the sender as seen from this PID namespace.
  const bool from_parent = info != nullptr && info->si_code == SI_USER && info->si_pid == getppid();
  record(sig, from_parent && g_parent_is_launcher.load());
}
}  // namespace

bool is_open_mpi_launcher(const char* comm) {
  for (const char* name : {"orted", "mpirun", "mpiexec", "orterun", "prted", "prterun"})
    if (std::strcmp(comm, name) == 0) return true;
  return false;
}

void install_stop_handlers() {
  std::string parent;
  std::ifstream("/proc/" + std::to_string(getppid()) + "/comm") >> parent;
  g_parent_is_launcher.store(is_open_mpi_launcher(parent.c_str()));
  struct sigaction sa {};
  sa.sa_sigaction = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART | SA_SIGINFO;
  sigaction(SIGUSR1, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
}

StopSignal stop_signal() {
  if (g_interrupt.load()) return StopSignal::Interrupt;
  if (g_abort.load()) return StopSignal::LauncherAbort;
  if (g_preempt.load()) return StopSignal::Preempt;
  return StopSignal::None;
}

const char* stop_reason_of(StopSignal s) {
  switch (s) {
    case StopSignal::Preempt: return "preempted";
    case StopSignal::Interrupt: return "interrupted";
    case StopSignal::LauncherAbort: return "aborted";
    case StopSignal::None: break;
  }
  return "";
}

bool launcher_ending_job() { return g_abort.load(); }

int stop_signal_number() { return g_number.load(); }

void request_stop(int sig, bool from_launcher) { record(sig, from_launcher); }

}  // namespace mpirl
