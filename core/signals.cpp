#include "core/signals.h"

#include <signal.h>

#include <atomic>

namespace mpirl {
namespace {
std::atomic<int> g_signal{0};
extern "C" void on_preempt_signal(int sig) { g_signal.store(sig); }
}  // namespace

void install_preempt_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_preempt_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

int preempt_signal() { return g_signal.load(); }

void request_preempt(int sig) { g_signal.store(sig); }

}  // namespace mpirl
