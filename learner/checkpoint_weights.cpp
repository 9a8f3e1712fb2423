#include "learner/checkpoint_weights.h"

#include <unistd.h>

#include <utility>

#include <fmt/format.h>

#include "models/policy_file.h"

namespace mpirl::learner {

std::string checkpoint_weights_problem(const std::string& dir) {
  for (const auto& [file, sub] : {std::pair<const char*, const char*>{"model.pt", ""}, {"learner.pt", "model"}}) {
    // Checkpoints of older runs have no model.pt (not a required file): learner.pt alone then.
    if (std::string(file) == "model.pt" && ::access((dir + "/model.pt").c_str(), F_OK) != 0) continue;
    const std::string bad = models::nonfinite_policy_tensor(dir + "/" + file, sub);
    if (!bad.empty()) return fmt::format("{}: '{}' is not finite (NaN or inf weights: a diverged run)", file, bad);
  }
  return "";
}

}  // namespace mpirl::learner
