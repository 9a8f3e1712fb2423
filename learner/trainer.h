#pragma once
// The trainer: policy, the algorithm's loss (learner/algorithms/), optimizer, gradient clipping (no host sync) and gradient averaging
// through a GradientReducer. It knows nothing about MPI messages or the run: it takes batches on
// its device and updates the parameters. On CUDA each optimizer step is, by default, one replay of
// a captured CUDA graph (learner/graph_step.h); eager steps otherwise.
#include <cmath>
#include <memory>

#include <torch/torch.h>

#include "core/config.h"
#include "envs/env.h"
#include "learner/gradient_reducer.h"
#include "learner/graph_step.h"
#include "learner/algorithms/algorithm.h"
#include "learner/normalizers.h"
#include "learner/optimizer.h"
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
  torch::Tensor priorities;   // [B] new replay priorities (from the first pass over the batch)
  torch::Tensor grad_norm;    // total gradient norm before clipping, last step
  int64_t steps = 0;          // optimizer steps taken
  double lr = 0, entropy_coef = 0;       // the (scheduled) values this update used
  // learner.kl_target: the mean over the batch's kept steps of (r - 1) - log r, r = pi / mu, with
  // pi the policy after the update and mu the actors' (an estimate of KL(mu || pi) from mu's own
  // actions), averaged over the learners; NaN when kl_target is 0.
  double kl = std::nan("");
  torch::Tensor value_mu, value_sigma;   // PopArt's statistics after the update (undefined without)
};

// How an optimizer step runs. Auto: Graph on CUDA with learner.cuda_graph = true, else Eager.
// Static: the graph's static-buffer path without capture (tests compare it with Eager on CPU).
enum class StepMode { Auto, Eager, Static, Graph };

class Trainer {
 public:
  // `average` (several learners): averages the normalisers' batch moments over the learners, in
  // place, so that every learner keeps the same statistics (learner/normalizers.h); `learners`: how many.
  Trainer(const Config& cfg, const envs::EnvSpec& spec, torch::Device device, GradientReducer& reducer,
          StepMode mode = StepMode::Auto, AverageFn average = {}, int learners = 1);
  models::Policy& policy() { return policy_; }
  Algorithm& algorithm() { return *algo_; }
  torch::Device device() const { return device_; }
  StepMode mode() const { return mode_; }
  // Until the gradient average of the last step has completed (GradientReducer::wait).
  void wait_reducer() { reducer_.wait(); }
  // Switches how the next steps run (Eager after a failed self-check); a captured graph is dropped.
  // After a model.python step failed to capture, Graph means Eager.
  void set_mode(StepMode m);
  // model.python: why its step could not be captured (the learner then runs it eagerly); empty
  // while it is captured or was never tried.
  const std::string& capture_failure() const { return capture_failure_; }
  std::string describe() const;  // the step mode and optimizer, for the log
  int graphs() const { return static_ ? static_->graphs() : 0; }  // CUDA graphs captured so far

  // Values of the truncation bootstraps with the current parameters, scattered into
  // batch.trunc_value [T, B] (zeros elsewhere).
  void bootstrap(TrainBatch& batch, const BootInputs& boot);
  // One update on `batch`: the algorithm's epochs x minibatches optimizer steps (IMPALA: one;
  // APPO: learner.appo_epochs x learner.appo_minibatches). With
  // model.obs_norm the observation statistics take in the batch first; with PopArt its statistics
  // take in the value targets of the last step after it. `received` gets its trunc_value; the
  // algorithm's prepare() works on a copy (it may reshape it).
  UpdateResult update(TrainBatch& received, const BootInputs& boot);
  // The schedules' position: f = env steps / step budget (learner/schedule.h). Every learner must
  // call it with the same f (learner.cpp agrees on the env steps).
  void set_progress(double f);
  // learner.kl_target: the factor on the (scheduled) learning rate, 1 at the start. After each
  // update it is divided by 1.5 where the update's KL (UpdateResult::kl) is over 2 x kl_target and
  // multiplied by 1.5 where it is under kl_target / 2, within [kKlFactorMin, kKlFactorMax]; the
  // next update uses it. Saved in learner.pt.
  double kl_factor() const { return kl_factor_; }
  static constexpr double kKlFactorMin = 0.01, kKlFactorMax = 10;
  const ObsNormalizer& obs_normalizer() const { return obs_norm_; }

  // Parameters, optimizer state (moments and step counts) and the torch RNG states: a checkpoint's
  // learner.pt. load() restores them bit for bit (onto this trainer's device).
  void save(torch::serialize::OutputArchive& ar);
  void load(torch::serialize::InputArchive& ar);

  // Non-finite updates (learner.on_nonfinite). An optimizer step whose (averaged, so the same on
  // every learner) gradient norm is not finite is skipped on the device and counted there; these
  // read the counts (a host sync: at a cadence, never per step).
  struct NonFinite {
    int64_t skipped = 0;   // optimizer steps skipped so far
    int64_t in_a_row = 0;  // ... since the last finite one
  };
  NonFinite nonfinite() const;
  // Every parameter and buffer (normalisation statistics included) finite (a host sync).
  bool parameters_finite() const;
  // learner.on_nonfinite = "rollback": keep the state as it is now (parameters, buffers, optimizer
  // and PopArt state, on the device), and go back to it, with the learning rate scaled by `lr_factor`
  // from then on. restore() returns false when no snapshot was taken.
  void snapshot();
  bool restore(double lr_factor);
  double lr_factor() const { return lr_factor_; }
  // Test hook (MPIRL_TEST_NAN_AT_UPDATE=N): from update N on, the loss is NaN on every learner.
  void inject_nan(bool on);

 private:
  StepFns step_fns();
  StepOut step(const TrainBatch& b);  // one optimizer step, eager or through the static step
  void after_update(UpdateResult& r);  // PopArt's statistics; the scheduled values into r
  std::vector<torch::Tensor> state_tensors() const;  // parameters, buffers, optimizer and PopArt state
  void apply_lr();                                   // lr_factor_ x kl_factor_ x the scheduled rate
  double measure_kl(const TrainBatch& batch);        // UpdateResult::kl, after the update's steps

  const Config& cfg_;
  envs::EnvSpec spec_;
  torch::Device device_;
  GradientReducer& reducer_;
  models::Policy policy_{nullptr};  // the built-in policy (its normalisers' buffers, actors' flat vector)
  std::shared_ptr<models::PolicyModel> model_;  // the same policy, as the losses reach it (unroll, value_after)
  std::unique_ptr<Algorithm> algo_;
  std::vector<torch::Tensor> params_;
  std::unique_ptr<DeviceOptimizer> optim_;
  LossOptions lo_;
  StepMode mode_;
  ObsNormalizer obs_norm_;
  std::unique_ptr<PopArt> popart_;  // learner.value_norm = "popart"
  std::unique_ptr<StaticStep> static_;  // built at the first update (Static and Graph)
  std::string capture_failure_;         // model.python: the capture's error, once it failed
  // On the device, float32 scalars: 1 when the last step was skipped; steps skipped; in a row;
  // the test hook's factor on the loss, minus 1 (0 or NaN). Updated inside the (captured) step.
  torch::Tensor skip_, skipped_, in_a_row_, nan_;
  bool nan_on_ = false;  // inject_nan(true): nan_ holds NaN
  std::vector<torch::Tensor> snapshot_;  // rollback: copies of every tensor a step changes
  double lr_factor_ = 1;
  double kl_factor_ = 1, progress_ = 0;
  AverageFn average_;  // several learners: the KL averaged over them (every learner the same rate)
};

// Scales every gradient so that their joint L2 norm is at most max_norm (as
// torch.nn.utils.clip_grad_norm_), without reading the norm on the host. Returns the norm.
torch::Tensor clip_grad_norm(const std::vector<torch::Tensor>& params, double max_norm);

}  // namespace mpirl::learner
