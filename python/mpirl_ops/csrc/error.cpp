// core/error.h's functions for libmpirl_ops.so without MPI: a PyTorch process that imports the
// operator has no MPI to ask for a rank, and should not load libmpi for a check message.
#include <unistd.h>

#include "core/error.h"

namespace mpirl {

std::string where() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return fmt::format("pid {} @ {}", getpid(), host);
}

void fail_check(const char* expr, const char* file, int line, const std::string& msg) {
  throw Error(fmt::format("check failed: {} ({}:{}, {}): {}", expr, file, line, where(), msg));
}

void fail_mpi(int code, const char* call, const char* file, int line) {
  throw Error(fmt::format("MPI call failed: {} -> code {} ({}:{}, {})", call, code, file, line, where()));
}

}  // namespace mpirl
