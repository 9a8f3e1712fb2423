#include "comm/shard_sampling.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"

namespace mpirl {

std::vector<int64_t> split_batch(int64_t B, const std::vector<double>& masses, std::mt19937_64& rng) {
  double total = 0;
  for (size_t k = 0; k < masses.size(); ++k) {
    if (!std::isfinite(masses[k]) || masses[k] < 0)
      throw Error(fmt::format("replay shard {} reports a sampling mass of {}", k, masses[k]));
    total += masses[k];
  }
  if (!(total > 0)) throw Error("no replay shard has anything to sample (every mass is 0)");
  // Sequential binomials: n_k ~ Binomial(left, M_k / mass left), the last shard takes the rest.
  std::vector<int64_t> n(masses.size(), 0);
  int64_t left = B;
  double rest = total;
  for (size_t k = 0; k < masses.size() && left > 0; ++k) {
    if (masses[k] <= 0) continue;
    const double p = std::min(1.0, masses[k] / rest);
    if (p >= 1.0) {
      n[k] = left;
    } else {
      std::binomial_distribution<int64_t> bin(left, p);
      n[k] = bin(rng);
    }
    left -= n[k];
    rest -= masses[k];
  }
  MPIRL_CHECK(left == 0, "split_batch: {} items left unassigned", left);
  return n;
}

std::vector<float> global_weights(const std::vector<double>& local_prob, const std::vector<int>& shard_of,
                                  const std::vector<double>& masses, int64_t total_items, double beta) {
  MPIRL_CHECK(local_prob.size() == shard_of.size(), "global_weights: {} probabilities for {} items",
              local_prob.size(), shard_of.size());
  double total = 0;
  for (double m : masses) total += m;
  std::vector<double> w(local_prob.size());
  double wmax = 0;
  for (size_t j = 0; j < w.size(); ++j) {
    const int k = shard_of[j];
    MPIRL_CHECK(k >= 0 && size_t(k) < masses.size(), "global_weights: item {} from shard {} of {}", j, k,
                masses.size());
    const double P = local_prob[j] * masses[size_t(k)] / total;
    w[j] = std::pow(double(total_items) * P, -beta);
    wmax = std::max(wmax, w[j]);
  }
  std::vector<float> out(w.size());
  for (size_t j = 0; j < w.size(); ++j) out[j] = float(w[j] / wmax);
  return out;
}

}  // namespace mpirl
