#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "envs/builtin.h"
#include "envs/minatar.h"
#include "envs/registry.h"
#include "envs/vector_env.h"

using namespace mpirl::envs;

// One CartPole step computed by hand from Gym's equations.
TEST(CartPole, TransitionMatchesHandComputedValues) {
  CartPole env(0);
  float obs[4];
  env.reset(obs);
  env.state[0] = 0.01, env.state[1] = -0.02, env.state[2] = 0.03, env.state[3] = 0.04;
  auto r = env.step({1, nullptr}, obs);
  // force = +10; costheta = cos(0.03), sintheta = sin(0.03)
  const double c = std::cos(0.03), s = std::sin(0.03);
  const double temp = (10.0 + 0.05 * 0.04 * 0.04 * s) / 1.1;
  const double thacc = (9.8 * s - c * temp) / (0.5 * (4.0 / 3.0 - 0.1 * c * c / 1.1));
  const double xacc = temp - 0.05 * thacc * c / 1.1;
  EXPECT_NEAR(env.state[0], 0.01 + 0.02 * -0.02, 1e-12);
  EXPECT_NEAR(env.state[1], -0.02 + 0.02 * xacc, 1e-12);
  EXPECT_NEAR(env.state[2], 0.03 + 0.02 * 0.04, 1e-12);
  EXPECT_NEAR(env.state[3], 0.04 + 0.02 * thacc, 1e-12);
  // Literal values for the same step (temp = 9.090911, thacc = -14.153436, xacc = 9.733960).
  EXPECT_NEAR(env.state[1], 0.17467920, 1e-7);
  EXPECT_NEAR(env.state[3], -0.24306872, 1e-7);
  EXPECT_FLOAT_EQ(r.reward, 1.0f);
  EXPECT_FALSE(r.terminated);
  EXPECT_FALSE(r.truncated);
  EXPECT_FLOAT_EQ(obs[1], float(env.state[1]));
}

TEST(CartPole, TerminatesPastThresholdsAndTruncatesAt500) {
  CartPole env(1);
  float obs[4];
  env.reset(obs);
  env.state[0] = 2.39, env.state[1] = 1.0, env.state[2] = 0, env.state[3] = 0;
  auto r = env.step({1, nullptr}, obs);
  EXPECT_TRUE(r.terminated);
  EXPECT_FALSE(r.truncated);
  env.reset(obs);
  StepResult last;
  int steps = 0;
  for (; steps < 500; ++steps) {
    env.state[0] = env.state[1] = env.state[2] = env.state[3] = 0;  // keep it upright
    last = env.step({steps % 2, nullptr}, obs);
    if (last.terminated || last.truncated) break;
  }
  EXPECT_EQ(steps, 499);
  EXPECT_TRUE(last.truncated);
  EXPECT_FALSE(last.terminated);
}

TEST(CartPole, DeterministicUnderSeedAndResetRange) {
  CartPole a(7), b(7), c(8);
  float oa[4], ob[4], oc[4];
  a.reset(oa), b.reset(ob), c.reset(oc);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(oa[i], ob[i]);
    EXPECT_LE(std::abs(oa[i]), 0.05f);
  }
  EXPECT_NE(oa[0], oc[0]);
}

TEST(Pendulum, StepMatchesGymEquations) {
  Pendulum env(0);
  float obs[3];
  env.reset(obs);
  env.th = 0.5, env.thdot = -0.3;
  float u = 1.5f;
  auto r = env.step({0, &u}, obs);
  double newthdot = -0.3 + (15.0 * std::sin(0.5) + 3.0 * 1.5) * 0.05;
  EXPECT_NEAR(env.thdot, newthdot, 1e-12);
  EXPECT_NEAR(env.th, 0.5 + newthdot * 0.05, 1e-12);
  EXPECT_NEAR(r.reward, -(0.25 + 0.1 * 0.09 + 0.001 * 2.25), 1e-6);
  EXPECT_NEAR(obs[0], std::cos(env.th), 1e-6);
}

TEST(Registry, UnknownIdNamesTheKnownOnes) {
  try {
    make_env("NoSuchEnv", 0);
    FAIL();
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("NoSuchEnv"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("CartPole-v1"), std::string::npos);
  }
}

TEST(VectorEnv, ResetFlagsAutoResetAndFinalObs) {
  EnvOptions o;
  o.obs_dim = 3, o.num_actions = 2, o.episode_length = 3;
  const int E = 2, T = 7;
  BuiltinVectorEnv v("Synthetic", E, 5, o);
  // env-major buffers as the actor lays them out: obs [E, T+1, 3], is_init [E, T+1], scalars [E, T]
  std::vector<float> obs(E * (T + 1) * 3), rew(E * T);
  std::vector<uint8_t> init(E * (T + 1), 9), term(E * T), trunc(E * T);
  v.reset(obs.data(), (T + 1) * 3, init.data(), T + 1);
  EXPECT_EQ(init[0], 1);
  EXPECT_EQ(init[T + 1], 1);
  int64_t acts[E] = {0, 1};
  for (int t = 0; t < T; ++t) {
    StepOutputs out{obs.data() + (t + 1) * 3, (T + 1) * 3, init.data() + t + 1, T + 1,
                    rew.data() + t, term.data() + t, trunc.data() + t, T};
    v.step(acts, nullptr, out);
    for (int e = 0; e < E; ++e) {
      bool end = (t + 1) % 3 == 0;  // episodes of 3 steps
      EXPECT_EQ(trunc[e * T + t], end) << "t=" << t;
      EXPECT_EQ(term[e * T + t], 0);
      EXPECT_EQ(init[e * (T + 1) + t + 1], end) << "t=" << t;
      EXPECT_EQ(v.ended()[e], end);
    }
  }
  auto fin = v.take_finished();
  EXPECT_EQ(fin.size(), 4u);  // 2 envs x 2 finished episodes
  for (auto& f : fin) EXPECT_EQ(f.length, 3);
  EXPECT_TRUE(v.take_finished().empty());
}

namespace {
class NanEnv final : public Env {
 public:
  NanEnv() { spec_.id = "Nan", spec_.obs_shape = {1}, spec_.num_actions = 2; }
  const EnvSpec& spec() const override { return spec_; }
  void reset(void* o) override { static_cast<float*>(o)[0] = 0; }
  StepResult step(const Action&, void* o) override {
    static_cast<float*>(o)[0] = std::nanf("");
    return {};
  }
  EnvSpec spec_;
};
}  // namespace

TEST(VectorEnv, NonFiniteObservationIsAnErrorNamingTheEnv) {
  std::vector<std::unique_ptr<Env>> envs;
  envs.push_back(std::make_unique<NanEnv>());
  BuiltinVectorEnv v(std::move(envs));
  float obs[1];
  uint8_t init[1], term[1], trunc[1];
  float rew[1];
  v.reset(obs, 1, init, 1);
  int64_t a[1] = {0};
  try {
    v.step(a, nullptr, {obs, 1, init, 1, rew, term, trunc, 1});
    FAIL() << "no error";
  } catch (const std::exception& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("'Nan'"), std::string::npos) << m;
    EXPECT_NE(m.find("non-finite observation"), std::string::npos) << m;
  }
}

// The MinAtar ports as built-in vector envs: uint8 rows at a caller's stride, 0/255 pixels, the
// reset layout of Breakout worked out by hand from the game's rules (tests/envs/minatar_parity.py
// compares every step with the package), and terminal steps' last images kept as final_obs_bytes.
TEST(VectorEnv, MinAtarBreakoutWritesUint8RowsAtTheStride) {
  const int E = 3;
  BuiltinVectorEnv v("Breakout-MinAtar", E, 7);
  const EnvSpec& sp = v.spec();
  ASSERT_TRUE(sp.obs_uint8);
  ASSERT_EQ(sp.obs_size(), 400);
  ASSERT_EQ(sp.num_actions, 3);
  const int64_t stride = 401;  // one spare byte per row, which nothing may write
  std::vector<uint8_t> obs(size_t(E * stride), 7);
  uint8_t init[E], term[E], trunc[E];
  float rew[E];
  v.reset(obs.data(), stride, init, 1);
  auto at = [&](int e, int c, int y, int x) { return obs[size_t(e * stride + (c * 10 + y) * 10 + x)]; };
  for (int e = 0; e < E; ++e) {
    EXPECT_EQ(obs[size_t(e * stride + 400)], 7) << "wrote past the row";
    int on = 0;
    for (int i = 0; i < 400; ++i) {
      uint8_t b = obs[size_t(e * stride + i)];
      EXPECT_TRUE(b == 0 || b == 255);
      on += b == 255;
    }
    EXPECT_EQ(on, 1 + 1 + 1 + 30);                    // paddle, ball, trail, 3 rows of 10 bricks
    EXPECT_EQ(at(e, 0, 9, 4), 255);                   // the paddle starts at x = 4 on the bottom row
    EXPECT_TRUE(at(e, 1, 3, 0) == 255 || at(e, 1, 3, 9) == 255);  // the ball at y = 3 on either side
    for (int x = 0; x < 10; ++x) EXPECT_EQ(at(e, 3, 1, x) & at(e, 3, 2, x) & at(e, 3, 3, x), 255);
  }
  // Play noop until every env has ended an episode (the ball misses a still paddle within a few
  // dozen steps); each ended episode's last image shows the ball on the bottom row, not the reset.
  std::vector<int> ended(E, 0);
  int64_t a[E] = {0, 0, 0};
  for (int t = 0; t < 1000 && std::count(ended.begin(), ended.end(), 0) > 0; ++t) {
    v.step(a, nullptr, {obs.data(), stride, init, 1, rew, term, trunc, 1});
    for (int e = 0; e < E; ++e) {
      EXPECT_EQ(trunc[e], 0);
      if (!term[e]) continue;
      ++ended[size_t(e)];
      const uint8_t* last = v.final_obs_bytes(e);
      int ball_row = -1;
      for (int i = 0; i < 100; ++i)
        if (last[100 + i]) ball_row = i / 10;
      EXPECT_EQ(ball_row, 9);
      EXPECT_EQ(init[e], 1);
      EXPECT_EQ(at(e, 0, 9, 4), 255);
    }
  }
  for (int e = 0; e < E; ++e) EXPECT_GT(ended[size_t(e)], 0);
}

// env.kwargs for the MinAtar ports: the sticky probability decides whether "right" moves Breakout's
// paddle (always at 0, never at 1: the repeated action is the initial noop), max_episode_steps
// truncates Freeway at exactly the cap (its own timer ends it at step 2501), the gymnax preset's
// caps, difficulty ramping off, and bad kwargs name the key. A built-in env that takes no kwargs refuses them rather than ignoring them.
TEST(MinAtar, KwargsSetStickyActionsAndTheEpisodeCap) {
  const auto paddle_x = [](double sticky) {
    EnvOptions o;
    o.kwargs = fmt::format("{{\"sticky_action_prob\": {}}}", sticky);
    auto env = make_env("Breakout-MinAtar", 3, o);
    std::vector<uint8_t> obs(400);
    env->reset(obs.data());
    for (int t = 0; t < 3; ++t) env->step({2, nullptr}, obs.data());  // minimal set n, l, r: index 2 = right
    for (int x = 0; x < 10; ++x)
      if (obs[size_t(90 + x)]) return x;
    return -1;
  };
  EXPECT_EQ(paddle_x(0.0), 7);
  EXPECT_EQ(paddle_x(1.0), 4);

  EnvOptions capped;
  capped.kwargs = R"({"sticky_action_prob": 0.0, "max_episode_steps": 5})";
  auto fw = make_env("Freeway-MinAtar", 1, capped);
  EXPECT_EQ(fw->spec().max_episode_steps, 5);
  std::vector<uint8_t> obs(size_t(fw->spec().obs_size()));
  for (int episode = 0; episode < 2; ++episode) {
    fw->reset(obs.data());
    for (int t = 1; t <= 5; ++t) {
      StepResult r = fw->step({0, nullptr}, obs.data());
      EXPECT_FALSE(r.terminated);
      EXPECT_EQ(r.truncated, t == 5) << "step " << t;
    }
  }
  EXPECT_EQ(make_env("Freeway-MinAtar", 1)->spec().max_episode_steps, 0);
  EnvOptions gymnax;
  gymnax.kwargs = R"({"preset": "gymnax"})";
  EXPECT_EQ(make_env("Freeway-MinAtar", 1, gymnax)->spec().max_episode_steps, 2500);
  EXPECT_EQ(make_env("Asterix-MinAtar", 1, gymnax)->spec().max_episode_steps, 1000);
  EXPECT_EQ(minatar_options("breakout", gymnax.kwargs).sticky_action_prob, 0.0);
  EXPECT_TRUE(minatar_options("asterix", "").difficulty_ramping);
  EXPECT_FALSE(minatar_options("asterix", R"({"difficulty_ramping": false})").difficulty_ramping);
  EnvOptions flat;
  flat.kwargs = R"({"difficulty_ramping": false})";
  EXPECT_NE(make_env("Asterix-MinAtar", 1, flat)->spec().description.find("no difficulty ramping"), std::string::npos);
  // Uncapped, Freeway's own timer ends it (terminated, not truncated) at step 2501, as the package's.
  auto own = make_env("Freeway-MinAtar", 2, EnvOptions{});
  own->reset(obs.data());
  int ended_at = 0;
  for (int t = 1; t <= 3000 && !ended_at; ++t) {
    StepResult r = own->step({0, nullptr}, obs.data());
    EXPECT_FALSE(r.truncated);
    if (r.terminated) ended_at = t;
  }
  EXPECT_EQ(ended_at, 2501);
  EXPECT_EQ(minatar_options("breakout", R"({"preset": "gymnax", "max_episode_steps": 7})").max_episode_steps, 7);

  const auto error_of = [](const std::string& id, const std::string& kw) -> std::string {
    EnvOptions o;
    o.kwargs = kw;
    try {
      make_env(id, 1, o);
    } catch (const std::exception& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(error_of("Breakout-MinAtar", R"({"sticky": 0})").find("unknown key \"sticky\""), std::string::npos);
  EXPECT_NE(error_of("Breakout-MinAtar", R"({"sticky_action_prob": 2})").find("[0, 1]"), std::string::npos);
  EXPECT_NE(error_of("Breakout-MinAtar", R"({"max_episode_steps": 1.5})").find("an integer >= 0"), std::string::npos);
  EXPECT_NE(error_of("Breakout-MinAtar", R"({"difficulty_ramping": 1})").find("true or false"), std::string::npos);
  EXPECT_NE(error_of("CartPole-v1", "}{").find("not JSON"), std::string::npos);
  EXPECT_EQ(error_of("CartPole-v1", " \r\n"), "no error");
  EXPECT_NE(error_of("Breakout-MinAtar", "[1]").find("JSON object"), std::string::npos);
  EXPECT_NE(error_of("Breakout-MinAtar", R"({"preset": "paper"})").find("expected \"gymnax\""), std::string::npos);
  EXPECT_NE(error_of("Breakout-MinAtar", "{").find("not JSON"), std::string::npos);
  EXPECT_NE(error_of("CartPole-v1", R"({"x": 1})").find("takes no keyword"), std::string::npos);
  EXPECT_EQ(error_of("CartPole-v1", "{}"), "no error");
}
