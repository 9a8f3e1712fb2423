#include "app/commands.h"

#include <csignal>

#include <mpi.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "actor/actor.h"
#include "app/train_start.h"
#include "inference/server.h"
#include "buffer/replay.h"
#include "learner/learner.h"
#include "core/error.h"
#include "core/signals.h"
#include "comm/ranks.h"
#include "core/logging.h"
#include "buffer/hdf5_vds.h"

namespace mpirl {
namespace {

using detail::validate_on_rank0;
using detail::Verdict;

// Replay shards: after every shard's final dump (their goodbyes came before run_learner returned),
// learner 0 joins them into one HDF5 view at the run's dump path (buffer/hdf5_vds.h). A failure
// is reported, never fatal: each shard's dump stands on its own.
void join_shard_dumps(const Config& cfg, const std::string& run_dir, int shards) {
  if (cfg.replay.dump == "never") return;
  std::vector<std::string> parts;
  for (int k = 0; k < shards; ++k) parts.push_back(buffer::shard_dump_path(cfg, run_dir, k));
  const std::string out = buffer::dump_path(cfg, run_dir);
  try {
    buffer::write_replay_vds(out, parts);
    spdlog::info("replay: the {} shard dumps are joined in {} (HDF5 virtual datasets; keep the shard files beside it)",
                 shards, out);
  } catch (const std::exception& e) {
    spdlog::error("replay: the shard dumps could not be joined into {}: {}", out, e.what());
  }
}

void bcast_string(std::string& s, int root) {
  uint64_t n = s.size();
  MPIRL_MPI(MPI_Bcast(&n, 1, MPI_UINT64_T, root, MPI_COMM_WORLD));
  s.resize(n);
  if (n) MPIRL_MPI(MPI_Bcast(s.data(), int(n), MPI_CHAR, root, MPI_COMM_WORLD));
}

}  // namespace

int train_main(int* argc, char*** argv, const std::string& config_file, const std::vector<std::string>& overrides,
               const std::string& resume_dir) {
  MPI_Init(argc, argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0, world = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  int code = 0;
  try {
    // Where every rank runs, first: central inference places its ranks by host.
    const std::vector<std::string> hosts = gather_hosts();
    Verdict v;
    if (rank == 0) v = validate_on_rank0(config_file, overrides, resume_dir, world, hosts);
    bcast_string(v.error, 0);
    if (!v.error.empty()) {
      if (rank == 0) fmt::print(stderr, "mpirl: config error: {}\n", v.error);
      MPI_Finalize();
      return 2;
    }
    bcast_string(v.finished, 0);
    if (!v.finished.empty()) {
      if (rank == 0) fmt::print(stderr, "mpirl: {}\n", v.finished);
      MPI_Finalize();
      return 0;
    }
    bcast_string(v.config_toml, 0);
    bcast_string(v.start.run_dir, 0);
    bcast_string(v.start.resume_from, 0);
    MPIRL_MPI(MPI_Bcast(&v.start.segment, 1, MPI_INT64_T, 0, MPI_COMM_WORLD));
    install_stop_handlers();     // SIGUSR1/SIGTERM/SIGINT: recorded; the learners act at an update boundary
    signal(SIGUSR2, SIG_IGN);    // the replay rank installs its dump handler; nobody else dies of it
    Config cfg = parse_resolved_config(v.config_toml);
    Layout layout = make_layout(cfg, world, hosts);
    Comms comms = Comms::create(layout, hosts);
    setup_logging(rank, role_name(comms.role()), cfg.run.progress);
    if (rank != 0) leave_at_once_on_launcher_abort();  // learner 0 alone saves something (learner.cpp)
    if (rank == 0 && joined_launcher_terminal_group())
      spdlog::info("mpirun is this terminal's foreground job: Ctrl-C stops the run as \"interrupted\", without a "
                   "final checkpoint (kill -USR1 <mpirun's pid> stops it after one)");
    if (rank == 0)
      spdlog::info("mpirl {}: {} on {} ranks ({} learner(s), {}, {}{} actor(s) x {} envs{}) -> {}{}", MPIRL_VERSION,
                   cfg.env.id, world, layout.learners,
                   layout.replays() == 1 ? std::string("1 replay") : fmt::format("{} replay shards", layout.replays()),
                   layout.central() ? fmt::format("{} inference rank(s), ", layout.inference_ranks().size()) : "",
                   layout.actors(), cfg.env.num_envs,
                   cfg.actor.env_groups > 1 ? fmt::format(" in {} groups", cfg.actor.env_groups) : "", v.start.run_dir,
                   v.start.resume_from.empty() ? "" : fmt::format(" (resumed, segment {})", v.start.segment));
    switch (comms.role()) {
      case Role::Learner:
        code = learner::run_learner(cfg, comms, v.start);
        if (rank == 0 && layout.replays() > 1) join_shard_dumps(cfg, v.start.run_dir, layout.replays());
        break;
      case Role::Replay: code = buffer::run_replay(cfg, comms, v.start); break;
      case Role::Actor: actor::run_actor(cfg, comms, v.start.segment); break;
      case Role::Inference: inference::run_inference(cfg, comms); break;
    }
    comms.free();
  } catch (const std::exception& e) {
    fmt::print(stderr, "mpirl: fatal error on {}: {}\n", where(), e.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    code = 1;
  }
  MPI_Finalize();
  return code;
}

}  // namespace mpirl
