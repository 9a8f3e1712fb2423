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
  for (const char* n : {"orted", "mpirun", "mpiexec", "orterun", "prted", "prterun", "mpirun.openmpi", "mpiexec.openmpi"})
    EXPECT_TRUE(is_open_mpi_launcher(n)) << n;
  for (const char* n : {"slurmstepd", "bash", "srun", "python3", "", "orted2", "mpirunner", "mpi"})
    EXPECT_FALSE(is_open_mpi_launcher(n)) << n;
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
  // SIGINT reaching the ranks (srun, or a terminal's process group), then the launcher's SIGTERM:
  // reported as interrupted, and left at once.
  EXPECT_EQ(in_child([] {
              request_stop(SIGINT);
              request_stop(SIGTERM, true);
              return stop_signal() == StopSignal::Interrupt && launcher_ending_job() &&
                     std::string(stop_reason_of(stop_signal())) == "interrupted";
            }),
            0);
}

// A parent named `parent_name` (nullptr: the test binary's own name) starts a "rank" that
// installs the handlers, and sends it a real SIGTERM once it is ready. Returns what the rank made
// of it, as int(StopSignal); >= 10 when the set-up failed.
namespace {
int term_from_parent(const char* parent_name) {
  const pid_t parent = fork();
  if (parent == 0) {
    if (parent_name) prctl(PR_SET_NAME, parent_name, 0, 0, 0);
    int ready[2];
    if (pipe(ready) != 0) _exit(10);
    const pid_t rank = fork();
    if (rank == 0) {
      sigset_t term, none;
      sigemptyset(&term);
      sigaddset(&term, SIGTERM);
      sigemptyset(&none);
      sigprocmask(SIG_BLOCK, &term, nullptr);  // held until sigsuspend: no race with the parent's kill
      install_stop_handlers();
      char c = 1;
      if (write(ready[1], &c, 1) != 1) _exit(11);
      while (stop_signal() == StopSignal::None) sigsuspend(&none);  // returns after the handler ran
      _exit(int(stop_signal()));
    }
    char c;
    if (read(ready[0], &c, 1) != 1) _exit(12);
    kill(rank, SIGTERM);
    int st = 0;
    waitpid(rank, &st, 0);
    _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 13);
  }
  int status = 0;
  waitpid(parent, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 14;
}
}  // namespace

TEST(StopSignals, RealSignalsClassifiedBySender) {
  const int preempt = int(StopSignal::Preempt), abort = int(StopSignal::LauncherAbort);
  // A SIGTERM from a parent that is no Open MPI launcher (slurmstepd, a shell): a preemption.
  EXPECT_EQ(term_from_parent(nullptr), preempt) << "a SIGTERM from an ordinary parent is a preemption";
  EXPECT_EQ(term_from_parent("slurmstepd"), preempt) << "a SIGTERM from slurmstepd is a preemption";
  // From orted or mpirun (which tear the job down when a rank or node is lost): the launcher.
  EXPECT_EQ(term_from_parent("orted"), abort) << "a SIGTERM from a parent named orted is the launcher ending the job";
  EXPECT_EQ(term_from_parent("mpirun.openmpi"), abort) << "mpirun.openmpi is Open MPI's launcher";
  // A USR1 sent to oneself (any sender): a preemption.
  EXPECT_EQ(in_child([] {
              install_stop_handlers();
              kill(getpid(), SIGUSR1);
              return stop_signal() == StopSignal::Preempt;
            }),
            0);
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
  // Central inference: the first rank after the replay on each host serves its actors.
  c.hosts = {"a", "a", "a", "a", "b", "b", "b"};
  c.layout = make_layout(load_config("", {"actor.inference=\"central\""}), 7, c.hosts);
  EXPECT_EQ(c.placement(), "a: learner 0, replay 1, inference 2, actor 3 | b: inference 4, actors 5-6");
}

TEST(Placement, PeriodicCheckpointsOnByDefaultOnlyAcrossHosts) {
  EXPECT_EQ(learner::periodic_interval_s(-1, 1), 0);
  EXPECT_EQ(learner::periodic_interval_s(-1, 3), learner::kClusterCheckpointIntervalS);
  EXPECT_EQ(learner::periodic_interval_s(0, 3), 0);   // off when asked, even on a cluster
  EXPECT_EQ(learner::periodic_interval_s(42, 1), 42);
}
