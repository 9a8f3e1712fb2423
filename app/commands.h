#pragma once
// The mpirl subcommands.
#include <string>
#include <vector>

namespace mpirl {

// `mpirl train`: every rank calls this. Returns the process exit code: 0 on success, 2 for a bad
// config or world size (printed once by rank 0, no run directory created). A fatal error on any
// rank is logged with rank and host and ends the job with MPI_Abort.
// `resume_dir`: a run directory to continue from its newest complete checkpoint ("" = none).
int train_main(int* argc, char*** argv, const std::string& config_file, const std::vector<std::string>& overrides,
               const std::string& resume_dir);

// `mpirl eval RUN_DIR`: plays episodes with the saved policy in one process; prints mean/std return.
int eval_main(const std::string& run_dir, int episodes, bool greedy, uint64_t seed);

// `mpirl selftest`: the learners' self-checks on every rank (start with mpirun, one rank per node
// or per GPU) and the all-reduce bandwidth between them; rank 0 prints a table. 0 if every check
// that ran passed, 1 otherwise.
int selftest_main(int* argc, char*** argv, const std::string& config_file, const std::vector<std::string>& overrides);

// `mpirl envs`: the built-in envs and their specs.
int envs_main();

}  // namespace mpirl
