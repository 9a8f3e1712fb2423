// model.sparse_input (models/sparse_input.h): the first layers over a uint8 batch's nonzero entries.
// The index lists against a matrix worked out by hand; sparse_linear's value and gradients against
// the dense layer over input()'s floats; a MinAtar policy's unroll and forward, and the gradients of
// every parameter through them, against the same policy with sparse_input = false.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "envs/registry.h"
#include "models/policy.h"
#include "models/sparse_input.h"
#include "tests/common/config_with.h"

using namespace mpirl;
using mpirl::testing::cfg_with;

namespace {
std::vector<int64_t> ints(const torch::Tensor& t) { return {t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel()}; }
std::vector<float> floats(const torch::Tensor& t) { return {t.data_ptr<float>(), t.data_ptr<float>() + t.numel()}; }
double max_diff(const torch::Tensor& a, const torch::Tensor& b) { return (a - b).abs().max().item<double>(); }

// uint8 [n, d] with about `density` of its entries nonzero, values 1-255 (255 most often, as MinAtar)
torch::Tensor sparse_obs(std::vector<int64_t> shape, double density, uint64_t seed) {
  torch::manual_seed(seed);
  auto on = torch::rand(shape) < density;
  auto v = torch::where(torch::rand(shape) < 0.7, torch::full(shape, 255), torch::randint(1, 256, shape));
  return (v * on).to(torch::kUInt8);
}
}  // namespace

TEST(SparseInput, IndexListsByHand) {
  // rows: [0 255 0 0], [0 0 0 0], [51 0 0 255]
  auto raw = torch::tensor({0, 255, 0, 0, 0, 0, 0, 0, 51, 0, 0, 255}, torch::kUInt8).view({3, 4});
  auto s = models::sparse_rows(raw);
  EXPECT_EQ(s.n, 3);
  EXPECT_EQ(s.d, 4);
  EXPECT_EQ(ints(s.row_offsets), (std::vector<int64_t>{0, 1, 1}));
  EXPECT_EQ(ints(s.cols), (std::vector<int64_t>{1, 0, 3}));
  EXPECT_EQ(floats(s.vals), (std::vector<float>{1.0f, 51 * float(1.0 / 255), 1.0f}));
  EXPECT_EQ(ints(s.col_offsets), (std::vector<int64_t>{0, 1, 2, 2}));  // input 2 has no entry
  EXPECT_EQ(ints(s.rows), (std::vector<int64_t>{2, 0, 2}));
  EXPECT_EQ(floats(s.col_vals), (std::vector<float>{51 * float(1.0 / 255), 1.0f, 1.0f}));
}

TEST(SparseInput, LinearMatchesTheDenseLayer) {
  auto raw = sparse_obs({64, 50}, 0.06, 3);
  raw[9].fill_(255);          // a full row
  raw[5].zero_();             // a row with no entry: the bias alone
  raw.select(1, 7).zero_();   // an input no row has: no gradient for its weights
  torch::manual_seed(4);
  auto w = torch::randn({16, 50}, torch::requires_grad());
  auto b = torch::randn({16}, torch::requires_grad());
  auto g = torch::randn({64, 16});
  auto x = raw.to(torch::kFloat32).mul_(1.0 / 255);  // as PolicyImpl::input()
  auto dense = torch::addmm(b, x, w.t());
  dense.backward(g);
  auto dw = w.grad().clone(), db = b.grad().clone();
  w.mutable_grad().zero_();
  b.mutable_grad().zero_();
  auto s = models::sparse_rows(raw);
  auto sparse = models::sparse_linear(s, w, b);
  sparse.backward(g);
  EXPECT_LT(max_diff(sparse, dense), 1e-5);
  EXPECT_LT(max_diff(sparse[5], b), 1e-6);
  EXPECT_LT(max_diff(w.grad(), dw), 1e-4);
  EXPECT_EQ(w.grad().select(1, 7).abs().max().item<double>(), 0.0);
  EXPECT_LT(max_diff(b.grad(), db), 1e-5);
  EXPECT_GT(dw.abs().max().item<double>(), 1.0);  // the comparison is not of zeros
}

TEST(SparseInput, PolicyMatchesDenseLayers) {
  for (const char* critic : {"separate", "shared"}) {
    std::vector<std::string> sets = {"env.id=\"Breakout-MinAtar\"", "model.encoder=\"mlp\"", "model.hidden=[32, 16]",
                                     "model.activation=\"relu\"", "model.init=\"orthogonal\"",
                                     std::string("model.critic=\"") + critic + "\""};
    auto cfg = cfg_with(sets);
    auto spec = envs::env_spec(cfg);
    ASSERT_TRUE(spec.obs_uint8);
    torch::manual_seed(11);
    models::Policy sparse(spec, models::model_options(cfg));
    sets.push_back("model.sparse_input=false");
    auto cfg_dense = cfg_with(sets);
    torch::manual_seed(11);
    models::Policy dense(spec, models::model_options(cfg_dense));
    std::vector<int64_t> shape{6, 5};  // [T + 1, B, C, H, W]
    shape.insert(shape.end(), spec.obs_shape.begin(), spec.obs_shape.end());
    auto obs = sparse_obs(shape, 0.08, 12);
    auto is_init = torch::zeros({6, 5});
    auto a = sparse->unroll(obs, is_init, torch::Tensor());
    auto b = dense->unroll(obs, is_init, torch::Tensor());
    ASSERT_EQ(a.dist.sizes(), b.dist.sizes());
    ASSERT_EQ(a.value.sizes(), b.value.sizes());
    EXPECT_LT(max_diff(a.dist, b.dist), 1e-5) << critic;
    EXPECT_LT(max_diff(a.value, b.value), 1e-5) << critic;
    auto loss = [](const models::PolicyOutput& o) {
      return (o.dist.log_softmax(-1).select(-1, 1) * o.value.detach()).mean() + o.value.square().mean();
    };
    loss(a).backward();
    loss(b).backward();
    auto pa = sparse->named_parameters(), pb = dense->named_parameters();
    for (auto& p : pa) {
      const auto& gb = pb[p.key()].grad();
      ASSERT_TRUE(p.value().grad().defined() && gb.defined()) << p.key();
      EXPECT_LT(max_diff(p.value().grad(), gb), 1e-5 * (1 + gb.abs().max().item<double>())) << critic << " " << p.key();
    }
    EXPECT_GT(pb["torso0.weight"].grad().abs().max().item<double>(), 0.0);
    // forward() takes the same path over [N, C, H, W]
    auto fa = sparse->forward(obs[0]);
    auto fb = dense->forward(obs[0]);
    EXPECT_LT(max_diff(fa.dist, fb.dist), 1e-5) << critic;
    EXPECT_LT(max_diff(fa.value, fb.value), 1e-5) << critic;
  }
}
