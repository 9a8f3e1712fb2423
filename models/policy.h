#pragma once
// The actor-critic policy: an encoder (an MLP torso, or a CNN for images: models/encoders.h), an optional recurrent core (models/core.h), a
// distribution head (categorical logits, or a diagonal Gaussian with a state-independent log-std)
// and a value head. Actors run it step by step without grad (carrying the core state), learners
// over [T+1, B] batches in sequence mode. Parameters travel as one flat float32 buffer.
#include <torch/torch.h>

#include "core/config.h"
#include "envs/env.h"
#include "models/core.h"
#include "models/encoders.h"
#include "models/model_options.h"
#include "models/policy_model.h"
#include "models/python_model.h"
#include "models/sparse_input.h"
#include "models/state_size.h"

namespace mpirl::models {

CoreOptions core_options(const ModelOptions& o, int64_t input);
// The model section of the config.
ModelOptions model_options(const Config& cfg);
// state_size(cfg, spec): models/state_size.h.
// Throws ConfigError naming the key when the model cannot be built for `spec` (rank 0, at start).
void validate_model_config(const Config& cfg, const envs::EnvSpec& spec);

// A feed-forward MLP policy's forward pass as its backward pass by hand reads it
// (PolicyImpl::tape_forward): every layer's output, no autograd graph.
struct MlpTape {
  torch::Tensor x;               // [N, obs_size] what the layers read (input(): normalised)
  std::vector<torch::Tensor> h;  // [N, hidden_i] the torso's layers after their activation
  std::vector<torch::Tensor> c;  // [N, hidden_i] the separate critic's
  torch::Tensor head;            // [N, L or A] logits or the Gaussian mean
  torch::Tensor value;           // [N] in return units
};

// Preallocated per-step outputs of PolicyImpl::act for B envs (PolicyImpl::act_buffers).
struct ActBuffers {
  torch::Tensor init;            // [B] float32: is_init of this step (the caller fills it)
  torch::Tensor pixels;          // [B, obs...] float32 (uint8 observations only)
  std::vector<torch::Tensor> h;  // [B, hidden_i]: the MLP encoder's layers
  CoreActBuffers core;           // the recurrent core's (CoreImpl::act)
  torch::Tensor head;            // [B, L or A]: logits, or the Gaussian mean
  torch::Tensor normed;          // [B, obs_size]: normalised observations (model.obs_norm, MLP only)
};

// The built-in PolicyModel (models/policy_model.h). Its value is in return units:
// value_scale * head + value_shift.
class PolicyImpl : public PolicyModel {
 public:
  PolicyImpl(const envs::EnvSpec& spec, const ModelOptions& opts);
  // Observations are float32, or uint8 pixels (scaled by 1/255 on the device before the encoder).
  // Feed-forward policies only: obs [..., obs...].
  PolicyOutput forward(const torch::Tensor& obs);
  // Sequence mode: obs [T, B, obs...], is_init [T, B], state0 [B, S] (ignored without a core).
  PolicyOutput unroll(const torch::Tensor& obs, const torch::Tensor& is_init, const torch::Tensor& state0) override;
  // Step mode: obs [B, obs...], is_init [B]; `state` [B, S] is advanced in place of the caller's.
  PolicyOutput step(const torch::Tensor& obs, const torch::Tensor& is_init, torch::Tensor& state) override;
  // The actor's step: the distribution head only (no value head), obs [B, obs...] with any row
  // stride; is_init in buf.init; `state` ([B, S], contiguous, CPU) advanced in place to what
  // step() gives. The MLP encoder, the core (CoreImpl::act) and the head run as addmm and loops
  // into `buf`, so an MLP policy with or without a core allocates no tensor per step; CNN encoders
  // still allocate their intermediate outputs. Returns buf.head (logits or the mean; a box
  // policy's log-std is log_std()). With ModelOptions::act_q (discrete only), the rows are the
  // duelling Q-values V + A - mean_a A instead, and the value head runs too.
  const torch::Tensor& act(const torch::Tensor& obs, torch::Tensor& state, ActBuffers& buf);
  ActBuffers act_buffers(int64_t B) const;
  // The rows act() gives, from step()'s outputs (central inference's step path): the head, or
  // with act_q the Q-values V + A - mean_a A.
  torch::Tensor acting_rows(const PolicyOutput& out) const;
  const torch::Tensor& log_std() const { return log_std_; }
  // The gradient by hand (models/policy_by_hand.cpp), for a loss whose own gradient with respect to
  // the head and the value is known in closed form (APPO's: learner/algorithms/appo_by_hand.cpp):
  // the forward pass as addmm and in-place activations, the backward pass as two mm and a column
  // sum per layer, and no autograd graph (a small MLP's step on a CPU is mostly the dispatch of
  // small ops and autograd's bookkeeping). Only for the MLP encoder over float vector observations
  // without a core, Python module or act_q, float32 on the CPU (by_hand()). tape_forward: obs
  // [..., obs_size] float; tape_backward sets every parameter's .grad() (as backward() after
  // zero_grad) from d_head [N, L or A], d_value [N] (return units) and, for a Gaussian policy,
  // d_log_std [A].
  bool by_hand() const;
  void tape_forward(const torch::Tensor& obs, MlpTape& t);
  void tape_backward(const MlpTape& t, const torch::Tensor& d_head, const torch::Tensor& d_value,
                     const torch::Tensor& d_log_std);
  // Value of obs [B, obs...] continuing from `state` without changing it (truncation bootstrap).
  torch::Tensor value_after(const torch::Tensor& obs, const torch::Tensor& state) override;
  bool recurrent() const { return py_ ? py_->state_size() > 0 : core_ != nullptr; }
  int64_t state_size() const override { return py_ ? py_->state_size() : core_ ? core_->state_size() : 0; }
  // model.python: the network is a Python module (act() then returns whole distribution rows:
  // logits, or mean ++ log-std, and log_std() is undefined).
  bool python() const { return py_ != nullptr; }
  PythonModel* python_model() { return py_.get(); }
  torch::Tensor initial_state(int64_t B) const override;
  const envs::EnvSpec& spec() const { return spec_; }

  // Normalisation buffers (registered, so they are saved with the parameters and travel in the
  // flat vector): obs_shift/obs_scale [obs_size] with model.obs_norm and float observations, else
  // [0]; value_shift/value_scale [1] (0 and 1 unless PopArt moves them: learner/normalizers.h).
  // The learner's normalisers write them in place.
  torch::Tensor& obs_shift() { return obs_shift_; }
  torch::Tensor& obs_scale() { return obs_scale_; }
  torch::Tensor& value_shift() { return value_shift_; }
  torch::Tensor& value_scale() { return value_scale_; }
  torch::nn::Linear& value_head() { return v_; }
  bool normalizes_obs() const { return obs_shift_.numel() > 0; }
  // (obs - obs_shift) * obs_scale clipped to +-obs_norm_clip, for float obs [..., obs...]; obs as
  // it is without observation normalisation.
  torch::Tensor normalize_obs(const torch::Tensor& obs) const;

 private:
  envs::EnvSpec spec_;
  bool relu_;
  bool separate_critic_ = false;
  bool act_q_ = false;  // ModelOptions::act_q
  // What the torso and a separate critic read: uint8 pixels as floats in [0, 1], float
  // observations normalised (once per forward: both read the same tensor).
  torch::Tensor input(const torch::Tensor& raw) const;
  // The encoder's features of input(raw).
  torch::Tensor torso(const torch::Tensor& obs);
  PolicyOutput heads(const torch::Tensor& h, const torch::Tensor& obs);
  static PolicyOutput unflatten(const PolicyOutput& o, std::vector<int64_t> lead);
  // The value in return units: from the policy's features h, or (separate critic) from input(raw)
  // alone.
  torch::Tensor value_of(const torch::Tensor& h, const torch::Tensor& obs);
  std::vector<torch::nn::Linear> torso_;  // mlp encoder
  std::vector<torch::nn::Linear> critic_;  // model.critic = "separate": the value's own MLP
  ConvEncoder cnn_{nullptr};               // CNN encoders
  int64_t obs_rank_ = 1;
  std::shared_ptr<CoreImpl> core_;
  torch::nn::Linear pi_{nullptr}, v_{nullptr};
  torch::Tensor log_std_;
  torch::Tensor obs_shift_, obs_scale_, value_shift_, value_scale_;
  double obs_clip_ = 10;
  std::shared_ptr<PythonModel> py_;
  torch::Tensor py_obs(const torch::Tensor& raw) const;  // what the Python module sees: float32
  torch::Tensor py_value(const torch::Tensor& v) const;   // its value in return units
  // model.sparse_input: uint8 observations into the MLP encoder. While forward() or unroll() runs
  // on such a batch, sparse_ lists its nonzero entries and the first layers of the torso and the
  // critic read it (models/sparse_input.h) instead of the dense input.
  bool sparse_input_ = false;
  const SparseRows* sparse_ = nullptr;
  bool sparse_ok(const torch::Tensor& obs) const;
  // forward() (no core: obs [N, obs...]) and unroll() (obs [T, B, obs...]) over sparse_ok() obs.
  PolicyOutput sparse_pass(const torch::Tensor& obs, const torch::Tensor& is_init, const torch::Tensor& state0);
  // A layer stack's forward pass with activations, its first layer from sparse_ when set.
  torch::Tensor mlp(std::vector<torch::nn::Linear>& layers, torch::Tensor h);
};
TORCH_MODULE(Policy);

// A [rows, obs...] view (no copy) of observations laid out `row_stride` elements apart from
// `first`, typed as the spec says (float32 or uint8): what Policy::step takes.
torch::Tensor obs_rows(const envs::EnvSpec& spec, void* first, int64_t rows, int64_t row_stride);

// Every parameter and buffer finite (no NaN, no inf); a host sync.
bool all_finite(Policy& p);

// Parameters then buffers (the normalisation statistics): what actors, learners and model.pt share.
int64_t num_params(Policy& p);
// Copies all parameters, in registration order, then the buffers, into dst (num_params floats) /
// from src.
void write_flat(Policy& p, float* dst);
void read_flat(Policy& p, const float* src);

}  // namespace mpirl::models
