#include <gtest/gtest.h>

#include <cmath>

#include "envs/builtin.h"
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
  void reset(float* o) override { o[0] = 0; }
  StepResult step(const Action&, float* o) override {
    o[0] = std::nanf("");
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
