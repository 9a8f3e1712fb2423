// `mpirl eval RUN_DIR`: plays episodes with a run's saved policy in one process, with the run's
// env (built-in or Python) as a vector env of up to 8 copies.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <torch/torch.h>

#include "app/commands.h"
#include "core/config.h"
#include "core/error.h"
#include "envs/registry.h"
#include "envs/vector_env.h"
#include "models/acting.h"
#include "models/policy.h"

namespace mpirl {

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
    // Up to 8 envs in parallel (built-in or Python, as in training); env e plays a fixed quota of
    // episodes so that short episodes are not over-counted.
    const int E = std::clamp(episodes, 1, 8);
    Config one = cfg;
    one.env.num_envs = E;
    auto venv = envs::make_vector_env(one, E, seed);
    const auto& spec = venv->spec();
    models::Policy policy(spec, models::model_options(cfg));
    try {
      torch::load(policy, model_path.string());
    } catch (const std::exception& e) {
      throw Error(fmt::format("cannot load '{}': {}", model_path.string(), e.what()));
    }
    policy->eval();
    torch::NoGradGuard g;
    models::Acting acting(policy, E, seed);  // the actor's step: sampled, or the mode when greedy
    const int64_t D = spec.obs_size();
    const auto n = static_cast<size_t>(E);
    std::vector<uint8_t> obs(n * size_t(spec.obs_bytes())), init(n), term(n), trunc(n);
    std::vector<float> rew(n);
    std::vector<int> quota(n, episodes / E), done(n, 0);
    for (int e = 0; e < episodes % E; ++e) ++quota[size_t(e)];
    std::vector<double> returns;
    venv->reset(obs.data(), D, init.data(), 1);
    while (int(returns.size()) < episodes) {
      acting.step(models::obs_rows(spec, obs.data(), E, D), init.data(), 1, {}, greedy);
      venv->step(spec.discrete ? acting.discrete_actions() : nullptr, spec.discrete ? nullptr : acting.box_actions(),
                 {obs.data(), D, init.data(), 1, rew.data(), term.data(), trunc.data(), 1});
      auto finished = venv->take_finished();  // in env order among the envs that ended
      size_t k = 0;
      for (int e = 0; e < E; ++e) {
        if (!venv->ended()[size_t(e)]) continue;
        if (done[size_t(e)]++ < quota[size_t(e)]) returns.push_back(finished[k].ret);
        ++k;
      }
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

}  // namespace mpirl
