// The learners' self-checks (learner/self_check.h) on the CPU: each check passes on sound code,
// fails with an injected fault (MPIRL_TEST_SELF_CHECK_FAULT), the step check leaves the trainer as
// it was, and the verdicts map to the fallbacks. The agreement across learners runs in the MPI
// tests (mpi.self_check_*).
#include <cstdlib>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/config.h"
#include "envs/registry.h"
#include "kernels/scan.h"
#include "learner/self_check.h"
#include "learner/trainer.h"
#include "tests/common/train_batches.h"

using namespace mpirl;
using namespace mpirl::learner;

namespace {
struct FaultEnv {
  explicit FaultEnv(const char* v) { setenv("MPIRL_TEST_SELF_CHECK_FAULT", v, 1); }
  ~FaultEnv() { unsetenv("MPIRL_TEST_SELF_CHECK_FAULT"); }
};
}  // namespace

TEST(SelfCheck, ScanPassesAndAnInjectedFaultFails) {
  auto ok = check_scan(torch::kCPU, 0);
  EXPECT_TRUE(ok.ran);
  EXPECT_TRUE(ok.ok) << ok.max_error;
  EXPECT_LT(ok.max_error, 1e-5);
  FaultEnv f("step:0,scan:3");
  EXPECT_TRUE(check_scan(torch::kCPU, 0).ok) << "the fault is for rank 3 only";
  auto bad = check_scan(torch::kCPU, 3);
  EXPECT_FALSE(bad.ok);
  EXPECT_GT(bad.max_error, bad.tolerance);
}

TEST(SelfCheck, StepComparesTheStaticPathWithEagerAndUndoesItself) {
  for (const char* core : {"none", "lru"}) {
    SCOPED_TRACE(core);
    Config cfg = load_config("", {std::string("model.core=\"") + core + "\"", "model.core_size=8", "model.core_state=4",
                                  "learner.batch_size=8", "actor.rollout_len=6"});
    auto spec = envs::env_spec(cfg);
    NoReducer none;
    torch::manual_seed(4);
    Trainer t(cfg, spec, torch::kCPU, none, StepMode::Static);
    const auto before = mpirl::testing::params_of(t);
    auto r = check_step(t, cfg, spec, 0);
    EXPECT_TRUE(r.ran);
    EXPECT_TRUE(r.ok) << r.max_error;
    EXPECT_EQ(t.mode(), StepMode::Static);
    EXPECT_EQ(mpirl::testing::max_abs_diff(before, mpirl::testing::params_of(t)), 0.0) << "the check is undone";
    {
      FaultEnv f("step:0");
      EXPECT_FALSE(check_step(t, cfg, spec, 0).ok);
    }
    Trainer eager(cfg, spec, torch::kCPU, none, StepMode::Eager);
    auto skipped = check_step(eager, cfg, spec, 0);
    EXPECT_FALSE(skipped.ran);
    EXPECT_TRUE(skipped.ok);
  }
}

TEST(SelfCheck, VerdictsMapToFallbacks) {
  auto failed = [](const char* name) {
    CheckResult c;
    c.name = name;
    c.ran = true;
    c.ok = false;
    c.failed_on = {1};
    return c;
  };
  CheckResult fine;
  fine.name = "scan";
  fine.ran = true;
  auto f = fallbacks({fine}, true);
  EXPECT_FALSE(f.aten_scan || f.eager_steps || f.mpi_reducer);
  EXPECT_TRUE(f.fatal.empty());
  f = fallbacks({failed("scan"), failed("step")}, false);
  EXPECT_TRUE(f.aten_scan && f.eager_steps && !f.mpi_reducer && f.fatal.empty());
  f = fallbacks({failed("reducer")}, /*reducer_is_nccl=*/true);
  EXPECT_TRUE(f.mpi_reducer && f.fatal.empty());
  f = fallbacks({failed("reducer")}, /*reducer_is_nccl=*/false);  // MPI itself disagrees: no way out
  EXPECT_FALSE(f.mpi_reducer);
  EXPECT_NE(f.fatal.find("rank(s) 1"), std::string::npos) << f.fatal;
}

TEST(SelfCheck, ScanBackendSwitchesLinearScan) {
  auto a = torch::rand({40, 3}, torch::kFloat64), b = torch::randn({40, 3}, torch::kFloat64);
  kernels::set_scan_backend(kernels::ScanBackend::Aten);
  auto h_aten = kernels::linear_scan(a, b);
  kernels::set_scan_backend(kernels::ScanBackend::Native);
  auto h_native = kernels::linear_scan(a, b);
  EXPECT_LT((h_aten - h_native).abs().max().item<double>(), 1e-12);
  EXPECT_STREQ(kernels::scan_backend_name(kernels::scan_backend()), "native");
}
