#include "learner/evaluator.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include <spdlog/spdlog.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/run_dir.h"
#include "models/policy_file.h"

extern char** environ;

namespace mpirl::learner {
namespace {

std::string self_exe() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) throw Error(fmt::format("evaluation: cannot find the mpirl binary (/proc/self/exe): {}", std::strerror(errno)));
  std::string path(buf, size_t(n));
  const std::string deleted = " (deleted)";  // replaced on disk since it started
  if (path.size() > deleted.size() && path.compare(path.size() - deleted.size(), deleted.size(), deleted) == 0)
    path.resize(path.size() - deleted.size());
  return path;
}

}  // namespace

Evaluator::Evaluator(const Config& cfg, const std::string& run_dir)
    : cfg_(cfg), dir_(run_dir), eval_dir_(run_dir + "/eval"), interval_(run_dir.empty() ? 0 : cfg.eval.interval_s),
      last_start_(now_seconds()) {
  if (!enabled()) return;
  if (::mkdir(eval_dir_.c_str(), 0755) != 0 && errno != EEXIST)
    throw Error(fmt::format("cannot create '{}' for evaluations: {}", eval_dir_, std::strerror(errno)));
  write_file_atomic(eval_dir_ + "/config.toml", cfg.resolved_toml);
  spdlog::info("evaluation during training: {} {} episodes every {} s in a separate process -> {}/eval.jsonl",
               cfg.eval.episodes, cfg.eval.greedy ? "greedy" : "sampled", cfg.eval.interval_s, run_dir);
}

Evaluator::~Evaluator() {
  if (child_ <= 0) return;
  ::kill(child_, SIGTERM);
  int st = 0;
  while (::waitpid(child_, &st, 0) < 0 && errno == EINTR) {
  }
}

void Evaluator::start(models::Policy& policy, const envs::EnvSpec& spec) {
  models::save_policy(eval_dir_, policy, spec, models::model_options(cfg_));
  ::unlink((eval_dir_ + "/result.json").c_str());
  const std::vector<std::string> args = {self_exe(), "eval", eval_dir_,
                                         "--episodes", std::to_string(cfg_.eval.episodes),
                                         "--seed", std::to_string(cfg_.run.seed * 7919 + 1000003 + uint64_t(started_)),
                                         "--threads", std::to_string(cfg_.eval.threads),
                                         "--json", eval_dir_ + "/result.json",
                                         "--parent", std::to_string(::getpid())};
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  if (cfg_.eval.greedy) argv.push_back(const_cast<char*>("--greedy"));
  argv.push_back(nullptr);

  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&attr);
  const std::string log = eval_dir_ + "/eval.log";
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  // Nothing else of learner 0's is inherited: its MPI/NCCL sockets (a child holding them could
  // hide learner 0's death from its peers) and its open files.
  posix_spawn_file_actions_addclosefrom_np(&fa, 3);
  // The signals mpirl train catches or ignores (stop requests, SIGUSR2 dumps) are the default
  // ones in the evaluation, and none is blocked.
  sigset_t def, none;
  sigemptyset(&def);
  for (int s : {SIGUSR1, SIGUSR2, SIGTERM, SIGINT, SIGPIPE}) sigaddset(&def, s);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attr, &def);
  posix_spawnattr_setsigmask(&attr, &none);
  // A process group of its own: the launcher forwards signals (mpirun's SIGUSR1/SIGTERM, a
  // terminal's Ctrl-C) to the ranks' groups, and they are the run's, not the evaluation's; it ends
  // with learner 0 through PR_SET_PDEATHSIG (app/eval.cpp) and the destructor's SIGTERM instead.
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);
  pid_t pid = -1;
  // Nor the launcher's variables: an env that imports mpi4py must not try to join this job.
  std::vector<std::string> env_s;
  for (char** e = environ; *e; ++e) {
    const std::string v(*e);
    bool mpi = false;
    for (const char* p : {"OMPI_", "PMIX_", "PMI_", "SLURM_STEP_"}) mpi |= v.rfind(p, 0) == 0;
    if (!mpi) env_s.push_back(v);
  }
  std::vector<char*> envp;
  for (auto& v : env_s) envp.push_back(v.data());
  envp.push_back(nullptr);
  // The running binary itself, through /proc/self/exe: a rebuild or reinstall of mpirl during a
  // long run (its path then reads "... (deleted)") must not end its evaluations. argv[0] stays
  // the path, for ps.
  const int rc = ::posix_spawn(&pid, "/proc/self/exe", &fa, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    ++failed_;
    spdlog::warn("evaluation: cannot start '{}': {} (training goes on)", argv[0], std::strerror(rc));
    return;
  }
  child_ = pid;
  ++started_;
}

std::vector<nlohmann::json> Evaluator::collect(bool wait) {
  try {
    return collect_or_throw(wait);
  } catch (const std::exception& e) {  // an evaluation never stops training
    ++failed_;
    spdlog::warn("evaluation of update {}: its result could not be used: {}; training goes on",
                 snapshot_.value("update", int64_t(-1)), e.what());
    return {};
  }
}

std::vector<nlohmann::json> Evaluator::collect_or_throw(bool wait) {
  if (child_ <= 0) return {};
  int st = 0;
  pid_t r;
  do {
    r = ::waitpid(child_, &st, wait ? 0 : WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == 0) return {};  // still playing
  child_ = -1;
  const std::string result = eval_dir_ + "/result.json";
  nlohmann::json res;
  if (r > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0) {
    try {
      std::ifstream in(result);
      res = nlohmann::json::parse(in);
    } catch (const std::exception& e) {
      res = nullptr;
    }
  }
  if (res.is_null() || !res.is_object()) {
    ++failed_;
    spdlog::warn("evaluation of update {} failed ({}): see {}/eval.log; training goes on",
                 snapshot_.value("update", int64_t(-1)),
                 r > 0 && WIFEXITED(st) ? fmt::format("exit {}", WEXITSTATUS(st))
                 : r > 0 && WIFSIGNALED(st) ? fmt::format("signal {}", WTERMSIG(st))
                                           : std::string("no result"),
                 eval_dir_);
    return {};
  }
  nlohmann::json row = snapshot_;
  for (const char* k : {"episodes", "mean_return", "std_return", "min_return", "max_return", "mean_length"})
    row[std::string("eval_") + k] = res.value(k, nlohmann::json(nullptr));
  row["eval_greedy"] = res.value("greedy", cfg_.eval.greedy);
  row["eval_finished_s"] = now_seconds();
  append_json_line(dir_ + "/eval.jsonl", row);
  keep_if_best(row);
  spdlog::info("evaluation of update {} ({} env steps): mean return {} +- {} over {} {} episodes",
               row["update"].dump(), row["env_steps"].dump(), row["eval_mean_return"].dump(),
               row["eval_std_return"].dump(), row["eval_episodes"].dump(), cfg_.eval.greedy ? "greedy" : "sampled");
  return {row};
}

void Evaluator::keep_if_best(const nlohmann::json& row) {
  const auto m = row.find("eval_mean_return");
  if (m == row.end() || !m->is_number()) return;
  const double mean = m->get<double>();
  if (!best_.is_null() && mean <= best_.value("mean_return", -1e300)) return;
  try {  // the policy this evaluation played, before the next one overwrites it
    std::ifstream in(eval_dir_ + "/model.pt", std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), {});
    if (!in.good() && !in.eof()) throw Error(fmt::format("cannot read {}/model.pt", eval_dir_));
    write_file_atomic(dir_ + "/model_best.pt", bytes);
    best_ = {{"mean_return", mean},        {"update", row.value("update", int64_t(-1))},
             {"env_steps", row.value("env_steps", int64_t(-1))}, {"source", "evaluation"},
             {"file", dir_ + "/model_best.pt"}};
    spdlog::info("best policy so far (evaluation mean {:.2f} at update {}) -> model_best.pt", mean,
                 best_["update"].get<int64_t>());
  } catch (const std::exception& e) {
    spdlog::warn("model_best.pt not written (training goes on): {}", e.what());
  }
}

nlohmann::json Evaluator::counts() const {
  return {{"interval_s", interval_}, {"started", started_}, {"skipped", skipped_}, {"failed", failed_}};
}

std::vector<nlohmann::json> Evaluator::poll(models::Policy& policy, const envs::EnvSpec& spec, int64_t update,
                                            int64_t env_steps, double time_s) {
  if (!enabled()) return {};
  auto rows = collect(false);
  const double now = now_seconds();
  if (now - last_start_ < interval_) return rows;
  last_start_ = now;
  if (child_ > 0) {  // the previous one still plays: never wait for it
    ++skipped_;
    if (!skip_noted_)
      spdlog::info("evaluation: the previous one still runs after eval.interval_s = {} s; this one is skipped "
                   "(said once; a longer interval or fewer eval.episodes avoids it)", interval_);
    skip_noted_ = true;
    return rows;
  }
  snapshot_ = {{"update", update}, {"env_steps", env_steps}, {"time_s", time_s}};
  try {
    start(policy, spec);
  } catch (const std::exception& e) {
    ++failed_;
    spdlog::warn("evaluation: cannot save the policy to {}: {} (training goes on)", eval_dir_, e.what());
  }
  return rows;
}

}  // namespace mpirl::learner
