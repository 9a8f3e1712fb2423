// CNN encoders: parameter counts and feature sizes against hand-computed values for 84x84 Atari
// frames, "auto" by observation rank, refusals naming the key, and a policy over [T, B, C, H, W]
// whose gradients reach the first convolution.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/config.h"
#include "core/error.h"
#include "envs/env.h"
#include "models/encoders.h"
#include "models/policy.h"

using namespace mpirl;
using namespace mpirl::models;

namespace {
int64_t count(torch::nn::Module& m) {
  int64_t n = 0;
  for (auto& p : m.parameters()) n += p.numel();
  return n;
}
envs::EnvSpec image_spec(std::vector<int64_t> shape, int64_t actions) {
  envs::EnvSpec s;
  s.id = "test-images";
  s.obs_shape = std::move(shape);
  s.discrete = true;
  s.num_actions = actions;
  return s;
}
}  // namespace

TEST(Encoders, NatureCnnMatchesTheHandCount) {
  ConvEncoder e(std::string("nature_cnn"), std::vector<int64_t>{4, 84, 84});
  // conv 4->32 8x8: 8224; 32->64 4x4: 32832; 64->64 3x3: 36928; 84 -> 20 -> 9 -> 7: 64*7*7 = 3136 -> 512.
  EXPECT_EQ(count(*e), 8224 + 32832 + 36928 + (3136 * 512 + 512));
  EXPECT_EQ(e->out_size(), 512);
  auto y = e->forward(torch::rand({3, 4, 84, 84}));
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{3, 512}));
  EXPECT_GE(y.min().item<float>(), 0.f);  // ends in a ReLU
}

TEST(Encoders, ImpalaCnnMatchesTheHandCount) {
  ConvEncoder e(std::string("impala_cnn"), std::vector<int64_t>{4, 84, 84});
  // Stages 4->16, 16->32, 32->32: a conv each plus four 3x3 convs in two residual blocks;
  // 84 -> 42 -> 21 -> 11 after the pools: 32*11*11 = 3872 -> 256.
  const int64_t s1 = (4 * 16 * 9 + 16) + 4 * (16 * 16 * 9 + 16);
  const int64_t s2 = (16 * 32 * 9 + 32) + 4 * (32 * 32 * 9 + 32);
  const int64_t s3 = (32 * 32 * 9 + 32) + 4 * (32 * 32 * 9 + 32);
  EXPECT_EQ(count(*e), s1 + s2 + s3 + (3872 * 256 + 256));
  EXPECT_EQ(e->forward(torch::rand({2, 4, 84, 84})).sizes(), (std::vector<int64_t>{2, 256}));
}

TEST(Encoders, MinAtarCnnMatchesTheHandCount) {
  ConvEncoder e(std::string("minatar_cnn"), std::vector<int64_t>{4, 10, 10});
  // conv 4->16 3x3 without padding: 10x10 -> 8x8, so 16*8*8 = 1024 -> 128 (kenjyoung/MinAtar dqn.py).
  EXPECT_EQ(count(*e), (4 * 16 * 9 + 16) + (1024 * 128 + 128));
  EXPECT_EQ(e->out_size(), 128);
  auto y = e->forward(torch::rand({5, 4, 10, 10}));
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{5, 128}));
  EXPECT_GE(y.min().item<float>(), 0.f);
}

TEST(Encoders, AutoPicksByRankAndRefusalsNameTheKey) {
  EXPECT_EQ(resolve_encoder("auto", {4, 84, 84}), "nature_cnn");
  EXPECT_EQ(resolve_encoder("auto", {8}), "mlp");
  EXPECT_EQ(resolve_encoder("auto", {4, 10, 10}), "impala_cnn");  // MinAtar: too small for the Nature CNN
  EXPECT_EQ(resolve_encoder("impala_cnn", {3, 10, 10}), "impala_cnn");
  for (auto [enc, shape] : std::vector<std::pair<std::string, std::vector<int64_t>>>{
           {"nature_cnn", {64}}, {"impala_cnn", {4, 84}}, {"nature_cnn", {1, 10, 10}}, {"minatar_cnn", {4, 2, 10}}}) {
    try {
      resolve_encoder(enc, shape);
      ADD_FAILURE() << enc << " accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("model.encoder"), std::string::npos) << e.what();
    }
  }
  Config cfg = load_config("", {"model.encoder=\"nature_cnn\""});  // CartPole: flat observations
  EXPECT_THROW(validate_model_config(cfg, image_spec({4}, 2)), ConfigError);
}

TEST(Encoders, PolicyUnrollsImagesAndGradientsReachTheFirstConv) {
  for (const char* enc : {"nature_cnn", "impala_cnn", "minatar_cnn"}) {
    SCOPED_TRACE(enc);
    ModelOptions o;
    o.encoder = enc;
    o.core = "lru";
    o.core_size = 16;
    o.core_state = 4;
    auto spec = image_spec({2, 40, 40}, 3);
    Policy p(spec, o);
    const int64_t T = 3, B = 2;
    auto out = p->unroll(torch::rand({T + 1, B, 2, 40, 40}), torch::zeros({T + 1, B}), p->initial_state(B));
    EXPECT_EQ(out.dist.sizes(), (std::vector<int64_t>{T + 1, B, 3}));
    EXPECT_EQ(out.value.sizes(), (std::vector<int64_t>{T + 1, B}));
    out.value.sum().backward();
    auto g = p->named_parameters()["encoder.conv0.weight"].grad();
    ASSERT_TRUE(g.defined());
    EXPECT_GT(g.abs().sum().item<float>(), 0.f);
    // Step mode agrees with the unroll's first step.
    torch::NoGradGuard ng;
    auto obs = torch::rand({B, 2, 40, 40});
    auto st = p->initial_state(B);
    auto a = p->step(obs, torch::ones({B}), st);
    auto u = p->unroll(obs.unsqueeze(0), torch::ones({1, B}), p->initial_state(B));
    EXPECT_TRUE(torch::allclose(a.value, u.value[0], 1e-5, 1e-6));
  }
}

namespace {
Policy image_policy(const char* encoder, std::vector<int64_t> shape) {
  ModelOptions o;
  o.encoder = encoder;
  return Policy(image_spec(std::move(shape), 3), o);
}
}  // namespace

// The MLP encoder on images flattens them (step mode [B, C, H, W] and sequence mode [T, B, C, H, W]).
TEST(Encoders, MlpTakesImagesFlattened) {
  Policy p = image_policy("mlp", {4, 10, 10});
  auto px = torch::randint(0, 256, {6, 4, 10, 10}, torch::kUInt8);
  auto out = p->forward(px);
  EXPECT_EQ(out.dist.sizes(), (std::vector<int64_t>{6, 3}));
  auto flat = p->forward(px.reshape({6, 400}));  // the same numbers, flattened by hand
  EXPECT_TRUE(torch::allclose(out.dist, flat.dist));
  EXPECT_EQ(p->forward(torch::randint(0, 256, {5, 6, 4, 10, 10}, torch::kUInt8)).value.sizes(),
            (std::vector<int64_t>{5, 6}));
}

// uint8 pixels go into the policy as they are; it must see exactly the float image / 255.
TEST(Encoders, Uint8PixelsEqualFloatsOver255) {
  Policy p = image_policy("impala_cnn", {2, 12, 12});
  auto px = torch::randint(0, 256, {5, 2, 12, 12}, torch::kUInt8);
  auto from_u8 = p->forward(px);
  auto from_f = p->forward(px.to(torch::kFloat32) / 255.0);
  EXPECT_TRUE(torch::allclose(from_u8.dist, from_f.dist, 1e-6, 1e-6));
  EXPECT_TRUE(torch::allclose(from_u8.value, from_f.value, 1e-6, 1e-6));
  // and a wrong scale would show: the raw values give different outputs
  EXPECT_FALSE(torch::allclose(from_u8.dist, p->forward(px.to(torch::kFloat32)).dist, 1e-3, 1e-3));
}
