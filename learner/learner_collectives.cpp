#include "learner/learner_collectives.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "core/error.h"

namespace mpirl::learner {

Agreed agree(const Comms& comms, const std::string& reason, bool kept_any, bool checkpoint, int64_t env_steps) {
  const int stop = reason.empty() ? 0 : reason == "interrupted" ? 3 : reason == "preempted" ? 2 : 1;
  int64_t v[4] = {stop, kept_any ? 1 : 0, checkpoint ? 1 : 0, env_steps};
  if (comms.layout.learners > 1) MPIRL_MPI(MPI_Allreduce(MPI_IN_PLACE, v, 4, MPI_INT64_T, MPI_MAX, comms.learners));
  return {int(v[0]), v[1] != 0, v[2] != 0, v[3]};
}

AverageFn learner_average(const Comms& comms) {
  if (comms.layout.learners <= 1) return {};
  return [&comms](torch::Tensor& t) {
    auto host = t.to(torch::kCPU, torch::kFloat64, /*non_blocking=*/false, /*copy=*/true).contiguous();
    MPIRL_MPI(MPI_Allreduce(MPI_IN_PLACE, host.data_ptr<double>(), int(host.numel()), MPI_DOUBLE, MPI_SUM,
                            comms.learners));
    t.copy_(host.div_(double(comms.layout.learners)));
  };
}

double param_difference(const Comms& comms, models::Policy& policy) {
  std::vector<float> mine(size_t(models::num_params(policy)));
  models::write_flat(policy, mine.data());
  const bool lead = comms.rank == 0;
  std::vector<float> all(lead ? mine.size() * size_t(comms.layout.learners) : 0);
  MPIRL_MPI(MPI_Gather(mine.data(), int(mine.size()), MPI_FLOAT, all.data(), int(mine.size()), MPI_FLOAT, 0,
                       comms.learners));
  double d = 0;
  for (int l = 1; lead && l < comms.layout.learners; ++l)
    for (size_t i = 0; i < mine.size(); ++i) d = std::max(d, double(std::abs(all[size_t(l) * mine.size() + i] - mine[i])));
  return d;
}

LearnerCounts sum_counts(const Comms& comms, const LearnerCounts& c) {
  const auto v = to_array(c);
  std::array<int64_t, kLearnerCountFields> s{};
  MPIRL_MPI(MPI_Reduce(v.data(), s.data(), kLearnerCountFields, MPI_INT64_T, MPI_SUM, 0, comms.learners));
  return counts_from(s.data());
}


}  // namespace mpirl::learner
