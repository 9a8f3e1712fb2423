// The learner's static-buffer step (learner/graph_step.h, what a CUDA graph captures) with a
// model.python module, on the CPU: uncaptured it equals the eager step; when the capture fails
// (injected: MPIRL_TEST_CAPTURE_FAULT) the trainer falls back to eager steps, says why, never
// retries, and loses no update; a built-in policy's capture failure stays fatal. The capture
// itself needs a GPU (tests/gpu/test_graph_step.cpp, bench/gpu_check.sh).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/config.h"
#include "core/error.h"
#include "envs/registry.h"
#include "learner/graph_step.h"
#include "learner/trainer.h"
#include "tests/common/train_batches.h"

using namespace mpirl;
using namespace mpirl::learner;
using mpirl::testing::max_abs_diff;
using mpirl::testing::params_of;
using mpirl::testing::random_batch;

namespace {

// A small MLP policy with the model.python contract (docs/your-own-model.md), written once.
std::string module_file() {
  static const std::string path = [] {
    const auto dir = std::filesystem::temp_directory_path() / "mpirl-unit-python-step";
    std::filesystem::create_directories(dir);
    const auto p = (dir / "tiny_mlp.py").string();
    std::ofstream(p) << "import torch\n"
                        "class M(torch.nn.Module):\n"
                        "    def __init__(self, spec):\n"
                        "        super().__init__()\n"
                        "        self.body = torch.nn.Linear(spec['obs_shape'][0], 16)\n"
                        "        self.pi = torch.nn.Linear(16, spec['num_actions'])\n"
                        "        self.v = torch.nn.Linear(16, 1)\n"
                        "    def unroll(self, obs, is_init, state):\n"
                        "        h = torch.tanh(self.body(obs))\n"
                        "        return self.pi(h), self.v(h)[..., 0]\n"
                        "    def step(self, obs, is_init, state):\n"
                        "        d, v = self.unroll(obs, is_init, state)\n"
                        "        return d, v, state\n"
                        "def make(spec, options):\n"
                        "    return M(spec)\n";
    return p;
  }();
  return path;
}

Config python_config() {
  return load_config("", {"model.python=\"" + module_file() + ":make\"", "learner.value_norm=\"none\"",
                          "learner.lr=0.003"});
}

struct ScopedHook {
  explicit ScopedHook(const char* name) : name_(name) { setenv(name, "1", 1); }
  ~ScopedHook() { unsetenv(name_); }
  const char* name_;
};

}  // namespace

TEST(PythonStep, StaticEqualsEagerOver20Updates) {
  const Config cfg = python_config();
  const auto spec = envs::env_spec(cfg);
  NoReducer none;
  torch::manual_seed(1);
  Trainer eager(cfg, spec, torch::kCPU, none, StepMode::Eager);
  torch::manual_seed(1);
  Trainer fixed(cfg, spec, torch::kCPU, none, StepMode::Static);
  ASSERT_EQ(fixed.mode(), StepMode::Static);
  const auto start = params_of(eager);
  ASSERT_EQ(max_abs_diff(start, params_of(fixed)), 0.0);
  const int64_t T = 6, B = 8, D = spec.obs_size(), A = spec.num_actions;
  for (uint64_t k = 0; k < 20; ++k) {
    auto b1 = random_batch(T, B, D, A, 0, 200 + k, k % 2 == 1), b2 = random_batch(T, B, D, A, 0, 200 + k, k % 2 == 1);
    auto r1 = eager.update(b1, {});
    auto r2 = fixed.update(b2, {});
    EXPECT_NEAR(r1.last.total.item<double>(), r2.last.total.item<double>(), 1e-4) << k;
  }
  EXPECT_EQ(fixed.mode(), StepMode::Static);
  EXPECT_TRUE(fixed.capture_failure().empty());
  EXPECT_LT(max_abs_diff(params_of(eager), params_of(fixed)), 1e-5);
  EXPECT_GT(max_abs_diff(params_of(eager), start), 1e-2);  // the updates moved the parameters
}

TEST(PythonStep, CaptureFailureFallsBackToEagerAndLosesNoUpdate) {
  const Config cfg = python_config();
  const auto spec = envs::env_spec(cfg);
  NoReducer none;
  torch::manual_seed(2);
  Trainer eager(cfg, spec, torch::kCPU, none, StepMode::Eager);
  torch::manual_seed(2);
  Trainer fallback(cfg, spec, torch::kCPU, none, StepMode::Static);
  const int64_t T = 6, B = 8, D = spec.obs_size(), A = spec.num_actions;
  {
    ScopedHook fault("MPIRL_TEST_CAPTURE_FAULT");
    for (uint64_t k = 0; k < 10; ++k) {
      auto b1 = random_batch(T, B, D, A, 0, 300 + k), b2 = random_batch(T, B, D, A, 0, 300 + k);
      eager.update(b1, {});
      fallback.update(b2, {});
      ASSERT_EQ(fallback.mode(), StepMode::Eager) << k;  // from the first update on
    }
  }
  EXPECT_NE(fallback.capture_failure().find("injected"), std::string::npos) << fallback.capture_failure();
  EXPECT_NE(fallback.describe().find("could not be captured"), std::string::npos) << fallback.describe();
  // Every update applied once, none twice: the same parameters as 10 eager updates.
  EXPECT_LT(max_abs_diff(params_of(eager), params_of(fallback)), 1e-6);
  // No retry: asking for the static step again keeps the eager one.
  fallback.set_mode(StepMode::Static);
  EXPECT_EQ(fallback.mode(), StepMode::Eager);
}

TEST(PythonStep, BuiltInCaptureFailureStaysFatal) {
  const Config cfg = load_config("", {});
  const auto spec = envs::env_spec(cfg);
  NoReducer none;
  Trainer fixed(cfg, spec, torch::kCPU, none, StepMode::Static);
  ScopedHook fault("MPIRL_TEST_CAPTURE_FAULT");
  auto b = random_batch(6, 8, spec.obs_size(), spec.num_actions, 0, 9);
  EXPECT_THROW(fixed.update(b, {}), CaptureError);
}
