#pragma once
// Errors and checks used by every module.
//  - mpirl::Error: bad input (config, files, messages). The message names the key/file/rank and
//    what was expected. Caught at the role boundary, logged with rank and host, then MPI_Abort.
//  - ConfigError: a subclass for configuration problems; the CLI turns it into exit code 2.
//  - MPIRL_CHECK: internal invariants.
//  - MPIRL_MPI: wraps every MPI call; a failure reports rank, host and file:line.
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace mpirl {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class ConfigError : public Error {
 public:
  using Error::Error;
};

// "rank 3 @ host" for messages; filled in once MPI is initialised.
std::string where();

[[noreturn]] void fail_check(const char* expr, const char* file, int line, const std::string& msg);
[[noreturn]] void fail_mpi(int code, const char* call, const char* file, int line);

}  // namespace mpirl

#define MPIRL_CHECK(cond, ...)                                                                 \
  do {                                                                                       \
    if (!(cond)) ::mpirl::fail_check(#cond, __FILE__, __LINE__, ::fmt::format(__VA_ARGS__)); \
  } while (0)

#define MPIRL_MPI(call)                                                      \
  do {                                                                       \
    int mpirl_mpi_rc_ = (call);                                              \
    if (mpirl_mpi_rc_ != 0) ::mpirl::fail_mpi(mpirl_mpi_rc_, #call, __FILE__, __LINE__); \
  } while (0)
