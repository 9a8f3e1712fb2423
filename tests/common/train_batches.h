#pragma once
// Random learner batches and parameter comparisons, shared by the unit tests and the GPU tests.
#include <algorithm>
#include <cmath>
#include <sstream>
#include <vector>

#include <torch/torch.h>

#include "learner/algorithms/appo.h"
#include "learner/algorithms/impala.h"
#include "learner/trainer.h"

namespace mpirl::testing {

// A [T, B] batch of a discrete-action env with D-dim observations and core state size S (0 = no
// core). `extras`: truncations, importance weights and some sequences masked out, as a
// prioritized replay with a policy-lag limit delivers them.
inline learner::TrainBatch random_batch(int64_t T, int64_t B, int64_t D, int64_t A, int64_t S, uint64_t seed,
                                        bool extras = false, torch::Device device = torch::kCPU) {
  torch::manual_seed(seed);
  learner::TrainBatch b;
  b.obs = torch::randn({T + 1, B, D});
  b.is_init = (torch::rand({T + 1, B}) < 0.1).to(torch::kFloat32);
  b.actions = torch::randint(A, {T, B}, torch::kInt64);
  b.rewards = torch::randn({T, B});
  b.terminated = (torch::rand({T, B}) < 0.05).to(torch::kFloat32);
  b.truncated = torch::zeros({T, B});
  b.behaviour_logp = torch::full({T, B}, std::log(1.0 / double(A))) + 0.1 * torch::randn({T, B});
  if (S > 0) b.state0 = torch::randn({B, S});
  if (extras) {
    b.truncated = (torch::rand({T, B}) < 0.05).to(torch::kFloat32) * (1 - b.terminated);
    b.weights = 0.5 + torch::rand({B});
    b.keep = (torch::rand({B}) < 0.8).to(torch::kFloat32);
  }
  auto to = [&](torch::Tensor& t) {
    if (t.defined()) t = t.to(device);
  };
  for (auto* t : {&b.obs, &b.is_init, &b.actions, &b.rewards, &b.terminated, &b.truncated, &b.behaviour_logp,
                  &b.state0, &b.weights, &b.keep})
    to(*t);
  return b;
}

// learner.pt's round trip: `from` saved to memory and loaded into `to`.
inline void copy_checkpoint(learner::Trainer& from, learner::Trainer& to) {
  std::stringstream saved;
  {
    torch::serialize::OutputArchive ar;
    from.save(ar);
    ar.save_to(saved);
  }
  torch::serialize::InputArchive ar;
  ar.load_from(saved);
  to.load(ar);
}

inline std::vector<torch::Tensor> params_of(learner::Trainer& t) {
  std::vector<torch::Tensor> v;
  for (auto& p : t.policy()->parameters()) v.push_back(p.detach().to(torch::kCPU).clone());
  return v;
}

inline double max_abs_diff(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  double d = a.size() == b.size() ? 0 : INFINITY;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    d = std::max(d, (a[i].to(torch::kCPU) - b[i].to(torch::kCPU)).abs().max().item<double>());
  return d;
}

}  // namespace mpirl::testing
