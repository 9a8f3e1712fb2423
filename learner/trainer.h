#pragma once
// The trainer: policy, losses, optimizer, gradient clipping (no host sync) and gradient averaging
// through a GradientReducer. It knows nothing about MPI messages or the run: it takes batches on
// its device and updates the parameters.
#include <memory>

#include <torch/torch.h>

#include "core/config.h"
#include "envs/env.h"
#include "learner/gradient_reducer.h"
#include "learner/losses.h"
#include "models/policy.h"

namespace mpirl::learner {

// Where truncated episodes bootstrap: the last observation of each (m of them), the core state
// the actor had there, and where its value goes in the [T, B] batch.
struct BootInputs {
  torch::Tensor obs;    // [m, obs...]
  torch::Tensor state;  // [m, S] (undefined without a core)
  torch::Tensor t, b;   // int64 [m]
  int64_t count = 0;
};

struct UpdateResult {
  LossTerms last;             // loss terms of the last optimizer step (tensors, not synced)
  torch::Tensor priorities;   // [B] new replay priorities (first epoch for APPO)
  torch::Tensor grad_norm;    // total gradient norm before clipping, last step
  int64_t steps = 0;          // optimizer steps taken
};

class Trainer {
 public:
  Trainer(const Config& cfg, const envs::EnvSpec& spec, torch::Device device, GradientReducer& reducer);
  models::Policy& policy() { return policy_; }
  torch::Device device() const { return device_; }

  // Values of the truncation bootstraps with the current parameters, scattered into
  // batch.trunc_value [T, B] (zeros elsewhere).
  void bootstrap(TrainBatch& batch, const BootInputs& boot);
  // One update on `batch` (IMPALA: one step; APPO: appo_epochs x appo_minibatches steps).
  UpdateResult update(TrainBatch& batch, const BootInputs& boot);

  // Parameters, optimizer state (moments and step counts) and the torch RNG states: a checkpoint's
  // learner.pt. load() restores them bit for bit (onto this trainer's device).
  void save(torch::serialize::OutputArchive& ar);
  void load(torch::serialize::InputArchive& ar);

 private:
  torch::Tensor step(const LossTerms& l);  // backward, average, clip, optimizer step; returns grad norm

  const Config& cfg_;
  envs::EnvSpec spec_;
  torch::Device device_;
  GradientReducer& reducer_;
  models::Policy policy_{nullptr};
  std::vector<torch::Tensor> params_;
  std::unique_ptr<torch::optim::Optimizer> optim_;
  LossOptions lo_;
};

// Scales every gradient so that their joint L2 norm is at most max_norm (as
// torch.nn.utils.clip_grad_norm_), without reading the norm on the host. Returns the norm.
torch::Tensor clip_grad_norm(const std::vector<torch::Tensor>& params, double max_norm);

}  // namespace mpirl::learner
