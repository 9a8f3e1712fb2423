// The native MinAtar games (envs/minatar.h) against the minatar package, step by step.
//
//   minatar_replay < TRACE          replays a trace written by minatar_parity.py: the package's own
//                                   random draws go into the C++ game in the order the package made
//                                   them, and every reset and step must give the same observation,
//                                   reward and terminal flag, with every draw used and none missing.
//   minatar_replay --random GAME EPISODES SEED
//                                   plays uniform random actions with mpirl's own generator and
//                                   prints each episode's return (one per line).
//
// Trace lines: "game NAME"; "d r U" (a rand() that returned U) or "d i LO HI V" (randint(LO, HI)
// that returned V), each before the reset or step that drew it; "reset OBS"; "step A R T OBS"
// (A an index into the minimal action set, OBS the package's state as C*100 '0'/'1' characters,
// channels first).
#include <cstdio>
#include <deque>
#include <iostream>
#include <random>
#include <sstream>
#include <string>

#include "envs/minatar.h"

using namespace mpirl::envs;

namespace {

struct Draw {
  char kind;
  long long lo, hi;
  double value;
};

long line_no = 0;
std::string game;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "minatar_replay: %s, trace line %ld: %s\n", game.c_str(), line_no, what.c_str());
  std::exit(1);
}

class ReplayRng final : public minatar::Rng {
 public:
  std::deque<Draw> q;
  double rand() override {
    if (q.empty() || q.front().kind != 'r') fail(q.empty() ? "the port drew rand(), the package drew nothing more"
                                                           : "the port drew rand(), the package randint()");
    double v = q.front().value;
    q.pop_front();
    return v;
  }
  int64_t randint(int64_t lo, int64_t hi) override {
    if (q.empty() || q.front().kind != 'i' || q.front().lo != lo || q.front().hi != hi) {
      std::ostringstream m;
      m << "the port drew randint(" << lo << ", " << hi << "), the package ";
      if (q.empty()) m << "nothing more";
      else if (q.front().kind == 'r') m << "rand()";
      else m << "randint(" << q.front().lo << ", " << q.front().hi << ")";
      fail(m.str());
    }
    auto v = int64_t(q.front().value);
    q.pop_front();
    return v;
  }
};

std::string obs_string(const std::vector<uint8_t>& o) {
  std::string s(o.size(), '0');
  for (size_t i = 0; i < o.size(); ++i) {
    if (o[i] != 0 && o[i] != 255) fail("an observation byte is neither 0 nor 255");
    s[i] = o[i] ? '1' : '0';
  }
  return s;
}

void check_obs(const std::vector<uint8_t>& o, const std::string& want) {
  std::string got = obs_string(o);
  if (got == want) return;
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  std::ostringstream m;
  if (got.size() != want.size()) m << "observation size " << got.size() << ", package " << want.size();
  else m << "observations differ first at channel " << i / 100 << ", y " << i % 100 / 10 << ", x " << i % 10
         << " (port " << got[i] << ", package " << want[i] << ")";
  fail(m.str());
}

int replay() {
  ReplayRng rng;
  std::unique_ptr<MinAtarEnv> env;
  std::vector<uint8_t> obs;
  long steps = 0, resets = 0, draws = 0;
  double total_reward = 0;
  std::string line;
  while (std::getline(std::cin, line)) {
    ++line_no;
    std::istringstream in(line);
    std::string kind;
    in >> kind;
    if (kind == "game") {
      in >> game;
      env = std::make_unique<MinAtarEnv>(game, 0, MinAtarOptions{}, &rng);
      obs.assign(size_t(env->spec().obs_size()), 0);
    } else if (kind == "d") {
      Draw d{};
      in >> d.kind;
      if (d.kind == 'i') in >> d.lo >> d.hi;
      in >> d.value;
      if (!in) fail("a malformed draw");
      rng.q.push_back(d);
      ++draws;
    } else if (kind == "reset" || kind == "step") {
      if (!env) fail("no game line before the first reset");
      std::string want;
      if (kind == "reset") {
        in >> want;
        env->reset(obs.data());
        ++resets;
      } else {
        long a = 0;
        double r = 0;
        int t = 0;
        in >> a >> r >> t >> want;
        if (!in || a < 0 || a >= env->spec().num_actions) fail("a malformed step");
        Action act;
        act.index = a;
        StepResult got = env->step(act, obs.data());
        if (got.reward != float(r)) fail("reward " + std::to_string(got.reward) + ", package " + std::to_string(r));
        if (got.terminated != bool(t)) fail(std::string("terminal ") + (got.terminated ? "true" : "false") + ", package " + (t ? "true" : "false"));
        total_reward += r;
        ++steps;
      }
      if (!rng.q.empty()) fail(std::to_string(rng.q.size()) + " of the package's draws left unused");
      check_obs(obs, want);
    } else if (!kind.empty()) {
      fail("unknown line kind '" + kind + "'");
    }
  }
  std::printf("%s: %ld resets, %ld steps, %ld draws, total reward %.0f: every observation, reward, terminal flag and draw the same\n",
              game.c_str(), resets, steps, draws, total_reward);
  return 0;
}

int random_play(const std::string& g, long episodes, uint64_t seed) {
  MinAtarEnv env(g, seed);
  std::vector<uint8_t> obs(size_t(env.spec().obs_size()));
  std::mt19937_64 pick(seed ^ 0x5eed);
  std::uniform_int_distribution<int64_t> u(0, env.spec().num_actions - 1);
  for (long e = 0; e < episodes; ++e) {
    env.reset(obs.data());
    double ret = 0;
    for (;;) {
      Action a;
      a.index = u(pick);
      StepResult r = env.step(a, obs.data());
      ret += r.reward;
      if (r.terminated) break;
    }
    std::printf("%.0f\n", ret);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc == 5 && std::string(argv[1]) == "--random") return random_play(argv[2], std::stol(argv[3]), std::stoull(argv[4]));
    if (argc == 1) return replay();
    std::fprintf(stderr, "usage: minatar_replay < TRACE | minatar_replay --random GAME EPISODES SEED\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "minatar_replay: %s\n", e.what());
  }
  return 2;
}
