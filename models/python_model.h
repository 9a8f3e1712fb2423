#pragma once
// model.python = "file.py:factory": a PyTorch nn.Module, run by the Python that mpirl embeds, in
// place of the built-in network (issue 42). The module has the built-in policy's contract
// (models/policy_model.h):
//   step(obs [B, obs...], is_init [B], state [B, S]) -> (dist, value, state')
//   unroll(obs [T, B, obs...], is_init [T, B], state0 [B, S]) -> (dist, value[, state_T])
//   state_size (an int attribute or method; absent or 0: feed-forward, state [B, 0])
// dist is logits [..., L], or a Gaussian's mean ++ log-std [..., 2A]; value is [...]. The module
// sees float32 observations: uint8 pixels are scaled to [0, 1] and, with model.obs_norm, float
// observations normalised by mpirl first, as for the built-in networks.
//
// Tensors cross without a copy (the same TensorImpl on both sides) and autograd is one engine, so
// PolicyImpl registers the module's parameters and buffers as its own (under "py.") and every
// part of mpirl that works on parameters (optimizer, flat broadcast, checkpoints, model.pt, the
// finite guard) works on the module's. pybind11 stays inside python_model.cpp.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "envs/env.h"

namespace mpirl::models {

struct ModelOptions;
struct PolicyOutput;

class PythonModel {
 public:
  // Imports the file, calls the factory and checks the module once (PythonModel::check's
  // contract). Every failure is a ConfigError naming model.python, the file and the method, with
  // the Python traceback where there is one.
  PythonModel(const envs::EnvSpec& spec, const ModelOptions& opts);
  ~PythonModel();
  PythonModel(const PythonModel&) = delete;
  PythonModel& operator=(const PythonModel&) = delete;

  // The module's named parameters and buffers (Python names, "a.b.c"), sharing its tensors.
  std::vector<std::pair<std::string, torch::Tensor>> parameters() const;
  std::vector<std::pair<std::string, torch::Tensor>> buffers() const;
  int64_t state_size() const { return S_; }
  // The contract's two calls; obs are float32.
  PolicyOutput unroll(const torch::Tensor& obs, const torch::Tensor& is_init, const torch::Tensor& state0);
  PolicyOutput step(const torch::Tensor& obs, const torch::Tensor& is_init, torch::Tensor& state);
  // One step and a short unroll on inputs of the spec: shapes, dtypes, finite outputs, and unroll
  // equal to repeated step with resets inside the sequence. Throws ConfigError naming the method.
  void check();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  envs::EnvSpec spec_;
  std::string where_;  // "config key 'model.python' = \"...\""
  int64_t S_ = 0;
};

// The state size of the module model.python names, for ranks that build no policy (the replay):
// loads it as PythonModel does.
int64_t python_state_size(const envs::EnvSpec& spec, const ModelOptions& opts);

// Releases the GIL for its lifetime where this thread holds it (a backward pass through a Python
// module's graph: autograd threads may need the GIL); nothing without an interpreter.
class GilRelease {
 public:
  GilRelease();
  ~GilRelease();
  GilRelease(const GilRelease&) = delete;
  GilRelease& operator=(const GilRelease&) = delete;

 private:
  void* state_ = nullptr;
};

}  // namespace mpirl::models
