// When learner 0 draws a live status bar and when it prints plain lines (run.progress = "auto"):
// only for a person at a terminal, never in a Slurm .out file or a pipe, although Open MPI gives
// every rank a pseudo-terminal of its own.
#include <gtest/gtest.h>

#include "core/logging.h"

using mpirl::live_terminal;

TEST(Logging, LiveOnlyWhenMpirunWritesToATerminal) {
  // mpirun at a terminal: its stdout is the terminal's pts
  EXPECT_TRUE(live_terminal(true, "mpirun", "/dev/pts/3", "xterm-256color", false));
  EXPECT_TRUE(live_terminal(true, "mpiexec.openmpi", "/dev/pts/0", "screen", false));
  // sbatch: mpirun writes to the job's .out file (the rank still has a pty of mpirun's)
  EXPECT_FALSE(live_terminal(true, "mpirun", "/home/u/slurm-42.out", "xterm-256color", false));
  // piped (`mpirun ... | tee log`) or redirected to /dev/null
  EXPECT_FALSE(live_terminal(true, "mpirun", "pipe:[123456]", "xterm", false));
  EXPECT_FALSE(live_terminal(true, "mpirun", "/dev/null", "xterm", false));
  // a rank on another node (orted) or under srun (slurmstepd): nobody watches its terminal
  EXPECT_FALSE(live_terminal(true, "orted", "/dev/pts/1", "xterm", false));
  EXPECT_FALSE(live_terminal(true, "slurmstepd", "/dev/pts/1", "xterm", false));
}

TEST(Logging, SingleProcessFollowsItsOwnStdout) {
  EXPECT_TRUE(live_terminal(true, "bash", "/dev/pts/2", "xterm", false));
  EXPECT_FALSE(live_terminal(false, "bash", "/dev/pts/2", "xterm", false));  // ./mpirl ... > log
  EXPECT_FALSE(live_terminal(true, "bash", "/dev/pts/2", "dumb", false));
  EXPECT_FALSE(live_terminal(true, "bash", "/dev/pts/2", "", false));  // TERM unset
  EXPECT_FALSE(live_terminal(true, "mpirun", "/dev/pts/2", "xterm", true));  // CI is set
}
