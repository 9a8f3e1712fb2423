#include "core/error.h"

#include <mpi.h>
#include <unistd.h>

namespace mpirl {

std::string where() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  if (!initialized || finalized) return fmt::format("pid {} @ {}", getpid(), host);
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return fmt::format("rank {} @ {}", rank, host);
}

void fail_check(const char* expr, const char* file, int line, const std::string& msg) {
  throw Error(fmt::format("check failed: {} ({}:{}, {}): {}", expr, file, line, where(), msg));
}

void fail_mpi(int code, const char* call, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  MPI_Error_string(code, text, &len);
  throw Error(fmt::format("MPI call failed: {} -> {} ({}:{}, {})", call, text, file, line, where()));
}

}  // namespace mpirl
