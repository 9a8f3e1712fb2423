// The self-checks at a learner's start (learner/self_check.h): which run, the agreement, and
// the fallbacks, logged by every learner for itself.
#include <cstdlib>

#include <spdlog/spdlog.h>

#include "core/test_hooks.h"
#include "core/error.h"
#include "kernels/scan.h"
#include "learner/self_check.h"

namespace mpirl::learner {
namespace {

// Learner 0 says the agreed verdicts (every learner then says its own fallbacks).
void log_verdicts(const std::vector<CheckResult>& checks, const Comms& comms) {
  if (comms.rank != 0) return;
  for (const auto& c : checks) {
    if (!c.ran) continue;
    if (c.ok) {
      spdlog::info("self-check {}: ok, max error {:.2e} (tolerance {:.0e}) on every learner", c.name, c.max_error,
                   c.tolerance);
    } else {
      spdlog::warn("self-check {} failed on learner rank(s) {}: max error {:.3g} > {:.0e} ({})", c.name,
                   fmt::join(c.failed_on, ", "), c.max_error, c.tolerance, c.what);
    }
  }
}

}  // namespace

StepMode agreed_step_mode(const Config& cfg, const Comms& comms, torch::Device device) {
  const char* test = test_hook("MPIRL_TEST_STEP_MODE");
  const StepMode mine = test && std::string(test) == "static"        ? StepMode::Static
                        : device.is_cuda() && cfg.learner.cuda_graph ? StepMode::Graph
                                                                     : StepMode::Eager;
  const StepMode order[] = {StepMode::Eager, StepMode::Static, StepMode::Graph};
  int v = mine == StepMode::Graph ? 2 : mine == StepMode::Static ? 1 : 0;
  MPIRL_MPI(MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_MIN, comms.learners));
  if (order[v] != mine)
    spdlog::warn("learner rank {} @ {}: {} steps, as every learner (another learner cannot take this one's)",
                 comms.rank, comms.host(comms.rank), v == 0 ? "eager" : "static-buffer");
  return order[v];
}

std::vector<CheckResult> start_checks(const Config& cfg, const Comms& comms, torch::Device device,
                                      std::unique_ptr<GradientReducer>& reducer, std::string* reducer_why) {
  const std::string& backend = cfg.kernels.scan_backend;
  kernels::set_scan_backend(backend == "aten" ? kernels::ScanBackend::Aten : kernels::ScanBackend::Native);
  std::vector<CheckResult> checks;
  if (!cfg.learner.self_check) return checks;
  if (backend == "aten") {
    CheckResult c;
    c.name = "scan";
    c.note = "kernels.scan_backend = \"aten\": the native kernels are not used";
    checks.push_back(c);
  } else {
    checks.push_back(check_scan(device, comms.rank));
  }
  checks.push_back(check_reducer(*reducer, comms.learners, comms.layout.learners, device, comms.rank));
  agree(checks, comms.learners);
  log_verdicts(checks, comms);
  const Fallbacks f = fallbacks(checks, reducer->kind() == ReducerKind::Nccl || test_reducer_fallback());
  if (!f.fatal.empty()) throw Error("learner self-check: " + f.fatal);
  if (f.aten_scan && backend == "auto") {
    kernels::set_scan_backend(kernels::ScanBackend::Aten);
    spdlog::warn("learner rank {} @ {}: linear scans run on the ATen reference from now on (slower), as on every "
                 "learner",
                 comms.rank, comms.host(comms.rank));
  } else if (f.aten_scan) {
    spdlog::warn("learner rank {}: kernels.scan_backend = \"native\" is kept although its check failed", comms.rank);
  }
  if (f.mpi_reducer) {
    const CheckResult& failed = checks.back();  // the reducer check, pushed last
    if (reducer_why)
      *reducer_why = fmt::format("{} failed the self-check on learner rank(s) {}: MPI_Allreduce over host memory",
                                 reducer->name(), fmt::join(failed.failed_on, ", "));
    reducer = std::make_unique<MpiReducer>(comms.learners, comms.layout.learners);
    spdlog::warn("learner rank {} @ {}: gradients averaged by MPI_Allreduce from now on, as on every learner",
                 comms.rank, comms.host(comms.rank));
  }
  return checks;
}

void step_check(std::vector<CheckResult>& checks, Trainer& trainer, const Config& cfg, const envs::EnvSpec& spec,
                const Comms& comms) {
  if (!cfg.learner.self_check) return;
  std::vector<CheckResult> step = {check_step(trainer, cfg, spec, comms.rank)};
  agree(step, comms.learners);
  log_verdicts(step, comms);
  if (fallbacks(step, false).eager_steps) {
    trainer.set_mode(StepMode::Eager);
    spdlog::warn("learner rank {} @ {}: eager steps from now on, as on every learner", comms.rank,
                 comms.host(comms.rank));
  }
  checks.push_back(step[0]);
}

}  // namespace mpirl::learner
