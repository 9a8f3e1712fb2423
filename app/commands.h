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

// A saved policy: its model.pt and the config.toml it was trained with.
struct PolicyFiles {
  std::string model, config;
};
// What `mpirl eval` and `mpirl export` accept: a run directory (its model.pt, rewritten after
// every checkpoint, or else its newest complete checkpoint's), a checkpoint directory
// (RUN/checkpoints/ckpt-...), or a model file with config.toml beside it. Throws mpirl::Error
// saying what was expected.
PolicyFiles find_policy(const std::string& what);

// `mpirl eval PATH` (find_policy): plays episodes with the saved policy in one process; prints
// mean/std return, and writes them as JSON to `json_out` when given (what learner 0's evaluation
// during training reads: learner/evaluator.h). Returns 0, or 2 naming what was wrong.
struct EvalOptions {
  std::string path;
  int episodes = 10;
  bool greedy = false;
  uint64_t seed = 12345;
  int threads = 0;       // torch threads; 0 = torch's default
  std::string json_out;  // "" = none
  long parent = 0;       // > 0: stop (exit 3) once this process is no longer the parent
  std::string video;     // "" = none; else an MP4 of env 0 playing every episode (app/video.h)
  int fps = 30;
};
int eval_main(const EvalOptions& o);

// `mpirl selftest`: the learners' self-checks on every rank (start with mpirun, one rank per node
// or per GPU) and the all-reduce bandwidth between them; rank 0 prints a table. 0 if every check
// that ran passed, 1 otherwise.
int selftest_main(int* argc, char*** argv, const std::string& config_file, const std::vector<std::string>& overrides);

// `mpirl envs`: the built-in envs and their specs.
int envs_main();

// `mpirl export PATH --out FILE` (find_policy): the saved policy as a TorchScript or ONNX file that
// needs no mpirl code, written by the Python package python/mpirl_policy run with `python` ("" =
// the interpreter mpirl was built with). Returns its exit code (2 naming what was wrong).
int export_main(const std::string& path, const std::string& out, const std::string& format,
                const std::string& python);

}  // namespace mpirl
