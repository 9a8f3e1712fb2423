// The library fast paths of envs/python (ale:, envpool:, minatar:) and uint8 images from a py:
// env: their specs, their pixels kept as uint8, and no auto-reset step in a rollout.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <random>

#include <fmt/format.h>

#include "core/error.h"
#include "envs/python/py_vector_env.h"

using namespace mpirl;
using namespace mpirl::envs;

namespace {
// One step's outputs for E envs, rows contiguous (obs [E, obs...] of `bytes` each).
struct Step {
  std::vector<uint8_t> obs, init, term, trunc;
  std::vector<float> rew;
  Step(int E, int64_t bytes) : obs(size_t(E * bytes)), init(size_t(E)), term(size_t(E)), trunc(size_t(E)), rew(size_t(E)) {}
  StepOutputs out(const EnvSpec& s) {
    return {obs.data(), s.obs_size(), init.data(), 1, rew.data(), term.data(), trunc.data(), 1};
  }
};
}  // namespace

// envpool would reset an ended env on the next step (reward 0, action ignored): mpirl resets it at
// once instead, so every CartPole step of a rollout is a real one with reward 1, and the episode
// lengths the env reports add up to the steps taken.
TEST(PythonFastPaths, EnvpoolCartPoleHasNoAutoResetStep) {
  const int E = 4, steps = 300;
  PyVectorEnv v("envpool:CartPole-v1", E, 0x94D049BB133111EBull);
  const auto& s = v.spec();
  ASSERT_FALSE(s.obs_uint8);
  ASSERT_EQ(s.obs_shape, std::vector<int64_t>{4});
  ASSERT_EQ(s.max_episode_steps, 500);
  Step st(E, s.obs_bytes());
  v.reset(st.obs.data(), s.obs_size(), st.init.data(), 1);
  std::mt19937 rng(3);
  std::vector<int64_t> a(E);
  int64_t finished_steps = 0, episodes = 0, rows_with_init = 0;
  for (int t = 0; t < steps; ++t) {
    for (auto& x : a) x = int64_t(rng() % 2);
    v.step(a.data(), nullptr, st.out(s));
    for (int e = 0; e < E; ++e) {
      ASSERT_EQ(st.rew[size_t(e)], 1.0f) << "a reward-0 step is envpool's auto-reset step; env " << e << " step " << t;
      ASSERT_EQ(st.init[size_t(e)], st.term[size_t(e)] | st.trunc[size_t(e)]);
      rows_with_init += st.init[size_t(e)];
      if (st.init[size_t(e)]) {  // the row holds the new episode's first observation: near 0
        const float* o = reinterpret_cast<const float*>(st.obs.data()) + e * 4;
        for (int i = 0; i < 4; ++i) EXPECT_LT(std::abs(o[i]), 0.05f);
      }
    }
    for (auto& ep : v.take_finished()) finished_steps += ep.length, ++episodes;
  }
  EXPECT_GT(episodes, 20);
  EXPECT_EQ(episodes, rows_with_init);
  EXPECT_LE(finished_steps, int64_t(E) * steps);
  EXPECT_GT(finished_steps, int64_t(E) * steps - E * 500);
}

TEST(PythonFastPaths, MinAtarAndAleImagesStayUint8) {
  {
    const int E = 3;
    PyVectorEnv v("minatar:breakout", E, 0x9E3779B97F4A7C15ull);  // 64-bit seeds, as the actors' hashes
    const auto& s = v.spec();
    ASSERT_TRUE(s.obs_uint8);
    ASSERT_EQ(s.obs_shape, (std::vector<int64_t>{4, 10, 10}));
    ASSERT_EQ(s.num_actions, 3);  // the minimal action set
    Step st(E, s.obs_bytes());
    v.reset(st.obs.data(), s.obs_size(), st.init.data(), 1);
    std::vector<int64_t> a(E, 1);
    int ended = 0;
    for (int t = 0; t < 200; ++t) {
      a[size_t(t % E)] = t % 3;
      v.step(a.data(), nullptr, st.out(s));
      for (int e = 0; e < E; ++e) {
        if (!v.ended()[size_t(e)]) continue;
        ++ended;
        // the ended episode's last frame and the new episode's first differ (the ball is lost)
        EXPECT_NE(0, std::memcmp(v.final_obs_bytes(e), st.obs.data() + e * s.obs_bytes(), size_t(s.obs_bytes())));
      }
      int lit = 0;
      for (uint8_t px : st.obs) {
        ASSERT_TRUE(px == 0 || px == 255) << int(px);
        lit += px == 255;
      }
      ASSERT_GT(lit, 0);
    }
    EXPECT_GT(ended, 5);
    EXPECT_THROW(v.final_obs(0), Error);  // the float view of uint8 observations is refused
  }
  {
    const int E = 2;
    PyVectorEnv v("ale:breakout", E, 0xBF58476D1CE4E5B9ull);
    const auto& s = v.spec();
    ASSERT_TRUE(s.obs_uint8);
    ASSERT_EQ(s.obs_shape, (std::vector<int64_t>{4, 84, 84}));
    ASSERT_EQ(s.max_episode_steps, 27000);  // 108000 frames at frame-skip 4
    Step st(E, s.obs_bytes());
    v.reset(st.obs.data(), s.obs_size(), st.init.data(), 1);
    std::vector<int64_t> a{1, 1};  // FIRE
    for (int t = 0; t < 20; ++t) v.step(a.data(), nullptr, st.out(s));
    int distinct = 0;
    std::vector<bool> seen(256);
    for (uint8_t px : st.obs) distinct += !seen[px], seen[px] = true;
    EXPECT_GT(distinct, 3) << "grey frames, not a constant image";
  }
}

TEST(PythonFastPaths, Uint8ImagesFromAPyEnvAreCopiedByteForByte) {
  python_exec("import sys; sys.path.insert(0, '" MPIRL_TEST_PY_DIR "')");
  const int E = 2;
  PyVectorEnv v("py:mpirl_test_envs:pixels", E, 0);
  const auto& s = v.spec();
  ASSERT_TRUE(s.obs_uint8);
  ASSERT_EQ(s.obs_shape, (std::vector<int64_t>{3, 12, 12}));
  Step st(E, s.obs_bytes());
  v.reset(st.obs.data(), s.obs_size(), st.init.data(), 1);
  std::vector<int64_t> a{0, 1};
  for (int t = 0; t < 5; ++t) v.step(a.data(), nullptr, st.out(s));
  // Each env's image now is pixel_image(e, its counter): every image it returned (reset, step,
  // final) counted. Env 0: episodes of 2 and 3 steps, the second ending at step 5: counters 0-2,
  // 3-6, then the reset image 7. Env 1: episodes of 3 and 4 steps: 0-3, then 4, 5, 6.
  const std::string path = fmt::format("/tmp/.mpirl-test-pixels-{}", ::getpid());
  v.exec(
      "import mpirl_test_envs as te\n"
      "assert [venv.envs[e].counter for e in range(2)] == [7, 6], [venv.envs[e].counter for e in range(2)]\n"
      "open('" + path + "', 'wb').write(np.stack([te.pixel_image(e, venv.envs[e].counter) for e in range(2)]).tobytes())\n");
  std::vector<uint8_t> expected(st.obs.size() + 1);
  FILE* f = std::fopen(path.c_str(), "rb");
  ASSERT_NE(f, nullptr);
  const size_t got = std::fread(expected.data(), 1, expected.size(), f);
  std::fclose(f);
  std::remove(path.c_str());
  ASSERT_EQ(got, st.obs.size());
  EXPECT_EQ(0, std::memcmp(expected.data(), st.obs.data(), got));
}
