#include "learner/trainer.h"

namespace mpirl::learner {

torch::Tensor clip_grad_norm(const std::vector<torch::Tensor>& params, double max_norm) {
  torch::NoGradGuard g;
  std::vector<torch::Tensor> norms;
  for (auto& p : params)
    if (p.grad().defined()) norms.push_back(p.grad().norm(2));
  if (norms.empty()) return torch::zeros({});
  auto total = torch::stack(norms).norm(2);
  if (max_norm > 0) {
    auto coef = (max_norm / (total + 1e-6)).clamp_max(1.0);
    for (auto& p : params)
      if (p.grad().defined()) p.grad().mul_(coef);
  }
  return total;
}

Trainer::Trainer(const Config& cfg, const envs::EnvSpec& spec, torch::Device device, GradientReducer& reducer)
    : cfg_(cfg), spec_(spec), device_(device), reducer_(reducer) {
  policy_ = models::Policy(spec_, models::model_options(cfg));
  policy_->to(device_);
  params_ = policy_->parameters();
  if (cfg.learner.optimizer == "adam") {
    optim_ = std::make_unique<torch::optim::Adam>(params_, torch::optim::AdamOptions(cfg.learner.lr)
                                                               .betas({cfg.learner.adam_beta1, cfg.learner.adam_beta2})
                                                               .eps(cfg.learner.eps));
  } else {
    optim_ = std::make_unique<torch::optim::RMSprop>(params_, torch::optim::RMSpropOptions(cfg.learner.lr)
                                                                  .alpha(cfg.learner.rmsprop_alpha)
                                                                  .eps(cfg.learner.eps)
                                                                  .momentum(cfg.learner.rmsprop_momentum));
  }
  lo_.gamma = cfg.learner.gamma;
  lo_.value_coef = cfg.learner.value_coef;
  lo_.entropy_coef = cfg.learner.entropy_coef;
  lo_.appo_clip = cfg.learner.appo_clip;
  lo_.vtrace.rho_bar = cfg.learner.rho_bar;
  lo_.vtrace.c_bar = cfg.learner.c_bar;
  lo_.vtrace.lambda = cfg.learner.lambda;
}

void Trainer::bootstrap(TrainBatch& batch, const BootInputs& boot) {
  batch.trunc_value = torch::zeros_like(batch.rewards);
  if (boot.count == 0) return;
  torch::NoGradGuard g;
  auto v = policy_->value_after(boot.obs, boot.state);
  batch.trunc_value.index_put_({boot.t, boot.b}, v.to(batch.trunc_value.scalar_type()));
}

torch::Tensor Trainer::step(const LossTerms& l) {
  optim_->zero_grad();
  l.total.backward();
  reducer_.average(params_);
  auto norm = clip_grad_norm(params_, cfg_.learner.max_grad_norm);
  optim_->step();
  return norm;
}

UpdateResult Trainer::update(TrainBatch& batch, const BootInputs& boot) {
  policy_->train();
  bootstrap(batch, boot);
  UpdateResult r;
  if (cfg_.learner.algo == "impala") {
    auto out = policy_->unroll(batch.obs, batch.is_init, batch.state0);
    r.last = impala_loss(spec_, batch, out, lo_);
    r.grad_norm = step(r.last);
    r.priorities = r.last.priorities;
    r.steps = 1;
    return r;
  }
  std::vector<torch::Tensor> prios;
  const int64_t B = batch.rewards.size(1), mb = B / cfg_.learner.appo_minibatches;
  for (int ep = 0; ep < cfg_.learner.appo_epochs; ++ep) {
    for (int64_t s = 0; s < B; s += mb) {
      auto sub = batch.slice_batch(s, s + mb);
      auto out = policy_->unroll(sub.obs, sub.is_init, sub.state0);
      r.last = appo_loss(spec_, sub, out, lo_);
      r.grad_norm = step(r.last);
      ++r.steps;
      if (ep == 0) prios.push_back(r.last.priorities);
    }
  }
  r.priorities = torch::cat(prios);
  return r;
}

void Trainer::save(torch::serialize::OutputArchive& ar) {
  torch::serialize::OutputArchive model, optim;
  policy_->save(model);
  optim_->save(optim);
  ar.write("model", model);
  ar.write("optimizer", optim);
  at::Generator cpu = at::detail::getDefaultCPUGenerator();
  {
    std::lock_guard<std::mutex> lock(cpu.mutex());
    ar.write("rng_cpu", cpu.get_state());
  }
  if (device_.is_cuda()) {
    at::Generator dev = at::globalContext().defaultGenerator(device_);
    std::lock_guard<std::mutex> lock(dev.mutex());
    ar.write("rng_device", dev.get_state());
  }
}

void Trainer::load(torch::serialize::InputArchive& ar) {
  torch::serialize::InputArchive model, optim;
  ar.read("model", model);
  ar.read("optimizer", optim);
  policy_->load(model);
  policy_->to(device_);
  optim_->load(optim);
  torch::Tensor rng;
  ar.read("rng_cpu", rng);
  at::Generator cpu = at::detail::getDefaultCPUGenerator();
  {
    std::lock_guard<std::mutex> lock(cpu.mutex());
    cpu.set_state(rng);
  }
  if (device_.is_cuda() && ar.try_read("rng_device", rng)) {
    at::Generator dev = at::globalContext().defaultGenerator(device_);
    std::lock_guard<std::mutex> lock(dev.mutex());
    dev.set_state(rng);
  }
}

}  // namespace mpirl::learner
