#pragma once
// Whether a checkpoint's weights are fit to resume or evaluate.
#include <string>

namespace mpirl::learner {

// What makes a complete checkpoint unfit to resume or evaluate that its CRCs cannot show: a policy
// in model.pt or learner.pt that holds NaN or inf (sealed by a diverged run of an older mpirl; this
// one never seals non-finite parameters). "" when both are finite. For ckpt::latest's check.
std::string checkpoint_weights_problem(const std::string& dir);

}  // namespace mpirl::learner
