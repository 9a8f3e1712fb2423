#pragma once
// The actor-critic policy: an MLP torso with a distribution head (categorical logits, or a
// diagonal Gaussian with a state-independent log-std) and a value head. Actors run it without
// grad, learners over [T+1, B] batches. Parameters travel as one flat float32 buffer.
#include <torch/torch.h>

#include "envs/env.h"

namespace mpirl::models {

struct ModelOptions {
  std::vector<int64_t> hidden{64, 64};
  std::string activation = "tanh";
};

struct PolicyOutput {
  torch::Tensor dist;   // [..., L]: logits, or (mean, log_std)
  torch::Tensor value;  // [...]
};

class PolicyImpl : public torch::nn::Module {
 public:
  PolicyImpl(const envs::EnvSpec& spec, const ModelOptions& opts);
  PolicyOutput forward(const torch::Tensor& obs);  // obs [..., obs_size]
  const envs::EnvSpec& spec() const { return spec_; }

 private:
  envs::EnvSpec spec_;
  bool relu_;
  std::vector<torch::nn::Linear> torso_;
  torch::nn::Linear pi_{nullptr}, v_{nullptr};
  torch::Tensor log_std_;
};
TORCH_MODULE(Policy);

// Distribution helpers over `dist` from PolicyOutput (discrete: logits; box: mean ++ log_std).
torch::Tensor log_prob(const envs::EnvSpec& spec, const torch::Tensor& dist, const torch::Tensor& actions);
torch::Tensor entropy(const envs::EnvSpec& spec, const torch::Tensor& dist);
// Samples actions ([...] int64, or [..., A] float32) with `gen`.
torch::Tensor sample(const envs::EnvSpec& spec, const torch::Tensor& dist, at::Generator& gen);

int64_t num_params(Policy& p);
// Copies all parameters, in registration order, into dst (num_params floats) / from src.
void write_flat(Policy& p, float* dst);
void read_flat(Policy& p, const float* src);

}  // namespace mpirl::models
