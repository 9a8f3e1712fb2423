#pragma once
// Stop signals, and who sent them. Every rank catches SIGUSR1, SIGTERM and SIGINT and only
// records them; the learners read the record at an update boundary.
//
// - Preempt: SIGUSR1 (Slurm's `--signal=B:USR1@N` reaches the batch shell, slurm/train.sbatch
//   forwards it to mpirun, mpirun passes it to every rank), or SIGTERM from anyone but an Open MPI
//   launcher (srun's tasks and Slurm's own preemption get SIGTERM from slurmstepd; `kill` by hand).
//   The learners agree to stop with stop_reason "preempted", take a final checkpoint and exit with
//   kExitPreempted.
// - Interrupt: SIGINT (Ctrl-C): stop_reason "interrupted", the same graceful stop, exit kExitInterrupted.
// - LauncherAbort: SIGTERM sent by the rank's own Open MPI launcher (its parent is orted or
//   mpirun). Open MPI sends it only when it tears the job down — a rank or a node's daemon was
//   lost, or mpirun itself got SIGTERM/SIGINT — and follows it with SIGKILL one second later
//   (odls_base_sigkill_timeout), so no checkpoint can be agreed: learner 0 saves the model and a
//   summary with stop_reason "aborted" at once and exits. It is never taken for a preemption.
// Ctrl-C on the terminal that runs mpirun: Open MPI starts every local rank in a process group of
// its own, so the terminal's SIGINT would reach only mpirun, which then ends the job with SIGTERM
// (indistinguishable from a lost node). A rank whose parent is mpirun, while mpirun is that
// terminal's foreground job, therefore joins mpirun's process group at start-up: the SIGINT
// reaches it too, and the run stops as "interrupted" (then the launcher's SIGTERM follows, so it
// leaves at once, as above, without a final checkpoint).
// SIGUSR2 is the replay's "dump now".
namespace mpirl {

// Exit code of a run that stopped for a preemption after its final checkpoint (EX_TEMPFAIL: try
// again). slurm/train.sbatch requeues the job on it; every other code ends the job.
inline constexpr int kExitPreempted = 75;
// Exit code of a run stopped by SIGINT after its final checkpoint (128 + SIGINT, as shells do).
inline constexpr int kExitInterrupted = 130;
// Exit code of a rank that left because its launcher was ending the job (128 + SIGTERM).
inline constexpr int kExitAborted = 143;
// Exit code of a run stopped because its updates were not finite (learner.on_nonfinite), after its
// final checkpoint of the last finite parameters.
inline constexpr int kExitNonFinite = 4;
// Exit code of a run that finished but whose end-of-run replay dump failed (the model and the
// summary are written; the dump's error is in the log and the summary).
inline constexpr int kExitDumpFailed = 3;

enum class StopSignal { None = 0, Preempt, Interrupt, LauncherAbort };

// Installs the handlers; decides once whether the parent process is an Open MPI launcher, and
// joins mpirun's process group when mpirun is the foreground job of a terminal (see above).
void install_stop_handlers();
// Whether install_stop_handlers() joined mpirun's process group (for the start-up log).
bool joined_launcher_terminal_group();
// A rank with nothing to save (every rank but learner 0) exits with kExitAborted from the handler
// itself when its launcher's SIGTERM arrives (at once if it already has): it may be blocked in an
// MPI call with a peer that is gone, and the launcher's SIGKILL would only come seconds later.
void leave_at_once_on_launcher_abort();
// What the signals received so far ask for, for the stop reason: an interrupt wins (Ctrl-C on
// mpirun reaches the ranks as SIGINT and then as the launcher's SIGTERM), then a launcher's abort,
// then a preemption.
StopSignal stop_signal();
// The launcher sent SIGTERM: SIGKILL follows within a second, so only what needs no peer is done.
bool launcher_ending_job();
// "preempted", "interrupted", "aborted", or "" for None.
const char* stop_reason_of(StopSignal s);
// The number of the last stop signal received (0 if none), for messages.
int stop_signal_number();
// Test seam: records `sig` as if it had arrived from a launcher (`from_launcher`) or from anyone else.
void request_stop(int sig, bool from_launcher = false);
// Whether `parent_comm` (a process name as in /proc/PID/comm) is an Open MPI launcher.
bool is_open_mpi_launcher(const char* parent_comm);
// Whether it is the launcher a user runs (mpirun, mpiexec, orterun, prterun), not a node's daemon.
bool is_open_mpi_mpirun(const char* parent_comm);

}  // namespace mpirl
