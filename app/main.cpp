// The mpirl command line: train, eval, envs.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "buffer/replay.h"
#include "app/commands.h"
#include "app/omp_wait.h"

int main(int argc, char** argv) {
  CLI::App app{"mpirl: actor-learner reinforcement learning over MPI.\n"
               "  mpirun -n 4 mpirl train                     (default: CartPole-v1, IMPALA)\n"
               "  mpirun -n 6 mpirl train --config FILE --set learner.algo=appo\n"
               "  mpirun -n 4 mpirl train --resume runs/NAME   (continue from its newest checkpoint)\n"
               "  mpirl eval runs/NAME --episodes 20\n"
               "  mpirl export runs/NAME --out policy.ts   (TorchScript; --format onnx)\n"
               "  mpirl replay inspect runs/NAME/replay.h5\n"
               "  mpirun -n 4 --map-by ppr:1:node mpirl selftest   (check a new cluster)\n"};
  app.set_version_flag("--version", std::string("mpirl ") + MPIRL_VERSION + " (LibTorch " + MPIRL_TORCH_VERSION + ")");
  app.require_subcommand(1);

  auto* train = app.add_subcommand("train", "train with one process per MPI rank (start with mpirun/srun)");
  std::string config_file;
  std::vector<std::string> overrides;
  train->add_option("--config,-c", config_file, "TOML config (keys as in configs/default.toml)");
  train->add_option("--set,-s", overrides, "override section.key=value (repeatable)")->take_all();
  std::string resume_dir;
  train->add_option("--resume", resume_dir,
                    "continue RUN_DIR from its newest complete checkpoint (its config, unless --config; only "
                    "stop conditions, intervals, timeouts, threads and the device may change)");

  auto* eval = app.add_subcommand("eval", "play episodes with a run's saved policy (one process)");
  std::string run_dir;
  int episodes = 10;
  bool greedy = false;
  uint64_t seed = 12345;
  eval->add_option("RUN", run_dir, "a run directory (runs/NAME), a checkpoint directory (runs/NAME/checkpoints/ckpt-...) or a model file (model.pt with config.toml beside it)")->required();
  eval->add_option("--episodes,-n", episodes, "episodes to play")->check(CLI::PositiveNumber);
  eval->add_flag("--greedy", greedy, "take the most likely action instead of sampling");
  eval->add_option("--seed", seed, "env seed");
  int eval_threads = 0;
  std::string eval_json;
  eval->add_option("--threads", eval_threads, "torch threads (default: torch's)")->check(CLI::NonNegativeNumber);
  eval->add_option("--json", eval_json, "also write the results to this JSON file");
  std::string eval_video;
  int eval_fps = 30;
  eval->add_option("--video", eval_video, "record the episodes as an MP4 (one env; the env's render() for "
                                          "gym:/py: envs with render_mode=\"rgb_array\", else drawn from the "
                                          "observations: CartPole-v1, Pendulum-v1, images)");
  eval->add_option("--fps", eval_fps, "video frames per second")->check(CLI::PositiveNumber);
  long eval_parent = 0;
  eval->add_option("--parent", eval_parent, "stop once process PID is no longer this one's parent (evaluation "
                                           "during training)")->group("");

  auto* selftest = app.add_subcommand(
      "selftest", "check the scan kernels, the learner step and the all-reduce on every rank's device, and the "
                  "all-reduce bandwidth (mpirun -n N --map-by ppr:1:node mpirl selftest)");
  selftest->add_option("--config,-c", config_file, "TOML config whose model and batch shapes the step check uses");
  selftest->add_option("--set,-s", overrides, "override section.key=value (repeatable)")->take_all();

  auto* envs = app.add_subcommand("envs", "list the built-in environments and their specs");

  auto* exp = app.add_subcommand("export", "write a run's policy as a TorchScript or ONNX file that needs no mpirl "
                                           "(runs python/mpirl_policy)");
  std::string export_out, export_format = "torchscript", export_python;
  exp->add_option("RUN", run_dir, "a run directory (runs/NAME), a checkpoint directory or a model file (as eval)")
      ->required();
  exp->add_option("--out,-o", export_out, "the file to write")->required();
  exp->add_option("--format", export_format, "torchscript (default) or onnx (needs pip install onnx)")
      ->check(CLI::IsMember({"torchscript", "onnx"}));
  exp->add_option("--python", export_python, "the Python interpreter (with torch) to run the export with");

  auto* replay = app.add_subcommand("replay", "replay dump tools (HDF5 files written by the replay rank)");
  replay->require_subcommand(1);
  std::string dump_in, dump_out;
  auto* inspect = replay->add_subcommand("inspect", "check a dump and print its schema, episodes and priorities");
  inspect->add_option("FILE", dump_in, "a replay dump (runs/NAME/replay.h5)")->required();
  auto* roundtrip = replay->add_subcommand("roundtrip", "restore a dump into a fresh buffer and dump it again");
  roundtrip->add_option("IN", dump_in, "a replay dump")->required();
  roundtrip->add_option("OUT", dump_out, "where to write the new dump")->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  if (*train) {
    mpirl::shorten_openmp_spin_waits(argv, config_file, overrides, resume_dir);
    return mpirl::train_main(&argc, &argv, config_file, overrides, resume_dir);
  }
  if (*eval) return mpirl::eval_main({run_dir, episodes, greedy, seed, eval_threads, eval_json, eval_parent, eval_video, eval_fps});
  if (*selftest) return mpirl::selftest_main(&argc, &argv, config_file, overrides);
  if (*envs) return mpirl::envs_main();
  if (*exp) return mpirl::export_main(run_dir, export_out, export_format, export_python);
  if (*inspect) return mpirl::buffer::replay_inspect_main(dump_in);
  if (*roundtrip) return mpirl::buffer::replay_roundtrip_main(dump_in, dump_out);
  return 2;
}
