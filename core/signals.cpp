#include "core/signals.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <string>

namespace mpirl {
namespace {
// One flag per kind (set from the handler, never cleared) and the last signal's number.
std::atomic<bool> g_preempt{false}, g_interrupt{false}, g_abort{false};
std::atomic<int> g_number{0};
std::atomic<bool> g_parent_is_launcher{false}, g_joined_group{false}, g_leave_at_once{false};

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
  if (g_abort.load() && g_leave_at_once.load()) _exit(kExitAborted);  // async-signal-safe
}

bool named(const char* comm, std::initializer_list<const char*> names) {
  // The name as exec'd: Debian's alternatives also install mpirun.openmpi, mpiexec.openmpi.
  for (const char* name : names) {
    const size_t n = std::strlen(name);
    if (std::strncmp(comm, name, n) == 0 && (comm[n] == '\0' || comm[n] == '.')) return true;
  }
  return false;
}

// mpirun (pid `parent`) is the foreground job of this session's terminal: join its process group,
// so that the terminal's SIGINT (Ctrl-C) reaches this rank as well as mpirun.
bool join_foreground_launcher(pid_t parent) {
  const pid_t group = getpgid(parent);
  if (group <= 0 || group == getpgrp()) return false;
  const int tty = open("/dev/tty", O_RDONLY | O_NOCTTY | O_CLOEXEC);  // fails without a terminal (batch jobs)
  if (tty < 0) return false;
  const pid_t foreground = tcgetpgrp(tty);
  close(tty);
  return foreground == group && setpgid(0, group) == 0;
}
}  // namespace

bool is_open_mpi_launcher(const char* comm) {
  return named(comm, {"orted", "mpirun", "mpiexec", "orterun", "prted", "prterun"});
}
bool is_open_mpi_mpirun(const char* comm) { return named(comm, {"mpirun", "mpiexec", "orterun", "prterun"}); }

bool joined_launcher_terminal_group() { return g_joined_group.load(); }

void leave_at_once_on_launcher_abort() {
  g_leave_at_once.store(true);
  if (g_abort.load()) _exit(kExitAborted);  // the launcher's SIGTERM came first
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
  // after the handlers: a Ctrl-C from now on is recorded, never the default action
  if (is_open_mpi_mpirun(parent.c_str())) g_joined_group.store(join_foreground_launcher(getppid()));
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
