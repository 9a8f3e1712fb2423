#pragma once
// One forward pass of the policy's distribution head over n rows gathered from many actors'
// requests. The caller writes the rows into the engine's host buffers (observations, is_init and
// the core state before the step), calls run(n), and reads the distribution rows and the core
// state after the step from them.
//
// Two paths, one function:
//   CPU  PolicyImpl::act, the local actors' own path (addmm into buffers kept per batch size),
//        so central and local inference agree to the last bits but for the matmul's blocking;
//   GPU  PolicyImpl::step on the device: the host buffers are pinned, copied in (non-blocking),
//        and the outputs copied back in one synchronising copy per batch. (`step_path` runs this
//        path on the CPU too, which is how it is tested without a GPU.)
// The rows' format is the rollout's: logits, or mean ++ log_std (models/sampler.h).
//
// Emulation (benchmarks): emulate_batch_us / emulate_row_us > 0 replace the forward pass by a sleep
// of batch_us + n x row_us and return a uniform policy (zero logits; mean 0 and the policy's
// log_std), the core state unchanged: an accelerator's latency without one.
#include <map>

#include <torch/torch.h>

#include "envs/env.h"
#include "models/policy.h"

namespace mpirl::inference {

struct EngineOptions {
  torch::Device device = torch::kCPU;
  bool step_path = false;  // the GPU path (PolicyImpl::step) even on the CPU
  double emulate_batch_us = 0, emulate_row_us = 0;
  bool emulated() const { return emulate_batch_us > 0 || emulate_row_us > 0; }
};

class Engine {
 public:
  Engine(const envs::EnvSpec& spec, const models::ModelOptions& model, int64_t max_rows, const EngineOptions& opts);
  int64_t max_rows() const { return max_rows_; }
  int64_t state_size() const { return S_; }
  const envs::EnvSpec& spec() const { return spec_; }
  const torch::Device& device() const { return opts_.device; }
  std::string describe() const;

  // New parameters and buffers (models::num_params floats, as broadcast).
  void load(const float* flat);
  models::Policy& policy() { return policy_; }

  // Host buffers of max_rows rows: inputs, then outputs after run().
  char* obs() { return static_cast<char*>(obs_.data_ptr()); }       // rows of spec.obs_bytes()
  uint8_t* is_init() { return init_u8_.data(); }                    // 1 where the core resets
  float* state() { return S_ > 0 ? state_.data_ptr<float>() : nullptr; }  // [rows, S]: in, then out
  const float* dist() const { return dist_.data_ptr<float>(); }     // [rows, dist_size] out
  // Runs rows [0, n).
  void run(int64_t n);

 private:
  void run_act(int64_t n);
  void run_step(int64_t n);
  void run_emulated(int64_t n);

  envs::EnvSpec spec_;
  int64_t max_rows_, S_, L_;
  EngineOptions opts_;
  models::Policy policy_;
  torch::Tensor obs_, state_, dist_, init_f_;  // host (pinned on a GPU engine)
  std::vector<uint8_t> init_u8_;
  std::map<int64_t, models::ActBuffers> act_;  // CPU path: buffers per batch size
};

// Where an inference rank runs: inference.device with the GPU a host's `index`-th inference rank
// takes (index modulo the visible GPUs); throws ConfigError for "cuda" without one.
torch::Device pick_inference_device(const std::string& setting, int index);

}  // namespace mpirl::inference
