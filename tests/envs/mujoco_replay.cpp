// The native MuJoCo envs (envs/mujoco_locomotion.h) against gymnasium's, step by step.
//
//   mujoco_replay < TRACE       replays a trace written by mujoco_parity.py: each episode starts
//                               from gymnasium's state after its reset (qpos, qvel), then takes
//                               gymnasium's actions; every observation, reward, terminated and
//                               truncated flag must agree. Prints one summary line per env.
//   mujoco_replay --resets ID N SEED
//                               the state (qpos, qvel) after each of N resets of one native env
//                               with mpirl's own noise, one per line, for the noise check.
//   mujoco_replay --speed ID N  steps one native env N times with a fixed action (resetting where
//                               an episode ends) and prints steps/s: bench/mujoco_speed.sh's
//                               "the env alone" beside gymnasium's.
//
// Trace lines (whitespace-separated numbers, written with Python's repr):
//   "env ID"
//   "bounds LOW[action_dim] HIGH[action_dim]"   gymnasium's action space
//   "health QPOS[nq] QVEL[nv] H"                gymnasium's is_healthy (0/1) in that state
//   "reset QPOS[nq] QVEL[nv] OBS[obs_dim]"
//   "step ACTION[action_dim] REWARD TERMINATED TRUNCATED OBS[obs_dim]"
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "envs/mujoco_locomotion.h"

using namespace mpirl::envs;

namespace {

long line_no = 0;
std::string env_id;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "mujoco_replay: %s, trace line %ld: %s\n", env_id.c_str(), line_no, what.c_str());
  std::exit(1);
}

std::vector<double> read(std::istringstream& in, size_t n, const char* what) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i)
    if (!(in >> v[i])) fail(std::string("expected ") + std::to_string(n) + " numbers of " + what + ", got " + std::to_string(i));
  return v;
}

// A line with more numbers than the native env's sizes take (a longer observation in gymnasium).
void expect_end(std::istringstream& in) {
  in >> std::ws;
  if (!in.eof()) fail("more numbers on the line than the native env's sizes take");
}

// An observation must be the float32 of gymnasium's double within 4 units in its last place (the
// physics is the same library on the same state, so only a different order of summation may
// differ); a reward within a relative 1e-6 (numpy sums the control cost of a float32 action in
// float32, mpirl in double).
double obs_tol(double ref) {
  float f = float(std::fabs(ref));
  return 4.0 * (double(std::nextafter(f, INFINITY)) - double(f));
}

struct Summary {
  std::string id;
  long episodes = 0, steps = 0, terminated = 0, truncated = 0, health = 0;
  double max_obs_err = 0, max_reward_err = 0;
};

void print(const Summary& s) {
  if (s.id.empty()) return;
  std::printf("%s: %ld episodes, %ld steps (%ld terminated, %ld truncated), largest observation error %.3g, "
              "largest reward error %.3g; %ld health checks\n", s.id.c_str(), s.episodes, s.steps, s.terminated,
              s.truncated, s.max_obs_err, s.max_reward_err, s.health);
}

int replay() {
  std::unique_ptr<MujocoLocomotion> env;
  std::vector<float> obs;
  Summary sum;
  bool in_episode = false;
  auto compare_obs = [&](const std::vector<double>& ref, const char* when) {
    for (size_t i = 0; i < ref.size(); ++i) {
      double err = std::fabs(double(obs[i]) - double(float(ref[i])));
      sum.max_obs_err = std::max(sum.max_obs_err, err);
      if (!(err <= obs_tol(ref[i])))
        fail(std::string(when) + ": observation[" + std::to_string(i) + "] is " + std::to_string(obs[i]) +
             ", gymnasium's " + std::to_string(ref[i]));
    }
  };
  std::string line;
  while (std::getline(std::cin, line)) {
    ++line_no;
    std::istringstream in(line);
    std::string kind;
    in >> kind;
    if (kind == "env") {
      print(sum);
      in >> env_id;
      env = std::make_unique<MujocoLocomotion>(env_id, 0);
      obs.assign(size_t(env->spec().obs_size()), 0.f);
      sum = Summary{env_id};
      in_episode = false;
    } else if (kind == "bounds") {
      if (!env) fail("bounds before env");
      auto lo = read(in, size_t(env->spec().action_dim), "the lower bounds");
      auto hi = read(in, size_t(env->spec().action_dim), "the upper bounds");
      expect_end(in);
      for (size_t i = 0; i < lo.size(); ++i)
        if (env->spec().action_low[i] != float(lo[i]) || env->spec().action_high[i] != float(hi[i]))
          fail("action bound " + std::to_string(i) + " is [" + std::to_string(env->spec().action_low[i]) + ", " +
               std::to_string(env->spec().action_high[i]) + "], gymnasium's [" + std::to_string(lo[i]) + ", " +
               std::to_string(hi[i]) + "]");
    } else if (kind == "health") {
      if (!env) fail("health before env");
      auto qpos = read(in, size_t(env->nq()), "qpos");
      auto qvel = read(in, size_t(env->nv()), "qvel");
      auto h = read(in, 1, "is_healthy");
      expect_end(in);
      bool ours = env->healthy_at(qpos.data(), qvel.data());
      if (ours != (h[0] != 0)) fail("healthy " + std::to_string(ours) + ", gymnasium's " + std::to_string(h[0] != 0));
      ++sum.health;
      in_episode = false;
    } else if (kind == "reset") {
      if (!env) fail("reset before env");
      auto qpos = read(in, size_t(env->nq()), "qpos");
      auto qvel = read(in, size_t(env->nv()), "qvel");
      auto ref = read(in, obs.size(), "the observation");
      expect_end(in);
      env->reset_to(qpos.data(), qvel.data(), obs.data());
      compare_obs(ref, "reset");
      ++sum.episodes;
      in_episode = true;
    } else if (kind == "step") {
      if (!in_episode) fail("step outside an episode (after it ended, or before a reset)");
      auto a64 = read(in, size_t(env->spec().action_dim), "the action");
      std::vector<float> a(a64.begin(), a64.end());
      auto rtt = read(in, 3, "reward, terminated, truncated");
      auto ref = read(in, obs.size(), "the observation");
      expect_end(in);
      StepResult r = env->step(Action{0, a.data()}, obs.data());
      ++sum.steps;
      std::string at = "step " + std::to_string(sum.steps);
      double rerr = std::fabs(double(r.reward) - rtt[0]);
      sum.max_reward_err = std::max(sum.max_reward_err, rerr);
      if (!(rerr <= 1e-6 * std::max(1.0, std::fabs(rtt[0]))))
        fail(at + ": reward " + std::to_string(r.reward) + ", gymnasium's " + std::to_string(rtt[0]));
      if (r.terminated != (rtt[1] != 0))
        fail(at + ": terminated " + std::to_string(r.terminated) + ", gymnasium's " + std::to_string(rtt[1] != 0));
      if (r.truncated != (rtt[2] != 0 && rtt[1] == 0))
        fail(at + ": truncated " + std::to_string(r.truncated) + ", gymnasium's " + std::to_string(rtt[2] != 0));
      compare_obs(ref, at.c_str());
      sum.terminated += r.terminated;
      sum.truncated += r.truncated;
      if (r.terminated || r.truncated) in_episode = false;
    } else if (!kind.empty()) {
      fail("unknown line kind '" + kind + "'");
    }
  }
  print(sum);
  return 0;
}

int resets(const std::string& id, long n, uint64_t seed) {
  MujocoLocomotion env(id, seed);
  std::vector<float> obs(size_t(env.spec().obs_size()));
  for (long k = 0; k < n; ++k) {
    env.reset(obs.data());
    std::vector<double> q = env.state();
    for (size_t i = 0; i < q.size(); ++i) std::printf(i ? " %.17g" : "%.17g", q[i]);
    std::printf("\n");
  }
  return 0;
}

int speed(const std::string& id, long n) {
  MujocoLocomotion env(id, 0);
  std::vector<float> obs(size_t(env.spec().obs_size()));
  std::vector<float> a(size_t(env.spec().action_dim));
  for (size_t i = 0; i < a.size(); ++i) a[i] = 0.5f * env.spec().action_high[i];
  env.reset(obs.data());
  auto t0 = std::chrono::steady_clock::now();
  for (long k = 0; k < n; ++k) {
    StepResult r = env.step(Action{0, a.data()}, obs.data());
    if (r.terminated || r.truncated) env.reset(obs.data());
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%.0f\n", double(n) / s);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc == 5 && std::string(argv[1]) == "--resets") return resets(argv[2], std::atol(argv[3]), std::strtoull(argv[4], nullptr, 10));
    if (argc == 4 && std::string(argv[1]) == "--speed") return speed(argv[2], std::atol(argv[3]));
    if (argc == 1) return replay();
    std::fprintf(stderr, "usage: mujoco_replay < TRACE | mujoco_replay --resets ID N SEED | mujoco_replay --speed ID N\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mujoco_replay: %s\n", e.what());
    return 1;
  }
}
