#pragma once
// The learner's normalisers. Their statistics live on the learner (float64, checkpointed with the
// trainer); what the policy needs to act lives in its buffers (models/policy.h: obs_shift/obs_scale,
// value_shift/value_scale), which travel with the parameters to the actors, into model.pt and into
// checkpoints. All updates are device tensor work: no host synchronisation on one learner. With
// several learners the batch moments are averaged by `AverageFn` (an MPI all-reduce on the host:
// one small read-back per update) so that every learner keeps identical statistics.
#include <functional>

#include <torch/torch.h>

#include "models/policy.h"

namespace mpirl::learner {

// Averages a float64 CPU or device tensor over the learners in place; empty with one learner.
using AverageFn = std::function<void(torch::Tensor&)>;

// Running mean and variance of a stream of vectors (Chan et al.'s parallel update) in float64.
class RunningMoments {
 public:
  RunningMoments(int64_t dim, torch::Device device);
  // Adds a batch of n vectors with mean `batch_mean` [D] and population variance `batch_var` [D].
  void merge(double n, const torch::Tensor& batch_mean, const torch::Tensor& batch_var);
  double count() const { return count_; }
  const torch::Tensor& mean() const { return mean_; }
  torch::Tensor var() const;  // population variance (zeros before any data)
  void save(torch::serialize::OutputArchive& ar) const;
  void load(torch::serialize::InputArchive& ar);

 private:
  double count_ = 0;
  torch::Tensor mean_, m2_;  // [D] float64; m2_: sum of squared deviations from the mean
};

// model.obs_norm: running mean/std of the observations the learner trains on; the policy sees
// (obs - mean) / sqrt(var + 1e-8), clipped (models/policy.h). Inactive for pixels and without
// model.obs_norm (the policy's obs buffers are then empty).
class ObsNormalizer {
 public:
  // `learners`: how many learners' batches `average` combines.
  ObsNormalizer(models::Policy& policy, AverageFn average, int learners);
  bool enabled() const { return enabled_; }
  // obs [T, B, obs...] float32 (what the learner trains on this update).
  void update(const torch::Tensor& obs);
  const RunningMoments& moments() const { return moments_; }
  void save(torch::serialize::OutputArchive& ar) const { moments_.save(ar); }
  void load(torch::serialize::InputArchive& ar);

 private:
  void publish();  // the moments into the policy's buffers
  models::Policy& policy_;
  AverageFn average_;
  int learners_;
  bool enabled_;
  RunningMoments moments_;
};

// learner.value_norm = "popart" (van Hasselt et al. 2016, "Learning values across many orders of
// magnitude"): the value head predicts (V - mu) / sigma; mu and sigma are exponential moving
// averages (weight max(decay, 1/n) at the n-th update, so the first update takes the batch's own
// moments) of the first and second moments of the value targets, and every change of (mu, sigma)
// rescales the head's weight and bias so that its outputs in return units are preserved:
//   w' = w sigma / sigma',  b' = (sigma b + mu - mu') / sigma'.
// sigma is clamped to [1e-4, 1e6].
class PopArt {
 public:
  PopArt(models::Policy& policy, double decay, AverageFn average);
  // target_mean, target_sq_mean: scalar tensors, the mean and the mean square of the value targets.
  // Nothing moves (decided on the device) when they are not finite or `skip` (the trainer's
  // skipped-step flag, float32 scalar; undefined = none) is 1.
  void update(const torch::Tensor& target_mean, const torch::Tensor& target_sq_mean,
              const torch::Tensor& skip = torch::Tensor());
  std::vector<torch::Tensor> state() const { return {mu_, nu_}; }
  torch::Tensor mu() const { return mu_; }
  torch::Tensor sigma() const;
  void save(torch::serialize::OutputArchive& ar) const;
  void load(torch::serialize::InputArchive& ar);

 private:
  models::Policy& policy_;
  double decay_;
  AverageFn average_;
  int64_t updates_ = 0;
  torch::Tensor mu_, nu_;  // [] float64 on the policy's device: first and second moments
};

}  // namespace mpirl::learner
