// The device optimizers (learner/optimizer.h) against LibTorch's own and hand-computed values, and
// the static-buffer learner step (learner/graph_step.h, uncaptured) against the eager step. The
// captured CUDA graph is checked against both in tests/gpu/test_graph_step.cpp.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <sstream>

#include "core/config.h"
#include "core/error.h"
#include "envs/registry.h"
#include "learner/optimizer.h"
#include "learner/trainer.h"
#include "tests/common/train_batches.h"

using namespace mpirl;
using namespace mpirl::learner;
using mpirl::testing::max_abs_diff;
using mpirl::testing::params_of;
using mpirl::testing::random_batch;

namespace {

std::vector<torch::Tensor> make_params(uint64_t seed) {
  torch::manual_seed(seed);
  return {torch::randn({4, 3}).requires_grad_(), torch::randn({5}).requires_grad_(),
          torch::randn({2, 2, 2}).requires_grad_()};
}

// Runs `steps` steps of ours and of LibTorch's from the same parameters and gradients; parameter
// 2 has no gradient on every third step (both must skip it, moments and step count included).
template <class Ref>
double compare(DeviceOptimizer& ours, std::vector<torch::Tensor>& a, Ref& ref, std::vector<torch::Tensor>& b,
               int steps) {
  for (int s = 0; s < steps; ++s) {
    for (size_t i = 0; i < a.size(); ++i) {
      const bool none = i == 2 && s % 3 == 0;
      auto g = torch::randn_like(a[i]);
      a[i].mutable_grad() = none ? torch::Tensor() : g.clone();
      b[i].mutable_grad() = none ? torch::Tensor() : g.clone();
    }
    ours.step();
    ref.step();
  }
  return max_abs_diff(a, b);
}

}  // namespace

TEST(DeviceOptimizer, AdamFirstStepByHand) {
  // m = 0.1 g, v = 0.001 g^2; bias-corrected m^ = g, v^ = g^2: p -= lr g / (|g| + eps).
  auto p = torch::tensor({1.0f, -2.0f}).requires_grad_();
  auto opt = make_adam({p}, {0.1, 0.9, 0.999, 1e-8});
  p.mutable_grad() = torch::tensor({0.5f, -4.0f});
  opt->step();
  EXPECT_NEAR(p[0].item<double>(), 1.0 - 0.1 * 0.5 / (0.5 + 1e-8), 1e-6);
  EXPECT_NEAR(p[1].item<double>(), -2.0 + 0.1 * 4.0 / (4.0 + 1e-8), 1e-6);
  // Second step with gradient 0: m = 0.09 g1, v = 0.000999 g1^2; m^ = 0.09/0.19 g1, v^ = 0.000999/0.001999 g1^2.
  p.mutable_grad() = torch::zeros({2});
  opt->step();
  const double mh = 0.09 / 0.19 * 0.5, vh = 0.000999 / (1 - 0.999 * 0.999) * 0.25;
  EXPECT_NEAR(p[0].item<double>(), 1.0 - 0.1 * 0.5 / (0.5 + 1e-8) - 0.1 * mh / (std::sqrt(vh) + 1e-8), 1e-6);
  EXPECT_EQ(opt->state()[0].item<float>(), 2.0f);  // the step count, on the parameters' device
}

TEST(DeviceOptimizer, AdamMatchesLibTorch) {
  auto a = make_params(1), b = make_params(1);
  auto ours = make_adam(a, {3e-3, 0.9, 0.99, 1e-5});
  torch::optim::Adam ref(b, torch::optim::AdamOptions(3e-3).betas({0.9, 0.99}).eps(1e-5));
  torch::manual_seed(7);
  const double d = compare(*ours, a, ref, b, 40);
  EXPECT_LT(d, 1e-5);
  EXPECT_GT(max_abs_diff(a, make_params(1)), 1e-2);  // they did move
}

TEST(DeviceOptimizer, RmspropMatchesLibTorch) {
  for (double momentum : {0.0, 0.9}) {
    SCOPED_TRACE(momentum);
    auto a = make_params(2), b = make_params(2);
    auto ours = make_rmsprop(a, {1e-3, 0.99, 1e-5, momentum});
    torch::optim::RMSprop ref(b, torch::optim::RMSpropOptions(1e-3).alpha(0.99).eps(1e-5).momentum(momentum));
    torch::manual_seed(8);
    EXPECT_LT(compare(*ours, a, ref, b, 40), 1e-5);
    EXPECT_GT(max_abs_diff(a, make_params(2)), 1e-2);
  }
}

TEST(DeviceOptimizer, StateRoundTripsAndAMismatchIsNamed) {
  auto a = make_params(3);
  auto opt = make_adam(a, {});
  for (auto& p : a) p.mutable_grad() = torch::randn_like(p);
  opt->step();
  torch::serialize::OutputArchive out;
  opt->save(out);
  std::ostringstream os;
  out.save_to(os);
  auto load_into = [&](DeviceOptimizer& o) {
    std::istringstream is(os.str());
    torch::serialize::InputArchive in;
    in.load_from(is);
    o.load(in);
  };
  auto fresh = make_adam(make_params(3), {});
  load_into(*fresh);
  ASSERT_EQ(fresh->state().size(), opt->state().size());
  for (size_t i = 0; i < opt->state().size(); ++i) EXPECT_TRUE(torch::equal(fresh->state()[i], opt->state()[i])) << i;
  auto other = make_adam({torch::zeros({4, 3}).requires_grad_(), torch::zeros({6}).requires_grad_(),
                          torch::zeros({2, 2, 2}).requires_grad_()},
                         {});
  try {
    load_into(*other);
    FAIL() << "a state of another shape was loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 4 has shape 5"), std::string::npos) << e.what();
  }
  auto rms = make_rmsprop(make_params(3), {});
  EXPECT_THROW(load_into(*rms), Error);  // 6 tensors, not 9
}

// The static-buffer path of the CUDA-graph step, uncaptured, equals the eager step over 50 updates
// of changing batches (with and without weights and masks, which the static path always carries).
TEST(StaticStep, EqualsEagerOver50Updates) {
  // "appo+proximal": learner.appo_proximal, whose proximal_logp is sliced per minibatch and copied
  // into the static step's buffers like the batch's own fields.
  // "appo+steps": learner.appo_minibatch = "steps" (fixed advantages and targets, flattened and
  // shuffled steps; no core).
  for (const std::string variant : {"impala", "appo", "appo+proximal", "appo+steps"})
    for (const char* core : {"none", "lru"}) {
      const bool proximal = variant == "appo+proximal", steps = variant == "appo+steps";
      if (steps && std::string(core) != "none") continue;
      SCOPED_TRACE(variant + " " + core);
      const std::string algo = proximal || steps ? "appo" : variant;
      Config cfg = load_config("", {"learner.algo=\"" + algo + "\"", std::string("model.core=\"") + core + "\"",
                                    "model.core_state=4", "model.core_size=8", "learner.appo_minibatches=2",
                                    "learner.appo_epochs=2", "learner.lr=0.003",
                                    std::string("learner.appo_proximal=") + (proximal ? "true" : "false"),
                                    std::string("learner.appo_minibatch=") + (steps ? "\"steps\"" : "\"sequences\"")});
      auto spec = envs::env_spec(cfg);
      NoReducer none;
      const int64_t T = 6, B = 8, D = spec.obs_size(), A = spec.num_actions, S = models::state_size(cfg, spec);
      torch::manual_seed(1);
      Trainer eager(cfg, spec, torch::kCPU, none, StepMode::Eager);
      torch::manual_seed(1);
      Trainer fixed(cfg, spec, torch::kCPU, none, StepMode::Static);
      ASSERT_EQ(fixed.mode(), StepMode::Static);
      const auto start = params_of(eager);
      ASSERT_EQ(max_abs_diff(start, params_of(fixed)), 0.0);
      for (uint64_t k = 0; k < 50; ++k) {
        auto b1 = random_batch(T, B, D, A, S, 100 + k, k % 2 == 1), b2 = random_batch(T, B, D, A, S, 100 + k, k % 2 == 1);
        torch::manual_seed(k);  // the same shuffled orders for both (appo+steps)
        auto r1 = eager.update(b1, {});
        torch::manual_seed(k);
        auto r2 = fixed.update(b2, {});
        ASSERT_EQ(r1.steps, r2.steps);
        EXPECT_LT((r1.priorities - r2.priorities).abs().max().item<double>(), 1e-4) << k;
        EXPECT_NEAR(r1.last.total.item<double>(), r2.last.total.item<double>(), 1e-4) << k;
      }
      EXPECT_LT(max_abs_diff(params_of(eager), params_of(fixed)), 1e-5);
      EXPECT_GT(max_abs_diff(params_of(eager), start), 1e-2);  // 50 updates moved the parameters
      // A batch of another shape is refused, naming the field.
      auto wrong = random_batch(T + 1, B, D, A, S, 9);
      try {
        fixed.update(wrong, {});
        FAIL() << "a batch of another shape went through the static step";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("batch field 'obs'"), std::string::npos) << e.what();
      }
    }
}
