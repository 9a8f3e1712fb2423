#pragma once
// Central inference against local inference on this rank's device, before a run (`mpirl selftest`
// runs it on every rank): the run's policy with random parameters, 2 actors x 6 envs in 2 groups,
// 5 steps with episodes starting anywhere, served by the inference engine on `device` (batches
// of mixed requests) and by models::Acting on the CPU, as local actors act. Compares the
// distribution rows, the greedy actions and the core states.
#include <string>

#include <torch/torch.h>

#include "core/config.h"
#include "envs/env.h"

namespace mpirl::inference {

struct CheckOutcome {
  bool ok = true;
  double max_error = 0, tolerance = 0;  // relative: |central - local| / (1 + |local|)
  int64_t actions_differing = 0;  // greedy actions that differ where the top two rows differ by > tolerance
  std::string what;
};

// `perturb`: adds 1 to the central rows (the fault the self-check tests inject).
CheckOutcome check_central_inference(const Config& cfg, const envs::EnvSpec& spec, torch::Device device,
                                     bool perturb = false);

}  // namespace mpirl::inference
