#pragma once
// OpenMP threads that spin less before they sleep, for runs that give a role more than one torch thread.
#include <string>
#include <vector>

namespace mpirl {

// LibTorch's CPU ops run on libgomp's thread pool when a role has more than one torch thread
// (learner.threads = 2 in configs/minatar.toml). libgomp's idle threads spin 300,000 times before
// they sleep, unless one process has more OpenMP threads than CPUs: it cannot see the other ranks
// or jobs on the same cores. Beside other runs on the dev VM's 2 cores a MinAtar learner spent 91% of
// its time in that spin loop; two MinAtar runs at once made 1.9k env steps/s each, against 25.6k
// alone (docs/running.md, "Torch threads", has the measurements).
//
// When the run's config (config_file, or else resume_dir's config.toml, that of the run's latest
// start, with overrides; training resumes from its newest checkpoint's, which differs only after a
// start that changed threads and stopped before its first checkpoint) gives the learner, the
// actors, an inference rank or the evaluator more than one thread, and the user set neither
// OMP_WAIT_POLICY nor GOMP_SPINCOUNT, this sets GOMP_SPINCOUNT=10000 (as fast as the default
// alone, 3.5x faster beside a second run) and executes this program again with the same
// arguments: libgomp reads the variable only when it is loaded, before main(). It returns when
// nothing needs to change, when the config cannot be read (train_main reports why), or when exec
// fails (then the run goes on with libgomp's default). Every rank reads the config here (train_main
// reads it on rank 0 only), so a rank that cannot read it starts without the exec. The exec loads
// LibTorch a second time on every rank: a start-up cost that only such runs pay. Call it before
// MPI_Init.
void shorten_openmp_spin_waits(char** argv, const std::string& config_file,
                               const std::vector<std::string>& overrides, const std::string& resume_dir);

}  // namespace mpirl
