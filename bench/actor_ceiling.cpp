// The env + inference ceiling of one actor, with no MPI: the actor's per-step work (policy forward
// without grad, sampling, log-prob, env step into an env-major rollout) in a loop, for --seconds.
// Prints one JSON line with the steps per second. bench/e2e_throughput.sh runs one per actor rank.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <torch/torch.h>

#include "envs/registry.h"
#include "envs/vector_env.h"
#include "models/policy.h"
#include "core/config.h"
#include "comm/transport.h"

int main(int argc, char** argv) {
  CLI::App app{"env + local inference ceiling of one actor (no MPI)"};
  std::vector<std::string> sets;
  double seconds = 10;
  int stream = 0;
  app.add_option("--set", sets, "config override section.key=value (as mpirl train)")->take_all();
  app.add_option("--seconds", seconds, "duration");
  app.add_option("--stream", stream, "seed stream (one per process)");
  CLI11_PARSE(app, argc, argv);
  using namespace mpirl;
  Config cfg = load_config("", sets);
  torch::set_num_threads(cfg.actor.threads);
  torch::NoGradGuard ng;
  const int64_t E = cfg.env.num_envs, T = cfg.actor.rollout_len;
  auto venv_ptr = envs::make_vector_env(cfg, int(E), envs::mix_seed(cfg.run.seed, uint64_t(stream)));
  envs::VectorEnv& venv = *venv_ptr;
  const auto& spec = venv.spec();
  const int64_t D = spec.obs_size(), L = spec.dist_size();
  models::Policy policy(spec, models::model_options(cfg));
  policy->eval();
  auto gen = at::make_generator<at::CPUGeneratorImpl>(uint64_t(stream) + 1);
  std::vector<float> obs(size_t(E * (T + 1) * D)), rew(size_t(E * T)), logp(size_t(E * T)), dist(size_t(E * T * L));
  std::vector<uint8_t> init(size_t(E * (T + 1))), term(size_t(E * T)), trunc(size_t(E * T));
  std::vector<int64_t> act(size_t(E * T));
  venv.reset(obs.data(), (T + 1) * D, init.data(), T + 1);
  auto f = torch::kFloat32;
  int64_t steps = 0;
  auto state = policy->initial_state(E);
  double t0 = now_seconds();
  while (now_seconds() - t0 < seconds) {
    for (int64_t t = 0; t < T; ++t) {
      auto o = torch::from_blob(obs.data() + t * D, {E, D}, {(T + 1) * D, 1}, f);
      auto it = torch::from_blob(init.data() + t, {E}, {T + 1}, torch::kUInt8).to(f);
      auto out = policy->step(o, it, state);
      auto a = models::sample(spec, out.dist, gen);
      torch::from_blob(logp.data() + t, {E}, {T}, f).copy_(models::log_prob(spec, out.dist, a));
      torch::from_blob(dist.data() + t * L, {E, L}, {T * L, 1}, f).copy_(out.dist);
      torch::from_blob(act.data() + t, {E}, {T}, torch::kInt64).copy_(a);
      auto ac = a.contiguous();
      venv.step(ac.data_ptr<int64_t>(), nullptr,
                {obs.data() + (t + 1) * D, (T + 1) * D, init.data() + t + 1, T + 1, rew.data() + t, term.data() + t,
                 trunc.data() + t, T});
    }
    for (int64_t e = 0; e < E; ++e) std::copy_n(obs.data() + (e * (T + 1) + T) * D, D, obs.data() + e * (T + 1) * D);
    steps += E * T;
    venv.take_finished();
  }
  double dt = now_seconds() - t0;
  fmt::print("{{\"env\": \"{}\", \"num_envs\": {}, \"steps\": {}, \"seconds\": {:.3f}, \"sps\": {:.1f}}}\n", cfg.env.id,
             E, steps, dt, double(steps) / dt);
  return 0;
}
