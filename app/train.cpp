#include "app/commands.h"

#include <csignal>

#include <mpi.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "actor/actor.h"
#include "buffer/replay.h"
#include "envs/registry.h"
#include "learner/learner.h"
#include "core/error.h"
#include "comm/ranks.h"
#include "core/logging.h"
#include "core/run_dir.h"

namespace mpirl {
namespace {

// Rank 0 validates everything that can be wrong with the request; the verdict and the resolved
// config go to every rank, so all of them exit 2 together on a bad config.
struct Verdict {
  std::string error, config_toml, run_dir;
};

Verdict validate_on_rank0(const std::string& file, const std::vector<std::string>& overrides, int world) {
  Verdict v;
  try {
    Config cfg = load_config(file, overrides);
    make_layout(cfg, world);
    envs::env_spec(cfg);  // unknown env id
    buffer::validate_replay_config(cfg);
    v.run_dir = run_dir_path(cfg);
    create_run_dir(v.run_dir, cfg);
    v.config_toml = cfg.resolved_toml;
  } catch (const ConfigError& e) {
    v.error = e.what();
  }
  return v;
}

void bcast_string(std::string& s, int root) {
  uint64_t n = s.size();
  MPIRL_MPI(MPI_Bcast(&n, 1, MPI_UINT64_T, root, MPI_COMM_WORLD));
  s.resize(n);
  if (n) MPIRL_MPI(MPI_Bcast(s.data(), int(n), MPI_CHAR, root, MPI_COMM_WORLD));
}

}  // namespace

int train_main(int* argc, char*** argv, const std::string& config_file, const std::vector<std::string>& overrides) {
  MPI_Init(argc, argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0, world = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  int code = 0;
  try {
    Verdict v;
    if (rank == 0) v = validate_on_rank0(config_file, overrides, world);
    bcast_string(v.error, 0);
    if (!v.error.empty()) {
      if (rank == 0) fmt::print(stderr, "mpirl: config error: {}\n", v.error);
      MPI_Finalize();
      return 2;
    }
    bcast_string(v.config_toml, 0);
    bcast_string(v.run_dir, 0);
    signal(SIGUSR1, SIG_IGN);  // the replay rank installs its dump handler; nobody else dies of it
    Config cfg = parse_resolved_config(v.config_toml);
    Layout layout = make_layout(cfg, world);
    Comms comms = Comms::create(layout);
    setup_logging(rank, role_name(comms.role()));
    if (rank == 0)
      spdlog::info("mpirl {}: {} on {} ranks ({} learner(s), 1 replay, {} actor(s) x {} envs) -> {}", MPIRL_VERSION,
                   cfg.env.id, world, layout.learners, layout.actors(), cfg.env.num_envs, v.run_dir);
    switch (comms.role()) {
      case Role::Learner: learner::run_learner(cfg, comms, rank == 0 ? v.run_dir : ""); break;
      case Role::Replay: code = buffer::run_replay(cfg, comms, v.run_dir); break;
      case Role::Actor: actor::run_actor(cfg, comms); break;
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
