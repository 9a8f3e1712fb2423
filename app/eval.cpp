// `mpirl eval RUN_DIR`: plays episodes with a run's saved policy in one process, with the run's
// env (built-in or Python) as a vector env of up to 8 copies.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <sys/prctl.h>
#include <unistd.h>

#include <csignal>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "app/commands.h"
#include "app/video.h"
#include "core/checkpoint.h"
#include "learner/learner.h"
#include "core/config.h"
#include "core/error.h"
#include "core/run_dir.h"
#include "envs/registry.h"
#include "envs/vector_env.h"
#include "models/acting.h"
#include "models/policy.h"
#include "models/policy_file.h"

namespace mpirl {

namespace fs = std::filesystem;

// The policy file and config that `what` names: a model file (config.toml beside it), a
// directory holding model.pt and config.toml (a run or a checkpoint), or a run directory without
// model.pt yet (its newest complete checkpoint's).
PolicyFiles find_policy(const std::string& what) {
  std::error_code ec;
  if (!fs::exists(what, ec)) throw Error(fmt::format("'{}': no such file or directory", what));
  if (!fs::is_directory(what, ec)) {
    const auto cfg = fs::path(what).parent_path() / "config.toml";
    if (!fs::exists(cfg, ec))
      throw Error(fmt::format("'{}' has no config.toml beside it: give the run or checkpoint directory that holds "
                              "both", what));
    return {what, cfg.string()};
  }
  const auto model = fs::path(what) / "model.pt", cfg = fs::path(what) / "config.toml";
  if (fs::exists(model, ec) && fs::exists(cfg, ec)) return {model.string(), cfg.string()};
  const auto latest = ckpt::latest(what, learner::checkpoint_weights_problem);
  if (!latest.dir.empty() && fs::exists(latest.dir + "/model.pt", ec))
    return {latest.dir + "/model.pt", latest.dir + "/config.toml"};
  throw Error(fmt::format("'{}' holds no model.pt and config.toml, and no complete checkpoint with a model: give a "
                          "run directory, a checkpoint directory (RUN/checkpoints/ckpt-...) or a model file",
                          what));
}

int eval_main(const EvalOptions& o) {
  const std::string& run_dir = o.path;
  const int episodes = o.episodes;
  bool greedy = o.greedy;
  const uint64_t seed = o.seed;
  try {
    if (o.threads > 0) torch::set_num_threads(o.threads);
    // ffmpeg gone (a --video error) must be an error message, not a silent SIGPIPE.
    std::signal(SIGPIPE, SIG_IGN);
    if (o.parent > 0) {  // evaluation during training: end with the learner that started us
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      // The run's stop and dump requests (SIGUSR1/SIGUSR2, forwarded by mpirun) are not ours.
      std::signal(SIGUSR1, SIG_IGN);
      std::signal(SIGUSR2, SIG_IGN);
      if (long(::getppid()) != o.parent) return 3;
    }
    const PolicyFiles files = find_policy(run_dir);
    const fs::path cfg_path = files.config, model_path = files.model;
    Config cfg = load_run_config(cfg_path.string());
    // An R2D2 policy's logits are advantages: the softmax over them means nothing; it acts greedily.
    if (cfg.learner.algo == "r2d2") greedy = true;
    // Up to 8 envs in parallel (built-in or Python, as in training); env e plays a fixed quota of
    // episodes so that short episodes are not over-counted.
    // A video follows one env through its episodes.
    const int E = o.video.empty() ? std::clamp(episodes, 1, 8) : 1;
    Config one = cfg;
    one.env.num_envs = E;
    if (!o.video.empty() && cfg.env.id.rfind("gym:", 0) == 0) {  // gymnasium renders when asked at make
      auto kw = cfg.env.kwargs.empty() ? nlohmann::json::object() : nlohmann::json::parse(cfg.env.kwargs);
      if (!kw.contains("render_mode")) kw["render_mode"] = "rgb_array";
      one.env.kwargs = kw.dump();
    }
    auto venv = envs::make_vector_env(one, E, seed);
    const auto& spec = venv->spec();
    models::Policy policy(spec, models::model_options(cfg));
    models::load_policy_file(policy, model_path.string());
    policy->eval();
    torch::NoGradGuard g;
    models::Acting acting(policy, E, seed);  // the actor's step: sampled, or the mode when greedy
    const int64_t D = spec.obs_size();
    const auto n = static_cast<size_t>(E);
    std::vector<uint8_t> obs(n * size_t(spec.obs_bytes())), init(n), term(n), trunc(n);
    std::vector<float> rew(n);
    std::vector<int> quota(n, episodes / E), done(n, 0);
    for (int e = 0; e < episodes % E; ++e) ++quota[size_t(e)];
    std::vector<double> returns, lengths;
    venv->reset(obs.data(), D, init.data(), 1);
    std::unique_ptr<VideoWriter> video;
    bool env_renders = false;
    envs::Frame frame;
    auto record = [&] {
      if (!video) return;
      if (!(env_renders && venv->render(0, frame)) && !draw_observation(spec, obs.data(), frame))
        throw Error(fmt::format("env '{}' gave no frame to record", cfg.env.id));
      video->add(frame);
    };
    if (!o.video.empty()) {
      video = std::make_unique<VideoWriter>(o.video, o.fps);
      env_renders = venv->render(0, frame);
      if (!env_renders && !draw_observation(spec, obs.data(), frame))
        throw Error(fmt::format(
            "env '{}' renders no frames and its observations are not images: make it render -- gym: envs are made "
            "with render_mode=\"rgb_array\" by mpirl eval itself (classic-control ones need pygame); for a py: env, "
            "have your factory accept render_mode and pass it: --set env.kwargs='{{\"render_mode\": \"rgb_array\"}}' at "
            "training, or add it to the run's config.toml [env] kwargs",
            cfg.env.id));
      record();
    }
    while (int(returns.size()) < episodes) {
      acting.step(models::obs_rows(spec, obs.data(), E, D), init.data(), 1, {}, greedy);
      venv->step(spec.discrete ? acting.discrete_actions() : nullptr, spec.discrete ? nullptr : acting.box_actions(),
                 {obs.data(), D, init.data(), 1, rew.data(), term.data(), trunc.data(), 1});
      if (o.parent > 0 && long(::getppid()) != o.parent) {
        fmt::print(stderr, "mpirl eval: the training process {} is gone; stopping\n", o.parent);
        return 3;
      }
      if (video && done[0] < quota[0]) record();
      auto finished = venv->take_finished();  // in env order among the envs that ended
      size_t k = 0;
      for (int e = 0; e < E; ++e) {
        if (!venv->ended()[size_t(e)]) continue;
        if (done[size_t(e)]++ < quota[size_t(e)]) {
          returns.push_back(finished[k].ret);
          lengths.push_back(finished[k].length);
        }
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
    int64_t frames = 0;
    if (video) {
      frames = video->close();
      fmt::print("video: {} frames of {} episode(s) ({}) -> {}\n", frames, episodes,
                 env_renders ? "the env's render()" : "drawn from the observations", o.video);
    }
    if (!o.json_out.empty()) {
      double mean_len = 0;
      for (double l : lengths) mean_len += l;
      mean_len /= double(lengths.size());
      write_json_atomic(o.json_out, {{"model", model_path.string()},
                                     {"episodes", episodes},
                                     {"greedy", greedy},
                                     {"mean_return", mean},
                                     {"std_return", sd},
                                     {"min_return", *std::min_element(returns.begin(), returns.end())},
                                     {"max_return", *std::max_element(returns.begin(), returns.end())},
                                     {"mean_length", mean_len},
                                     {"returns", returns},
                                     {"lengths", lengths},
                                     {"video_frames", frames}});
    }
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "mpirl eval: {}\n", e.what());
    return 2;
  }
}

}  // namespace mpirl
