// Stop signals and cluster placement: a SIGTERM from the Open MPI launcher (which tears the job
// down when a rank or node is lost) is never taken for a preemption; real signals reach the
// handler with their sender; the placement line and the periodic-checkpoint default on clusters.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "comm/ranks.h"
#include "core/signals.h"
#include "learner/learner_checkpoint.h"

using namespace mpirl;

namespace {
// Runs `body` in a forked child (the signal flags are process-wide and never cleared) and returns
// its exit status: 0 when every expectation in it held.
template <class F>
int in_child(F body) {
  const pid_t pid = fork();
  if (pid == 0) _exit(body() ? 0 : 1);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}
}  // namespace

TEST(StopSignals, OpenMpiLaunchersByName) {
  for (const char* n : {"orted", "mpirun", "mpiexec", "orterun", "prted", "prterun"}) EXPECT_TRUE(is_open_mpi_launcher(n)) << n;
  for (const char* n : {"slurmstepd", "bash", "srun", "python3", "", "orted2"}) EXPECT_FALSE(is_open_mpi_launcher(n)) << n;
}

TEST(StopSignals, ReasonsAndPrecedence) {
  EXPECT_STREQ(stop_reason_of(StopSignal::None), "");
  // A preemption alone.
  EXPECT_EQ(in_child([] {
              if (stop_signal() != StopSignal::None) return false;
              request_stop(SIGUSR1);
              return stop_signal() == StopSignal::Preempt && std::string(stop_reason_of(stop_signal())) == "preempted" &&
                     !launcher_ending_job() && stop_signal_number() == SIGUSR1;
            }),
            0);
  // SIGTERM from someone else (Slurm's slurmstepd, `kill`): a preemption, not an abort.
  EXPECT_EQ(in_child([] {
              request_stop(SIGTERM, false);
              return stop_signal() == StopSignal::Preempt && !launcher_ending_job();
            }),
            0);
  // SIGTERM from the launcher: an abort, even after a preemption was asked for.
  EXPECT_EQ(in_child([] {
              request_stop(SIGUSR1);
              request_stop(SIGTERM, true);
              return stop_signal() == StopSignal::LauncherAbort && launcher_ending_job() &&
                     std::string(stop_reason_of(stop_signal())) == "aborted";
            }),
            0);
  // Ctrl-C on mpirun: SIGINT, then the launcher's SIGTERM: reported as interrupted, left at once.
  EXPECT_EQ(in_child([] {
              request_stop(SIGINT);
              request_stop(SIGTERM, true);
              return stop_signal() == StopSignal::Interrupt && launcher_ending_job() &&
                     std::string(stop_reason_of(stop_signal())) == "interrupted";
            }),
            0);
}

TEST(StopSignals, RealSignalsClassifiedBySender) {
  // The child installs the handlers; its parent (this test binary) is no Open MPI launcher, so a
  // SIGTERM from the parent is a preemption. A grandchild whose parent is renamed "orted" sees
  // the same SIGTERM from its parent as the launcher ending the job.
  EXPECT_EQ(in_child([] {
              install_stop_handlers();
              kill(getpid(), SIGUSR1);
              return stop_signal() == StopSignal::Preempt;
            }),
            0);
  const pid_t child = fork();
  if (child == 0) {  // plays orted: renames itself, starts the "rank", sends it SIGTERM once it is ready
    prctl(PR_SET_NAME, "orted", 0, 0, 0);
    int ready[2];
    if (pipe(ready) != 0) _exit(2);
    const pid_t rank = fork();
    if (rank == 0) {
      install_stop_handlers();
      char c = 1;
      if (write(ready[1], &c, 1) != 1) _exit(3);
      for (int i = 0; i < 5000 && stop_signal() == StopSignal::None; ++i) usleep(1000);
      _exit(stop_signal() == StopSignal::LauncherAbort ? 0 : 1);
    }
    char c;
    if (read(ready[0], &c, 1) != 1) _exit(4);
    kill(rank, SIGTERM);
    int st = 0;
    waitpid(rank, &st, 0);
    _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 5);
  }
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "a SIGTERM from a parent named orted is the launcher ending the job";
}

TEST(Placement, OneLinePerHostWithRankRuns) {
  Comms c;
  c.layout = Layout{6, 1};
  c.hosts = {"n1", "n1", "n2", "n2", "n3", "n3"};
  EXPECT_EQ(c.num_hosts(), 3);
  EXPECT_EQ(c.placement(), "n1: learner 0, replay 1 | n2: actors 2-3 | n3: actors 4-5");
  c.layout = Layout{6, 2};
  c.hosts = {"n1", "n2", "n1", "n3", "n2", "n3"};
  EXPECT_EQ(c.placement(), "n1: learner 0, replay 2 | n2: learner 1, actor 4 | n3: actor 3, actor 5");
  c.hosts = {"a", "a", "a", "a", "a", "a"};
  EXPECT_EQ(c.num_hosts(), 1);
  EXPECT_EQ(c.placement(), "a: learners 0-1, replay 2, actors 3-5");
}

TEST(Placement, PeriodicCheckpointsOnByDefaultOnlyAcrossHosts) {
  EXPECT_EQ(learner::periodic_interval_s(-1, 1), 0);
  EXPECT_EQ(learner::periodic_interval_s(-1, 3), learner::kClusterCheckpointIntervalS);
  EXPECT_EQ(learner::periodic_interval_s(0, 3), 0);   // off when asked, even on a cluster
  EXPECT_EQ(learner::periodic_interval_s(42, 1), 42);
}
