#pragma once
// Optimizers whose whole step is device tensor work, with no host-side step count or bias
// correction, so that a step can be captured in a CUDA graph and replayed (learner/graph_step.h).
// LibTorch's C++ torch::optim::Adam computes its bias corrections on the host from an integer step
// count, which a captured graph would freeze at the capture's value.
//   adam:    ATen's fused Adam (one multi-tensor kernel on CUDA, a vectorised loop on CPU) with the
//            step count in a float32 tensor on the parameters' device.
//   rmsprop: foreach tensor ops (no step-dependent term), as torch::optim::RMSprop without centring.
// Both match LibTorch's optimizers within float rounding (tests/unit/test_optimizer.cpp).
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "core/config.h"

namespace mpirl::learner {

class DeviceOptimizer {
 public:
  virtual ~DeviceOptimizer() = default;
  // One step from the parameters' current gradients; a parameter without a gradient is left as
  // it is (and its moments too), as LibTorch's optimizers do. `skip`: a float32 scalar on the
  // parameters' device; where it is 1 the step changes nothing (parameters, moments, step count),
  // decided on the device (no host sync, capturable in a CUDA graph).
  virtual void step(const torch::Tensor& skip) = 0;
  void step() { step(torch::Tensor()); }
  // Gradients to none (the default: a captured backward allocates them in the graph's pool) or
  // to zero in place.
  void zero_grad(bool set_to_none = true);
  // Every state tensor (moments, step count), allocated at construction: a graph warm-up saves
  // and restores them, a checkpoint writes them.
  const std::vector<torch::Tensor>& state() const { return state_; }
  std::vector<torch::Tensor>& params() { return params_; }
  virtual std::string name() const = 0;
  // A scheduled learning rate (learner/schedule.h): with lr_tensor (make_adam/make_rmsprop) the rate
  // is a scalar tensor on the parameters' device that set_lr writes in place, so a captured CUDA
  // graph reads the current rate at each replay; without it set_lr changes the host value.
  void set_lr(double lr);
  double lr() const { return lr_; }

  // The state tensors by position; load() checks their count and shapes and names what differs.
  void save(torch::serialize::OutputArchive& ar) const;
  void load(torch::serialize::InputArchive& ar);

 protected:
  DeviceOptimizer(std::vector<torch::Tensor> params, double lr, bool lr_tensor);
  std::vector<torch::Tensor> params_;
  std::vector<torch::Tensor> state_;
  double lr_;
  torch::Tensor lr_t_;  // [] float32 on the parameters' device (lr_tensor), else undefined
};

struct AdamHyper {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
};
struct RmspropHyper {
  double lr = 1e-2, alpha = 0.99, eps = 1e-8, momentum = 0;
};
std::unique_ptr<DeviceOptimizer> make_adam(std::vector<torch::Tensor> params, const AdamHyper& h,
                                           bool lr_tensor = false);
std::unique_ptr<DeviceOptimizer> make_rmsprop(std::vector<torch::Tensor> params, const RmspropHyper& h,
                                              bool lr_tensor = false);
// learner.optimizer with its learner.* hyper-parameters (a tensor learning rate when
// learner.lr_schedule is not "constant" or learner.kl_target is on).
std::unique_ptr<DeviceOptimizer> make_optimizer(const Config& cfg, std::vector<torch::Tensor> params);

}  // namespace mpirl::learner
