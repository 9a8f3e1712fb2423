#pragma once
// Hyper-parameter schedules over the step budget: the learning rate (learner.lr_schedule) and the
// entropy coefficient (learner.entropy_schedule) go from their start value to their final value as
// the run's env steps go from 0 to run.total_env_steps.
//   constant: start
//   linear:   start + (final - start) * f
//   cosine:   final + (start - final) * (1 + cos(pi f)) / 2
// with f = env_steps / total_env_steps clamped to [0, 1]: a resumed run continues its schedule, and
// a run extended with a larger budget continues from where the larger budget puts it.
#include <cstdint>
#include <string>

namespace mpirl::learner {

// The value at progress f in [0, 1] (clamped); `kind` is "constant", "linear" or "cosine".
double scheduled(const std::string& kind, double start, double final, double f);
// f for `env_steps` of a budget of `total` env steps (0 when total <= 0).
double progress_of(int64_t env_steps, int64_t total);

}  // namespace mpirl::learner
