#include "learner/optimizer.h"

#include <optional>

#include <fmt/format.h>

#include "core/error.h"

namespace mpirl::learner {

DeviceOptimizer::DeviceOptimizer(std::vector<torch::Tensor> params, double lr, bool lr_tensor)
    : params_(std::move(params)), lr_(lr) {
  if (lr_tensor && !params_.empty())
    lr_t_ = torch::full({}, lr, params_[0].options().dtype(torch::kFloat32).requires_grad(false));
}

void DeviceOptimizer::set_lr(double lr) {
  lr_ = lr;
  if (lr_t_.defined()) {
    torch::NoGradGuard g;
    lr_t_.fill_(lr);
  }
}

void DeviceOptimizer::zero_grad(bool set_to_none) {
  for (auto& p : params_) {
    if (!p.grad().defined()) continue;
    if (set_to_none) p.mutable_grad() = torch::Tensor();
    else p.mutable_grad().zero_();
  }
}

void DeviceOptimizer::save(torch::serialize::OutputArchive& ar) const {
  ar.write("count", torch::tensor(int64_t(state_.size())));
  for (size_t i = 0; i < state_.size(); ++i) ar.write(fmt::format("s{}", i), state_[i].detach().cpu());
}

void DeviceOptimizer::load(torch::serialize::InputArchive& ar) {
  torch::Tensor count;
  if (!ar.try_read("count", count))
    throw Error(fmt::format("optimizer state ({}): no 'count' entry; written by another optimizer or an older mpirl",
                            name()));
  if (count.item<int64_t>() != int64_t(state_.size()))
    throw Error(fmt::format("optimizer state ({}): {} tensors in the checkpoint, this model needs {}", name(),
                            count.item<int64_t>(), state_.size()));
  torch::NoGradGuard g;
  for (size_t i = 0; i < state_.size(); ++i) {
    torch::Tensor t;
    ar.read(fmt::format("s{}", i), t);
    if (t.sizes() != state_[i].sizes())
      throw Error(fmt::format("optimizer state ({}): tensor {} has shape {}, this model needs {}", name(), i,
                              fmt::join(t.sizes(), "x"), fmt::join(state_[i].sizes(), "x")));
    if (t.scalar_type() != state_[i].scalar_type())
      throw Error(fmt::format("optimizer state ({}): tensor {} is {}, this model needs {}", name(), i,
                              c10::toString(t.scalar_type()), c10::toString(state_[i].scalar_type())));
    state_[i].copy_(t);  // in place: a captured graph keeps pointing at these tensors
  }
}

namespace {

class Adam final : public DeviceOptimizer {
 public:
  Adam(std::vector<torch::Tensor> params, const AdamHyper& h, bool lr_tensor)
      : DeviceOptimizer(std::move(params), h.lr, lr_tensor), h_(h) {
    // Per parameter: step (float32 scalar on its device), exp_avg, exp_avg_sq. The steps are
    // elements of one tensor (on the first parameter's device: all must share it, as the fused
    // kernel needs), so that a step where every parameter has a gradient counts them all with one
    // op, not one per parameter.
    if (!params_.empty()) steps_ = torch::zeros({int64_t(params_.size())}, params_[0].options().dtype(torch::kFloat32));
    for (size_t i = 0; i < params_.size(); ++i) {
      state_.push_back(steps_[int64_t(i)]);
      state_.push_back(torch::zeros_like(params_[i], torch::MemoryFormat::Contiguous));
      state_.push_back(torch::zeros_like(params_[i], torch::MemoryFormat::Contiguous));
    }
  }
  std::string name() const override { return "adam (fused, device step count)"; }
  void step(const torch::Tensor& skip) override {
    torch::NoGradGuard g;
    std::vector<torch::Tensor> p, gr, steps, m, v;
    for (size_t i = 0; i < params_.size(); ++i) {
      if (!params_[i].grad().defined()) continue;
      p.push_back(params_[i]);
      gr.push_back(params_[i].grad());
      steps.push_back(state_[3 * i]);
      m.push_back(state_[3 * i + 1]);
      v.push_back(state_[3 * i + 2]);
    }
    if (p.empty()) return;
    const bool all = p.size() == params_.size();
    // the fused kernel reads the incremented count (as torch.optim.Adam)
    if (all) steps_.add_(1);
    else at::_foreach_add_(steps, 1);
    // found_inf = skip: the fused kernel leaves parameters and moments as they are (what
    // torch.optim.Adam does for GradScaler), and the count goes back, as torch.optim.Adam does.
    const std::optional<torch::Tensor> found_inf = skip.defined() ? std::optional<torch::Tensor>(skip) : std::nullopt;
    if (lr_t_.defined())
      at::_fused_adam_(p, gr, m, v, {}, steps, lr_t_, h_.beta1, h_.beta2, /*weight_decay=*/0.0, h_.eps,
                       /*amsgrad=*/false, /*maximize=*/false, /*grad_scale=*/std::nullopt, found_inf);
    else
      at::_fused_adam_(p, gr, m, v, {}, steps, lr_, h_.beta1, h_.beta2, /*weight_decay=*/0.0, h_.eps,
                       /*amsgrad=*/false, /*maximize=*/false, /*grad_scale=*/std::nullopt, found_inf);
    if (skip.defined()) {
      if (all) steps_.sub_(skip);
      else at::_foreach_sub_(steps, std::vector<torch::Tensor>(steps.size(), skip));
    }
  }

 private:
  AdamHyper h_;
  torch::Tensor steps_;  // [parameters] float32: the state's step counts are its elements
};

class Rmsprop final : public DeviceOptimizer {
 public:
  Rmsprop(std::vector<torch::Tensor> params, const RmspropHyper& h, bool lr_tensor)
      : DeviceOptimizer(std::move(params), h.lr, lr_tensor), h_(h) {
    // Per parameter: square_avg, then (momentum > 0) the momentum buffer.
    for (auto& p : params_) {
      state_.push_back(torch::zeros_like(p, torch::MemoryFormat::Contiguous));
      if (h_.momentum > 0) state_.push_back(torch::zeros_like(p, torch::MemoryFormat::Contiguous));
    }
  }
  std::string name() const override { return "rmsprop (foreach)"; }
  void step(const torch::Tensor& skip) override {
    torch::NoGradGuard g;
    const size_t per = h_.momentum > 0 ? 2 : 1;
    std::vector<torch::Tensor> p, gr, sq, buf;
    for (size_t i = 0; i < params_.size(); ++i) {
      if (!params_[i].grad().defined()) continue;
      p.push_back(params_[i]);
      gr.push_back(params_[i].grad());
      sq.push_back(state_[per * i]);
      if (per == 2) buf.push_back(state_[per * i + 1]);
    }
    if (p.empty()) return;
    if (skip.defined()) {  // the step on copies, kept only where skip is 0 (NaN-proof: a select)
      std::vector<torch::Tensor> all = p;
      all.insert(all.end(), sq.begin(), sq.end());
      all.insert(all.end(), buf.begin(), buf.end());
      const auto before = at::_foreach_mul(all, 1.0);
      update(p, gr, sq, buf);
      const auto keep = skip.to(torch::kBool);
      for (size_t i = 0; i < all.size(); ++i) all[i].copy_(torch::where(keep, before[i], all[i]));
      return;
    }
    update(p, gr, sq, buf);
  }

 private:
  void update(std::vector<torch::Tensor>& p, std::vector<torch::Tensor>& gr, std::vector<torch::Tensor>& sq,
              std::vector<torch::Tensor>& buf) {
    const size_t per = buf.empty() ? 1 : 2;
    at::_foreach_mul_(sq, h_.alpha);
    at::_foreach_addcmul_(sq, gr, gr, 1 - h_.alpha);
    auto avg = at::_foreach_sqrt(sq);
    at::_foreach_add_(avg, h_.eps);
    if (per == 2) {
      at::_foreach_mul_(buf, h_.momentum);
      at::_foreach_addcdiv_(buf, gr, avg);
      if (lr_t_.defined()) {
        auto d = at::_foreach_mul(buf, lr_t_);
        at::_foreach_sub_(p, d);
      } else {
        at::_foreach_add_(p, buf, -lr_);
      }
    } else if (lr_t_.defined()) {
      auto d = at::_foreach_div(gr, avg);
      at::_foreach_mul_(d, lr_t_);
      at::_foreach_sub_(p, d);
    } else {
      at::_foreach_addcdiv_(p, gr, avg, -lr_);
    }
  }

  RmspropHyper h_;
};

}  // namespace

std::unique_ptr<DeviceOptimizer> make_adam(std::vector<torch::Tensor> params, const AdamHyper& h, bool lr_tensor) {
  return std::make_unique<Adam>(std::move(params), h, lr_tensor);
}

std::unique_ptr<DeviceOptimizer> make_rmsprop(std::vector<torch::Tensor> params, const RmspropHyper& h,
                                              bool lr_tensor) {
  return std::make_unique<Rmsprop>(std::move(params), h, lr_tensor);
}

std::unique_ptr<DeviceOptimizer> make_optimizer(const Config& cfg, std::vector<torch::Tensor> params) {
  const auto& l = cfg.learner;
  // A tensor rate wherever it changes during the run (a captured graph reads it at each replay).
  const bool scheduled = l.lr_schedule != "constant" || l.kl_target > 0;
  if (l.optimizer == "adam")
    return make_adam(std::move(params), {l.lr, l.adam_beta1, l.adam_beta2, l.eps}, scheduled);
  if (l.optimizer == "rmsprop")
    return make_rmsprop(std::move(params), {l.lr, l.rmsprop_alpha, l.eps, l.rmsprop_momentum}, scheduled);
  throw Error(fmt::format("learner.optimizer = \"{}\": expected \"adam\" or \"rmsprop\"", l.optimizer));
}

}  // namespace mpirl::learner
