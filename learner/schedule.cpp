#include "learner/schedule.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace mpirl::learner {

double scheduled(const std::string& kind, double start, double final, double f) {
  f = std::clamp(f, 0.0, 1.0);
  if (kind == "constant") return start;
  if (kind == "linear") return start + (final - start) * f;
  if (kind == "cosine") return final + (start - final) * 0.5 * (1.0 + std::cos(M_PI * f));
  throw Error("unknown schedule \"" + kind + "\": expected \"constant\", \"linear\" or \"cosine\"");
}

double progress_of(int64_t env_steps, int64_t total) {
  return total > 0 ? std::clamp(double(env_steps) / double(total), 0.0, 1.0) : 0.0;
}

}  // namespace mpirl::learner
