#pragma once
// Checks on first contact with a device, before any training (learner.self_check): the linear
// scan's kernels against the ATen reference (outputs and gradients), the learner step in its mode
// (a CUDA graph; on the CPU the same static-buffer path, uncaptured) against an eager step from
// the same state, undone afterwards, and the gradient reducer against a plain MPI_Allreduce of
// integer-valued data (exact). Every learner runs them at the same point, and the verdicts are
// agreed with one all-reduce over the learners: a check failed on any learner fails for all, and
// all fall back together (captured NCCL work must be the same on every rank): the ATen scan, eager
// steps, the MPI reducer. A crash poisons a CUDA context, so `mpirl selftest` runs the same checks
// on their own, before a long run.
#include <string>
#include <vector>

#include <mpi.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "comm/ranks.h"
#include "core/config.h"
#include "envs/env.h"
#include "learner/gradient_reducer.h"
#include "learner/trainer.h"

namespace mpirl::learner {

struct CheckResult {
  std::string name;     // "scan", "step", "reducer"
  std::string what;     // what was compared
  bool ran = false;     // false: nothing to check here (`note` says why)
  bool ok = true;       // after agree(): false if it failed on any learner
  double max_error = 0, tolerance = 0;
  std::vector<int> failed_on;  // after agree(): the world ranks where it failed
  std::string note;
};
nlohmann::json to_json(const CheckResult& r);

// Test hook: MPIRL_TEST_SELF_CHECK_FAULT="NAME:RANK[,NAME:RANK...]" perturbs the checked side of
// check NAME on world rank RANK (a faulty kernel, a mismatching reducer or step), so that the
// agreement and the fallbacks run without a broken GPU.
bool injected_fault(const std::string& name, int world_rank);
// Test seam for a fallback a CPU run cannot otherwise reach: MPIRL_TEST_REDUCER_FALLBACK=1 lets a
// failed reducer check replace the MPI reducer as it replaces NCCL's. Unset outside tests.
bool test_reducer_fallback();

// The step mode of every learner, agreed with one all-reduce: the modes differ in the collectives
// a step makes (a graph's warm-up steps, the host all-reduce between two graphs), so a learner on
// the CPU makes every learner eager. Each learner's own wish: a CUDA graph on CUDA with
// learner.cuda_graph, else eager; MPIRL_TEST_STEP_MODE=static asks for the static-buffer step a
// graph captures, uncaptured, so that the step check and its fallback run on a CPU.
StepMode agreed_step_mode(const Config& cfg, const Comms& comms, torch::Device device);

// Local: linear_scan's native kernels on `device` against linear_scan_aten, float32 and
// complex64, forward and reverse, shapes crossing the CUDA kernel's tiles (128 steps) and blocks
// (32 channels); both compared with a float64 run of the reference.
CheckResult check_scan(torch::Device device, int world_rank);
// Collective over `learners` (size > 1): `reducer` averaging integer-valued gradients on `device`
// against MPI_Allreduce of the same values; exact.
CheckResult check_reducer(GradientReducer& reducer, MPI_Comm learners, int size, torch::Device device, int world_rank);
// Collective when the trainer's reducer is: one update in the trainer's mode against one eager
// update from the same state, on a synthetic batch of the run's shapes; the trainer is restored
// (parameters, optimizer, RNG). Not run for an eager trainer.
CheckResult check_step(Trainer& trainer, const Config& cfg, const envs::EnvSpec& spec, int world_rank);

// One all-gather over `learners`: every learner's checks get the same verdicts (ok only if ok
// everywhere, `failed_on` the world ranks where not, the largest error).
void agree(std::vector<CheckResult>& checks, MPI_Comm learners);

// What the agreed verdicts mean for a learner.
struct Fallbacks {
  bool aten_scan = false, eager_steps = false, mpi_reducer = false;
  std::string fatal;  // non-empty: no fallback exists (the MPI reducer itself disagrees with MPI)
};
Fallbacks fallbacks(const std::vector<CheckResult>& checks, bool reducer_is_nccl);

// The learner's start-up, in two parts around building the trainer (which holds the reducer).
// Every learner calls both. First: kernels.scan_backend and, with learner.self_check, the scan
// and reducer checks, agreed; the ATen scan is set when the scan failed anywhere (and
// kernels.scan_backend is "auto"), and `reducer` becomes an MPI reducer when NCCL failed. Throws
// Error when no fallback exists. Returns the checks for the summary.
std::vector<CheckResult> start_checks(const Config& cfg, const Comms& comms, torch::Device device,
                                      std::unique_ptr<GradientReducer>& reducer, std::string* reducer_why);
// Then the step check, agreed; eager steps when it failed anywhere. Appends to `checks`.
void step_check(std::vector<CheckResult>& checks, Trainer& trainer, const Config& cfg, const envs::EnvSpec& spec,
                const Comms& comms);

}  // namespace mpirl::learner
