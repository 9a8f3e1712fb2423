// Learner throughput without MPI: Trainer::update on synthetic [T, B] batches already on the
// device (the replay and the host-to-device copies are not in it), eager steps vs the CUDA-graph
// step, in the same process. Prints one JSON line per mode with samples/s (T * B per update) and
// the graph / eager ratio. Issue 10's figure 3: --policy mlp and --policy lru at T = 32, B = 256:
//   build/bench_learner --device cuda --policy lru --T 32 --B 256
// A shipped config's learner on the CPU (its batch_size, rollout_len, epochs and minibatches; a
// box action space gets Gaussian actions), e.g. the MuJoCo suite's APPO:
//   build/bench_learner --device cpu --config configs/mujoco.toml --modes eager
#include <CLI/CLI.hpp>
#include <cstring>
#include <random>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>
#if MPIRL_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

#include "core/clock.h"
#include "core/config.h"
#include "envs/registry.h"
#include "learner/trainer.h"
#include "tests/common/train_batches.h"

namespace {
// uint8 observations as the env makes them (MinAtar's are mostly zeros, which model.sparse_input
// exploits; random bytes would not be): [T + 1, B] frames of one env played with uniformly random
// actions, a new episode after each end.
torch::Tensor env_frames(const mpirl::Config& cfg, const std::vector<int64_t>& shape, uint64_t seed) {
  auto env = mpirl::envs::make_env(cfg.env.id, 1000 + seed, mpirl::envs::env_options(cfg));
  auto out = torch::empty(shape, torch::kUInt8);
  const int64_t rows = shape[0] * shape[1], size = env->spec().obs_size();
  uint8_t* p = out.data_ptr<uint8_t>();
  std::mt19937_64 rng(seed);
  env->reset(p);
  for (int64_t i = 1; i < rows; ++i) {
    mpirl::envs::Action a;
    a.index = int64_t(rng() % uint64_t(std::max<int64_t>(env->spec().num_actions, 1)));
    auto r = env->step(a, p + i * size);
    if (r.terminated || r.truncated) env->reset(p + i * size);
  }
  return out;
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"learner updates per second: eager vs CUDA graph"};
  std::vector<std::string> sets;
  std::string device = "cuda", policy = "mlp", modes = "both", config;
  int64_t T = 32, B = 256;
  double seconds = 10;
  int warmup = 20;
  app.add_option("--config", config, "a config file: its learner, model and env (T, B and --policy then come "
                 "from it unless given)");
  app.add_option("--set", sets, "config override section.key=value (as mpirl train)")->take_all();
  app.add_option("--device", device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--policy", policy, "mlp (no core) or lru (LRU scan core)")->check(CLI::IsMember({"mlp", "lru"}));
  app.add_option("--T", T, "unroll length");
  app.add_option("--B", B, "sequences per update");
  app.add_option("--seconds", seconds, "timed duration per mode");
  app.add_option("--warmup", warmup, "untimed updates first (the graph is captured in the first)");
  app.add_option("--modes", modes, "eager, graph or both")->check(CLI::IsMember({"eager", "graph", "both"}));
  CLI11_PARSE(app, argc, argv);
  using namespace mpirl;
  using namespace mpirl::learner;
  std::vector<std::string> all;
  if (config.empty() || app.count("--B")) all.push_back(fmt::format("learner.batch_size={}", B));
  if (config.empty() || app.count("--T")) all.push_back(fmt::format("actor.rollout_len={}", T));
  if (config.empty() || app.count("--policy"))
    all.push_back(policy == "lru" ? "model.core=\"lru\"" : "model.core=\"none\"");
  all.insert(all.end(), sets.begin(), sets.end());
  Config cfg = load_config(config, all);
  T = cfg.actor.rollout_len;
  B = cfg.learner.batch_size;
  policy = cfg.model.core == "none" ? "mlp" : cfg.model.core;
  const torch::Device dev = device == "cuda" ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
  if (dev.is_cuda() && !torch::cuda::is_available()) {
    fmt::print(stderr, "--device cuda: no CUDA device visible\n");
    return 2;
  }
  torch::set_num_threads(cfg.learner.threads);
  auto spec = envs::env_spec(cfg);
  const int64_t D = spec.obs_size(), A = spec.num_actions, S = models::state_size(cfg, spec);
  std::vector<TrainBatch> batches;
  for (uint64_t k = 0; k < 4; ++k) {
    batches.push_back(testing::random_batch(T, B, D, std::max<int64_t>(A, 1), S, k, false, dev));
    std::vector<int64_t> obs_shape{T + 1, B};  // the env's own: images as [C, H, W], pixels as uint8
    obs_shape.insert(obs_shape.end(), spec.obs_shape.begin(), spec.obs_shape.end());
    auto& obs = batches.back().obs;
    obs = spec.obs_uint8 ? env_frames(cfg, obs_shape, k).to(dev) : obs.view(obs_shape);
    if (!spec.discrete) {  // Gaussian actions near a unit-variance policy's
      auto& b = batches.back();
      b.actions = torch::randn({T, B, spec.action_dim}).to(dev);
      b.behaviour_logp = (-1.42 * double(spec.action_dim) + 0.1 * torch::randn({T, B})).to(dev);
    }
  }
  auto sync = [&] {
    if (dev.is_cuda()) torch::cuda::synchronize();
  };
  std::vector<StepMode> run;
  if (modes != "graph") run.push_back(StepMode::Eager);
  if (modes != "eager") {
    if (!dev.is_cuda()) fmt::print(stderr, "graph mode needs --device cuda: skipped\n");
    else run.push_back(StepMode::Graph);
  }
  double eager_sps = 0;
  for (StepMode m : run) {
    NoReducer none;
    torch::manual_seed(1);
    Trainer trainer(cfg, spec, dev, none, m);
    for (int i = 0; i < warmup; ++i) trainer.update(batches[size_t(i) % batches.size()], {});
    sync();
    int64_t updates = 0;
    const double t0 = now_seconds();
    double t = t0;
    while (t - t0 < seconds) {
      for (int i = 0; i < 10; ++i, ++updates) trainer.update(batches[size_t(updates) % batches.size()], {});
      sync();  // every 10 updates: the host never runs far ahead of the device
      t = now_seconds();
    }
    const double sps = double(updates * T * B) / (t - t0);
    if (m == StepMode::Eager) eager_sps = sps;
    nlohmann::json j = {{"mode", m == StepMode::Eager ? "eager" : "graph"}, {"device", dev.str()},
                        {"policy", policy}, {"algo", cfg.learner.algo}, {"T", T}, {"B", B},
                        {"updates", updates}, {"seconds", t - t0}, {"samples_per_s", sps},
                        {"step", trainer.describe()}, {"num_params", models::num_params(trainer.policy())}};
    if (m == StepMode::Graph && eager_sps > 0) j["graph_over_eager"] = sps / eager_sps;
#if MPIRL_WITH_CUDA
    if (dev.is_cuda()) j["gpu"] = at::cuda::getDeviceProperties(0)->name;
#endif
    fmt::print("{}\n", j.dump());
  }
  return 0;
}
