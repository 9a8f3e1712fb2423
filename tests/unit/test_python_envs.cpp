// Python envs in the embedded interpreter (envs/python): gym:CartPole-v1 against the built-in
// CartPole, episode boundaries of a scripted py: env in actor-shaped rollouts (no auto-reset step
// anywhere), refusals at start and errors mid-run.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "core/error.h"
#include "envs/builtin.h"
#include "envs/python/py_vector_env.h"
#include "envs/registry.h"

using namespace mpirl;
using namespace mpirl::envs;

namespace {
void add_test_module_path() {
  static bool done = [] {
    python_exec("import sys; sys.path.insert(0, '" MPIRL_TEST_PY_DIR "')");
    return true;
  }();
  (void)done;
}

// Actor-shaped buffers: obs [E, T+1, D], is_init [E, T+1], scalars [E, T].
struct Rollout {
  int E, T;
  int64_t D;
  std::vector<float> obs, rew;
  std::vector<uint8_t> init, term, trunc;
  Rollout(int e, int t, int64_t d)
      : E(e), T(t), D(d), obs(size_t(e * (t + 1) * d)), rew(size_t(e * t)), init(size_t(e * (t + 1))),
        term(size_t(e * t)), trunc(size_t(e * t)) {}
  StepOutputs at(int t) {
    return {obs.data() + (t + 1) * D, (T + 1) * D, init.data() + t + 1, T + 1,
            rew.data() + t, term.data() + t, trunc.data() + t, T};
  }
  const float* o(int e, int t) const { return obs.data() + (e * (T + 1) + t) * D; }
  // The last observation of a rollout is the first of the next (as the actor's carry_over).
  void carry_to(Rollout& next) const {
    for (int e = 0; e < E; ++e) {
      std::copy(o(e, T), o(e, T) + D, next.obs.data() + e * (T + 1) * D);
      next.init[size_t(e * (T + 1))] = init[size_t(e * (T + 1) + T)];
    }
  }
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(PythonEnvs, GymCartPoleMatchesBuiltinCartPoleStepForStep) {
  auto cp = std::make_unique<CartPole>(0);
  CartPole* builtin = cp.get();
  std::vector<std::unique_ptr<Env>> one;
  one.push_back(std::move(cp));
  BuiltinVectorEnv b(std::move(one));
  PyVectorEnv g("gym:CartPole-v1", 1, 3);
  ASSERT_EQ(g.spec().obs_size(), 4);
  ASSERT_EQ(g.spec().num_actions, 2);
  ASSERT_EQ(g.spec().max_episode_steps, 500);
  std::mt19937_64 rng(7);
  // Before every step the gym env gets the built-in's exact state (float64, printed round-trip):
  // both then take one transition from the same state. (Not synced, the two drift apart by the
  // last bit after a few hundred steps: numpy's and libm's sin/cos differ in the last ulp.)
  auto sync = [&] {
    const double* s = builtin->state;
    g.exec(fmt::format("venv.envs[0].unwrapped.state = np.array([{:.17g}, {:.17g}, {:.17g}, {:.17g}])", s[0], s[1], s[2], s[3]));
  };
  Rollout rb(1, 1, 4), rg(1, 1, 4);
  b.reset(rb.obs.data(), 2 * 4, rb.init.data(), 2);
  g.reset(rg.obs.data(), 2 * 4, rg.init.data(), 2);
  int episodes = 0, terminations = 0, truncations = 0, steps = 0;
  // Alternate a balancing controller (reaches the 500-step truncation) with random actions.
  for (; steps < 6000 && (episodes < 20 || truncations < 2); ++steps) {
    const float* o = rb.o(0, 1);
    int64_t a = episodes % 3 == 0 ? int64_t(o[2] + 0.5f * o[3] > 0) : int64_t(rng() & 1);
    sync();
    b.step(&a, nullptr, rb.at(0));
    g.step(&a, nullptr, rg.at(0));
    ASSERT_EQ(rb.rew[0], rg.rew[0]) << "step " << steps;
    ASSERT_EQ(rb.term[0], rg.term[0]) << "step " << steps;
    ASSERT_EQ(rb.trunc[0], rg.trunc[0]) << "step " << steps;
    ASSERT_EQ(rb.init[1], rg.init[1]);
    ASSERT_EQ(b.ended()[0], g.ended()[0]);
    if (b.ended()[0]) {
      for (int i = 0; i < 4; ++i) ASSERT_EQ(b.final_obs(0)[i], g.final_obs(0)[i]) << "final obs, step " << steps;
      ++episodes, terminations += rb.term[0], truncations += rb.trunc[0];  // the reset states differ
    } else {
      for (int i = 0; i < 4; ++i) ASSERT_EQ(rb.o(0, 1)[i], rg.o(0, 1)[i]) << "obs " << i << ", step " << steps;
    }
  }
  EXPECT_GE(terminations, 10);
  EXPECT_GE(truncations, 2);
  auto fb = b.take_finished(), fg = g.take_finished();
  ASSERT_EQ(fb.size(), fg.size());
  for (size_t i = 0; i < fb.size(); ++i) EXPECT_EQ(fb[i].length, fg[i].length);
}

// In every rollout, each step is a real transition: either the episode goes on (step + 1) or a
// new one starts with is_init; terminated/truncated are set exactly on an episode's last step.
void check_scripted(const char* mode) {
  add_test_module_path();
  Config cfg;
  cfg.env.id = "py:mpirl_test_envs:scripted";
  cfg.env.kwargs = fmt::format("{{\"autoreset_mode\": \"{}\"}}", mode);
  const int E = 3, T = 7;
  auto v = make_vector_env(cfg, E, 11);
  ASSERT_EQ(v->spec().obs_size(), 4);
  ASSERT_EQ(v->spec().max_episode_steps, 2);
  Rollout r(E, T, 4), next(E, T, 4);
  v->reset(r.obs.data(), (T + 1) * 4, r.init.data(), T + 1);
  int ends = 0;
  for (int k = 0; k < 6; ++k) {
    for (int t = 0; t < T; ++t) v->step(std::vector<int64_t>(E, 0).data(), nullptr, r.at(t));
    for (int e = 0; e < E; ++e)
      for (int t = 0; t < T; ++t) {
        const float *a = r.o(e, t), *b = r.o(e, t + 1);
        const int episode = int(a[1]), step = int(a[2]), len = 2 + (e + episode) % 4;
        const bool end = step + 1 == len;
        SCOPED_TRACE(fmt::format("{} rollout {} env {} t {}: episode {} step {}", mode, k, e, t, episode, step));
        EXPECT_EQ(a[0], float(e));
        EXPECT_EQ(r.rew[size_t(e * T + t)], float(step + 1));  // never an auto-reset step's 0
        EXPECT_EQ(r.term[size_t(e * T + t)], end && episode % 2 == 0);
        EXPECT_EQ(r.trunc[size_t(e * T + t)], end && episode % 2 == 1);
        EXPECT_EQ(r.init[size_t(e * (T + 1) + t + 1)], end);
        if (end) {
          EXPECT_EQ(b[1], float(episode + 1));
          EXPECT_EQ(b[2], 0.f);
          ++ends;
        } else {
          EXPECT_EQ(b[1], float(episode));
          EXPECT_EQ(b[2], float(step + 1));
        }
      }
    // final_obs of the last step's ended envs: the episode's last state
    for (int e = 0; e < E; ++e)
      if (v->ended()[e]) {
        EXPECT_EQ(v->final_obs(e)[1], r.o(e, T)[1] - 1);
        EXPECT_EQ(v->final_obs(e)[2], float(2 + (e + int(r.o(e, T)[1]) - 1) % 4));
      }
    r.carry_to(next);
    std::swap(r, next);
  }
  EXPECT_GT(ends, 20);
  EXPECT_EQ(int(v->take_finished().size()), ends);
}

TEST(PythonEnvs, ScriptedEpisodesSameStepAutoreset) { check_scripted("SameStep"); }
TEST(PythonEnvs, ScriptedEpisodesDisabledAutoresetResetByMask) { check_scripted("Disabled"); }

TEST(PythonEnvs, RefusedAtStartNamingTheEnvAndWhatIsWrong) {
  add_test_module_path();
  Config cfg;
  cfg.env.id = "py:mpirl_test_envs:scripted";
  cfg.env.kwargs = R"({"autoreset_mode": "NextStep"})";
  auto m = error_of([&] { env_spec(cfg); });
  EXPECT_NE(m.find("env.id"), std::string::npos) << m;
  EXPECT_NE(m.find("NextStep"), std::string::npos) << m;
  cfg.env.kwargs = R"({"obs_space": "dict"})";
  m = error_of([&] { env_spec(cfg); });
  EXPECT_NE(m.find("py:mpirl_test_envs:scripted"), std::string::npos) << m;
  EXPECT_NE(m.find("unsupported observation space Dict"), std::string::npos) << m;
  EXPECT_THROW(python_env_spec("gym:Blackjack-v1"), ConfigError);
  EXPECT_THROW(python_env_spec("gym:NoSuchEnv-v0"), ConfigError);
  EXPECT_THROW(python_env_spec("py:no_such_module:f"), ConfigError);
  EXPECT_THROW(python_env_spec("py:missing_factory"), ConfigError);
}

TEST(PythonEnvs, NanRewardPythonExceptionAndWrongShapeNameTheEnvAndStep) {
  add_test_module_path();
  const int E = 3, T = 8;
  for (const char* bad : {"nan_at", "raise_at", "wrong_shape_at"}) {
    PyVectorEnv v("py:mpirl_test_envs:scripted", E, 1, fmt::format("{{\"{}\": 5, \"bad_env\": 1}}", bad));
    Rollout r(E, T, 4);
    v.reset(r.obs.data(), (T + 1) * 4, r.init.data(), T + 1);
    std::vector<int64_t> a(E, 1);
    auto m = error_of([&] {
      for (int t = 0; t < T; ++t) v.step(a.data(), nullptr, r.at(t));
    });
    SCOPED_TRACE(m);
    EXPECT_NE(m.find("py:mpirl_test_envs:scripted"), std::string::npos);
    EXPECT_NE(m.find("vector step 5"), std::string::npos);
    if (std::string(bad) == "nan_at") {
      EXPECT_NE(m.find("env index 1 returned a non-finite reward"), std::string::npos);
    } else if (std::string(bad) == "raise_at") {
      EXPECT_NE(m.find("RuntimeError: scripted failure in env 1"), std::string::npos);
    } else {
      EXPECT_NE(m.find("observations of shape (3, 5), expected (3, 4)"), std::string::npos);
    }
  }
}
