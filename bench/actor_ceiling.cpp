// The env + inference ceiling of one actor, with no MPI: the actor's per-step work (models::Acting:
// the policy's distribution head under InferenceMode, sampling, log-prob, written into an env-major
// rollout, then the env step) in a loop, for --seconds. --generic runs the per-step torch path actors
// used before models/acting.h (bench/acting.sh compares the two in one run).
// --env-only drops the policy (uniform random actions): the env's own ceiling, the first column
// of Sample Factory's table. Prints one JSON line with the steps per second. bench/e2e_throughput.sh
// and bench/atari_throughput.sh run one per actor rank.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <torch/torch.h>

#include "envs/registry.h"
#include "envs/vector_env.h"
#include "models/acting.h"
#include "models/policy.h"
#include "core/config.h"
#include "comm/transport.h"

int main(int argc, char** argv) {
  CLI::App app{"env + local inference ceiling of one actor (no MPI)"};
  std::vector<std::string> sets;
  double seconds = 10;
  int stream = 0;
  bool env_only = false, generic = false;
  app.add_option("--set", sets, "config override section.key=value (as mpirl train)")->take_all();
  app.add_option("--seconds", seconds, "duration");
  app.add_option("--stream", stream, "seed stream (one per process)");
  app.add_flag("--env-only", env_only, "no policy: uniform random actions (the env's own ceiling)");
  app.add_flag("--generic", generic,
               "baseline: Policy::step (value head included) + torch sampling and log_prob, as actors ran before "
               "models/acting.h");
  CLI11_PARSE(app, argc, argv);
  using namespace mpirl;
  Config cfg = load_config("", sets);
  torch::set_num_threads(cfg.actor.threads);
  c10::InferenceMode inference;  // as the actor rank
  const int64_t E = cfg.env.num_envs, T = cfg.actor.rollout_len;
  auto venv_ptr = envs::make_vector_env(cfg, int(E), envs::mix_seed(cfg.run.seed, uint64_t(stream)));
  envs::VectorEnv& venv = *venv_ptr;
  const auto& spec = venv.spec();
  const int64_t D = spec.obs_size(), OB = spec.obs_bytes(), L = spec.dist_size(), A = spec.action_size();
  models::Policy policy(spec, models::model_options(cfg));
  policy->eval();
  auto gen = at::make_generator<at::CPUGeneratorImpl>(uint64_t(stream) + 1);
  models::Acting acting(policy, E, uint64_t(stream) + 1);  // exactly the actor's per-step work
  std::vector<uint8_t> obs(size_t(E * (T + 1) * OB));
  std::vector<float> rew(size_t(E * T)), logp(size_t(E * T)), dist(size_t(E * T * L));
  std::vector<uint8_t> init(size_t(E * (T + 1))), term(size_t(E * T)), trunc(size_t(E * T));
  std::vector<int64_t> act_d(size_t(E * T));
  std::vector<float> act_b(size_t(E * T * A));
  auto row = [&](int64_t e, int64_t t) { return obs.data() + (e * (T + 1) + t) * OB; };
  venv.reset(row(0, 0), (T + 1) * D, init.data(), T + 1);
  // Random actions for --env-only: uniform over Discrete(n), or over the Box bounds.
  auto uniform = torch::zeros({E, spec.discrete ? spec.num_actions : 2 * A});
  if (!spec.discrete) uniform.narrow(1, A, A).fill_(0.5);  // mean 0, std e^0.5 around the middle, clipped by the env
  int64_t steps = 0;
  auto state = policy->initial_state(E);  // --generic
  double t0 = now_seconds();
  while (now_seconds() - t0 < seconds) {
    for (int64_t t = 0; t < T; ++t) {
      const int64_t* ad = nullptr;
      const float* ab = nullptr;
      torch::Tensor a;
      if (env_only) {
        a = models::sample(spec, uniform, gen).contiguous();
        ad = spec.discrete ? a.data_ptr<int64_t>() : nullptr;
        ab = spec.discrete ? nullptr : a.data_ptr<float>();
      } else if (generic) {
        auto o = models::obs_rows(spec, row(0, t), E, (T + 1) * D);
        auto it = torch::from_blob(init.data() + t, {E}, {T + 1}, torch::kUInt8).to(torch::kFloat32);
        auto out = policy->step(o, it, state);
        a = models::sample(spec, out.dist, gen);
        torch::from_blob(logp.data() + t, {E}, {T}, torch::kFloat32).copy_(models::log_prob(spec, out.dist, a));
        torch::from_blob(dist.data() + t * L, {E, L}, {T * L, 1}, torch::kFloat32).copy_(out.dist);
        a = a.contiguous();
        ad = spec.discrete ? a.data_ptr<int64_t>() : nullptr;
        ab = spec.discrete ? nullptr : a.data_ptr<float>();
      } else {
        acting.step(models::obs_rows(spec, row(0, t), E, (T + 1) * D), init.data() + t, T + 1,
                    {dist.data() + t * L, T * L, logp.data() + t, T});
        // the actor's copy of the actions into its env-major rollout
        acting.write_actions(spec.discrete ? static_cast<void*>(act_d.data()) : act_b.data(), t, T);
        ad = spec.discrete ? acting.discrete_actions() : nullptr;
        ab = spec.discrete ? nullptr : acting.box_actions();
      }
      venv.step(ad, ab, {row(0, t + 1), (T + 1) * D, init.data() + t + 1, T + 1, rew.data() + t, term.data() + t,
                         trunc.data() + t, T});
    }
    for (int64_t e = 0; e < E; ++e) std::memcpy(row(e, 0), row(e, T), size_t(OB));
    steps += E * T;
    venv.take_finished();
  }
  double dt = now_seconds() - t0;
  fmt::print("{{\"env\": \"{}\", \"num_envs\": {}, \"env_only\": {}, \"generic\": {}, \"steps\": {}, \"seconds\": {:.3f}, \"sps\": {:.1f}}}\n",
             cfg.env.id, E, env_only ? "true" : "false", generic ? "true" : "false", steps, dt, double(steps) / dt);
  return 0;
}
