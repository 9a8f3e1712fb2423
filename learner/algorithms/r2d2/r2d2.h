#pragma once
// R2D2 (Kapturowski et al., ICLR 2019): recurrent n-step double Q-learning from a prioritized replay.
//   - Q-values from the policy's own heads, duelling: Q = V + A - mean A (targets.h), so every
//     encoder and core, model.python included, is a Q-network unchanged;
//   - a target network, a copy of the online one every r2d2.target_period optimizer steps;
//   - the first r2d2.burn_in steps of each sequence only advance the core from the state the actor
//     stored at the sequence's start: no loss, no gradient;
//   - n-step double-Q targets under the value rescaling h; the loss 0.5 delta^2 on h's scale,
//     weighted by the replay's importance weights;
//   - priorities eta * max|delta| + (1 - eta) * mean|delta| per sequence, which the learner sends
//     back to the replay shard that owns each item, as for the other algorithms.
// The actors' epsilon-greedy ladder is models/sampler.h's.
#include "core/config.h"
#include "learner/algorithms/algorithm.h"

namespace mpirl::learner {

class R2D2 final : public Algorithm {
 public:
  explicit R2D2(const Config::R2D2& o) : o_(o) {}
  std::string name() const override { return "r2d2"; }
  LossTerms loss(const envs::EnvSpec& spec, const TrainBatch& b, const models::PolicyOutput& out,
                 const LossOptions& o) const override;
  // The online network's outputs from the end of the burn-in: obs [burn_in, T].
  models::PolicyOutput forward(models::PolicyModel& m, const TrainBatch& b) const override;
  // A truncated episode's last state: the target network's Q of the online network's greedy action.
  torch::Tensor bootstrap_value(models::PolicyModel& m, const torch::Tensor& obs, const torch::Tensor& state) const override;
  void attach(const std::shared_ptr<models::PolicyModel>& online, const MakeModel& make) override;
  void after_step() override;
  std::vector<torch::Tensor> state_tensors() const override;
  bool has_state() const override { return true; }
  void save(torch::serialize::OutputArchive& ar) const override;
  void load(torch::serialize::InputArchive& ar) override;

  models::PolicyModel& target() { return *target_; }
  int64_t steps() const { return steps_; }

 private:
  void copy_to_target();
  Config::R2D2 o_;
  std::shared_ptr<models::PolicyModel> online_, target_;
  int64_t steps_ = 0;  // optimizer steps so far
};

}  // namespace mpirl::learner
