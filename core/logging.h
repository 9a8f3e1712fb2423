#pragma once
// Log format and the status line's mode.
#include <string>

namespace mpirl {

// "[time] [rank R ROLE] level: message"; info on rank 0 and the replay, warnings elsewhere;
// MPIRL_LOG_LEVEL overrides.
void setup_logging(int rank, const std::string& role);

// A live status bar only for a person at a terminal: Open MPI gives ranks a pty even when
// mpirun's own output goes to a file, so a real TERM is required too. MPIRL_STATUS=plain|live
// overrides.
bool live_status();

}  // namespace mpirl
