#include "runtime/launch.h"

#include <csignal>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <mpi.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "actor/actor.h"
#include "buffer/replay.h"
#include "envs/registry.h"
#include "learner/learner.h"
#include "models/policy.h"
#include "runtime/error.h"
#include "runtime/roles.h"
#include "runtime/run_dir.h"
#include "runtime/run_setup.h"

namespace mpirl {
namespace {

void setup_logging(int rank, Role role) {
  spdlog::set_pattern(fmt::format("[%H:%M:%S.%e] [rank {} {}] %^%l%$: %v", rank, role_name(role)));
  spdlog::set_level(rank == 0 || role == Role::Replay ? spdlog::level::info : spdlog::level::warn);
  if (const char* lvl = std::getenv("MPIRL_LOG_LEVEL")) spdlog::set_level(spdlog::level::from_str(lvl));
}

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
    env_spec(cfg);  // unknown env id
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
    setup_logging(rank, comms.role());
    if (rank == 0)
      spdlog::info("mpirl {}: {} on {} ranks ({} learner(s), 1 replay, {} actor(s) x {} envs) -> {}", MPIRL_VERSION,
                   cfg.env.id, world, layout.learners, layout.actors(), cfg.env.num_envs, v.run_dir);
    switch (comms.role()) {
      case Role::Learner: learner::run_learner(cfg, comms, rank == 0 ? v.run_dir : ""); break;
      case Role::Replay: buffer::run_replay(cfg, comms, v.run_dir); break;
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

int eval_main(const std::string& run_dir, int episodes, bool greedy, uint64_t seed) {
  namespace fs = std::filesystem;
  try {
    auto cfg_path = fs::path(run_dir) / "config.toml", model_path = fs::path(run_dir) / "model.pt";
    for (auto& p : {cfg_path, model_path})
      if (!fs::exists(p)) throw Error(fmt::format("'{}' not found: is '{}' a finished run directory?", p.string(), run_dir));
    std::ifstream in(cfg_path);
    std::stringstream ss;
    ss << in.rdbuf();
    Config cfg = parse_resolved_config(ss.str());
    auto env = envs::make_env(cfg.env.id, seed, env_options(cfg));
    const auto& spec = env->spec();
    models::Policy policy(spec, model_options(cfg));
    try {
      torch::load(policy, model_path.string());
    } catch (const std::exception& e) {
      throw Error(fmt::format("cannot load '{}': {}", model_path.string(), e.what()));
    }
    policy->eval();
    torch::NoGradGuard g;
    auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    std::vector<float> obs(size_t(spec.obs_size()));
    std::vector<double> returns;
    for (int ep = 0; ep < episodes; ++ep) {
      env->reset(obs.data());
      double ret = 0;
      auto state = policy->initial_state(1);
      auto no_reset = torch::zeros({1});
      for (;;) {
        auto out = policy->step(torch::from_blob(obs.data(), {1, spec.obs_size()}), no_reset, state);
        torch::Tensor a;
        if (greedy) a = spec.discrete ? out.dist.argmax(-1) : out.dist.chunk(2, -1)[0];
        else a = models::sample(spec, out.dist, gen);
        envs::Action act;
        a = a.contiguous();
        if (spec.discrete) act.index = a.item<int64_t>();
        else act.values = a.data_ptr<float>();
        auto r = env->step(act, obs.data());
        ret += r.reward;
        if (r.terminated || r.truncated) break;
      }
      returns.push_back(ret);
    }
    double mean = 0, var = 0;
    for (double r : returns) mean += r;
    mean /= double(returns.size());
    for (double r : returns) var += (r - mean) * (r - mean);
    double sd = std::sqrt(var / double(returns.size()));
    fmt::print("{}: {} episodes of {} ({} policy): mean return {:.2f} +- {:.2f} (min {:.1f}, max {:.1f})\n", run_dir,
               episodes, cfg.env.id, greedy ? "greedy" : "sampled", mean, sd,
               *std::min_element(returns.begin(), returns.end()), *std::max_element(returns.begin(), returns.end()));
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "mpirl eval: {}\n", e.what());
    return 2;
  }
}

int envs_main() {
  size_t w = 0;
  for (auto& id : envs::env_ids()) w = std::max(w, id.size());
  for (auto& id : envs::env_ids()) {
    auto env = envs::make_env(id, 0);
    const auto& s = env->spec();
    std::string act = s.discrete ? fmt::format("Discrete({})", s.num_actions)
                                 : fmt::format("Box({}, [{}, {}])", s.action_dim, fmt::join(s.action_low, ","),
                                               fmt::join(s.action_high, ","));
    fmt::print("{:<{}}  obs {:<13} action {:<18} max_episode_steps {:<5} {}\n", id, w,
               fmt::format("float32[{}]", fmt::join(s.obs_shape, ",")), act, s.max_episode_steps, s.description);
  }
  return 0;
}

}  // namespace mpirl
