// `mpirl eval RUN_DIR`: plays episodes with a run's saved policy in one process.
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
    auto env = envs::make_env(cfg.env.id, seed, envs::env_options(cfg));
    const auto& spec = env->spec();
    models::Policy policy(spec, models::model_options(cfg));
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

}  // namespace mpirl
