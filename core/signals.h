#pragma once
// Preemption signals. mpirun passes SIGUSR1 and SIGUSR2 on to every rank (Slurm's
// `--signal=B:USR1@N` reaches the batch shell, which forwards it to mpirun: slurm/train.sbatch);
// srun and Slurm's own preemption send SIGTERM to every task. Every rank catches SIGUSR1 and
// SIGTERM and only records them: the learners read the flag at an update boundary, agree to stop
// with stop_reason "preempted", take a checkpoint and exit with kExitPreempted. Actors and the
// replay go on until the ordinary stop sequence reaches them. SIGUSR2 is the replay's "dump now".
namespace mpirl {

// Exit code of a run that stopped for a signal after its final checkpoint (EX_TEMPFAIL: try
// again). slurm/train.sbatch requeues the job on it; every other code ends the job.
inline constexpr int kExitPreempted = 75;

void install_preempt_handlers();
// The signal that asked this rank to stop (SIGUSR1 or SIGTERM), 0 if none.
int preempt_signal();
// Test seam: records a preemption as if `sig` had arrived.
void request_preempt(int sig);

}  // namespace mpirl
