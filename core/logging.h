#pragma once
// Log format and how learner 0 shows progress (run.progress).
#include <string>

namespace mpirl {

// Output is a live terminal only when a person watches it: the process's own stdout is a
// terminal and, under Open MPI (which gives every local rank a pseudo-terminal even when mpirun's
// output goes to a Slurm .out file), mpirun's stdout is one too; a rank started by orted or
// slurmstepd never is. TERM must name a real terminal and CI must be unset.
// `progress`: run.progress -- "auto" (that detection), "bar" (live even when piped) or "lines".
// Sets: "[time] [rank R ROLE] level: message", info on rank 0, the replay and inference ranks, warnings elsewhere
// (MPIRL_LOG_LEVEL overrides); colours only on a live terminal, where every line also starts by
// clearing the status bar so no rank's line is glued to it.
void setup_logging(int rank, const std::string& role, const std::string& progress = "auto");

// Whether learner 0 draws a status bar (true) or prints a timestamped line per row (false).
bool live_status();
// The terminal's width for the bar (80 when unknown).
int terminal_columns();

// The detection behind "auto", exposed for tests: `own_tty` = stdout is a terminal,
// `parent_comm` = the parent's process name, `parent_stdout` = where the parent's stdout points
// (readlink of /proc/PPID/fd/1), `term` = $TERM ("" when unset), `ci` = $CI is set.
bool live_terminal(bool own_tty, const std::string& parent_comm, const std::string& parent_stdout,
                   const std::string& term, bool ci);

}  // namespace mpirl
