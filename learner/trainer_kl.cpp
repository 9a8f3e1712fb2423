// learner.kl_target's measurement (Trainer::measure_kl): how far an update moved the policy from
// the actors'. The rate's step after it: Trainer::update.
#include "learner/trainer.h"

namespace mpirl::learner {

double Trainer::measure_kl(const TrainBatch& batch) {
  torch::NoGradGuard g;
  const int64_t T = batch.rewards.size(0);
  const auto out = algo_->forward(*model_, batch);
  const auto log_r = (models::log_prob(spec_, out.dist.slice(0, 0, T), batch.actions) - batch.behaviour_logp)
                         .to(torch::kFloat64);
  const auto k3 = log_r.exp() - 1 - log_r;
  torch::Tensor kl = batch.keep.defined()
                         ? (k3 * batch.keep.to(torch::kFloat64).unsqueeze(0)).sum() /
                               (batch.keep.to(torch::kFloat64).sum().clamp_min(1.0) * double(T))
                         : k3.mean();
  kl = kl.reshape({1});
  if (average_) average_(kl);
  return kl.item<double>();
}

}  // namespace mpirl::learner
