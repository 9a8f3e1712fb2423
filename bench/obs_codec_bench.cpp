// Compressed pixel rollouts on real frames (issue 31): steps E envs of --env (default Atari
// Breakout through ale-py) with random actions, T steps per rollout as an actor does (frame 0 of a
// rollout is the last of the one before), and encodes each env's T+1 frames with comm/obs_codec.h
// under several options. Prints, per option: the compression ratio (raw bytes / encoded bytes),
// encode and decode time per env step, and the encode time as a share of the env's own step time
// measured in the same run. Every decode is checked bit-exact against the frames.
//   bench_obs_codec [--env ale:breakout] [--envs 8] [--T 32] [--rollouts 40] [--seed 1]
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <random>

#include "comm/obs_codec.h"
#include "core/config.h"
#include "envs/registry.h"

using namespace mpirl;

namespace {
double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
}  // namespace

int main(int argc, char** argv) {
  CLI::App app("compressed pixel observations on real frames");
  std::string env_id = "ale:breakout";
  int E = 8, T = 32, rollouts = 40, warmup = 4;
  uint64_t seed = 1;
  app.add_option("--env", env_id);
  app.add_option("--envs", E);
  app.add_option("--T", T);
  app.add_option("--rollouts", rollouts, "rollouts measured (after --warmup more)");
  app.add_option("--warmup", warmup);
  app.add_option("--seed", seed);
  CLI11_PARSE(app, argc, argv);

  Config cfg = load_config("", {fmt::format("env.id=\"{}\"", env_id), fmt::format("env.num_envs={}", E)});
  auto venv = envs::make_vector_env(cfg, E, seed);
  const auto& spec = venv->spec();
  if (!spec.obs_uint8 || spec.obs_shape.size() != 3 || !spec.discrete) {
    fmt::print(stderr, "{}: needs uint8 image observations [C, H, W] and discrete actions\n", env_id);
    return 2;
  }
  const int64_t C = spec.obs_shape[0], P = spec.obs_shape[1] * spec.obs_shape[2], FB = C * P;
  const int64_t F = T + 1;
  // Env-major rollout: env e's frames at obs[e * F * FB + t * FB].
  std::vector<uint8_t> obs(size_t(E * F * FB)), init(size_t(E * F));
  std::vector<float> reward(static_cast<size_t>(E));
  std::vector<uint8_t> term(static_cast<size_t>(E)), truncd(static_cast<size_t>(E));
  std::vector<int64_t> actions(static_cast<size_t>(E));
  std::mt19937_64 rng(seed);
  venv->reset(obs.data(), F * FB, init.data(), F);

  struct Variant {
    const char* name;
    ObsCodecOptions opts;
    double bytes = 0, enc_s = 0, dec_s = 0;
  };
  std::vector<Variant> variants{{"zstd-1", {1, false, false}},
                                {"zstd-3", {3, false, false}},
                                {"dedup + zstd-1", {1, true, false}},
                                {"dedup + delta + zstd-1", {1, true, true}},
                                {"dedup + delta + zstd-3", {3, true, true}},
                                {"dedup + delta + zstd-(-1)", {-1, true, true}}};
  std::vector<std::unique_ptr<ObsCodec>> codecs;
  for (auto& v : variants) codecs.push_back(std::make_unique<ObsCodec>(v.opts));
  std::vector<char> enc;
  std::vector<uint8_t> back(size_t(F * FB));
  double env_s = 0, raw = 0;
  int64_t steps = 0, mismatches = 0, changed = 0, nonzero = 0;
  for (int r = 0; r < warmup + rollouts; ++r) {
    const bool measured = r >= warmup;
    if (r > 0)  // frame 0 = the previous rollout's last
      for (int e = 0; e < E; ++e) {
        std::memcpy(obs.data() + size_t(e * F * FB), obs.data() + size_t((e * F + T) * FB), size_t(FB));
        init[size_t(e * F)] = init[size_t(e * F + T)];
      }
    const double t0 = now();
    for (int t = 0; t < T; ++t) {
      for (auto& a : actions) a = int64_t(rng() % uint64_t(spec.num_actions));
      envs::StepOutputs out;
      out.obs = obs.data() + size_t((t + 1) * FB);
      out.obs_stride = F * FB;
      out.is_init = init.data() + t + 1;
      out.is_init_stride = F;
      out.reward = reward.data();
      out.terminated = term.data();
      out.truncated = truncd.data();
      venv->step(actions.data(), nullptr, out);
    }
    if (!measured) continue;
    env_s += now() - t0;
    // What the frames hold: non-zero pixels, and steps whose newest plane changed.
    for (int e = 0; e < E; ++e)
      for (int t = 1; t <= T; ++t) {
        const uint8_t* cur = obs.data() + size_t((e * F + t) * FB + (C - 1) * P);
        changed += std::memcmp(cur, cur - FB, size_t(P)) != 0;
        for (int64_t i = 0; i < P; ++i) nonzero += cur[i] != 0;
      }
    steps += int64_t(T) * E;
    raw += double(E) * double(F * FB);
    for (size_t k = 0; k < variants.size(); ++k) {
      auto& v = variants[k];
      for (int e = 0; e < E; ++e) {
        const uint8_t* seq = obs.data() + size_t(e * F * FB);
        enc.clear();
        const double a = now();
        codecs[k]->encode(seq, F, C, P, enc);
        const double b = now();
        codecs[k]->decode(enc.data(), enc.size(), back.data(), F, C, P, "bench");
        const double c = now();
        v.enc_s += b - a;
        v.dec_s += c - b;
        v.bytes += double(enc.size());
        mismatches += std::memcmp(back.data(), seq, size_t(F * FB)) != 0;
      }
    }
  }
  const double env_us = 1e6 * env_s / double(steps);
  fmt::print("{}: {} envs x {} steps x {} rollouts, obs {}x{}x{} uint8 ({} KB per step), random actions\n", env_id, E,
             T, rollouts, C, spec.obs_shape[1], spec.obs_shape[2], FB / 1024.0);
  fmt::print("frames: {:.1f}% of pixels non-zero, the newest plane changed at {:.1f}% of steps\n",
             100.0 * double(nonzero) / double(steps * P), 100.0 * double(changed) / double(steps));
  fmt::print("env step (the env alone, this process): {:.1f} us per env step\n", env_us);
  fmt::print("{:<27} {:>7} {:>11} {:>11} {:>12}\n", "codec (per T+1-frame item)", "ratio", "encode us", "decode us",
             "encode/env");
  for (const auto& v : variants) {
    const double eu = 1e6 * v.enc_s / double(steps), du = 1e6 * v.dec_s / double(steps);
    fmt::print("{:<27} {:>6.1f}x {:>11.2f} {:>11.2f} {:>11.1f}%\n", v.name, raw / v.bytes, eu, du, 100 * eu / env_us);
  }
  fmt::print("decodes checked bit-exact: {} of {} differ\n", mismatches, int64_t(variants.size()) * rollouts * E);
  return mismatches == 0 ? 0 : 1;
}
