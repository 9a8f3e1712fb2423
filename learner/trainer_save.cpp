// Trainer's checkpoint (learner.pt): parameters, optimizer state, normalisers, PopArt, the
// algorithm's own state (R2D2's target network) and the torch RNG states (learner/trainer.h).
#include <fmt/format.h>

#include "core/error.h"
#include "learner/trainer.h"
#include "models/policy_file.h"

namespace mpirl::learner {

void Trainer::save(torch::serialize::OutputArchive& ar) {
  torch::serialize::OutputArchive model, optim;
  policy_->save(model);
  optim_->save(optim);
  ar.write("model", model);
  ar.write("optimizer", optim);
  torch::serialize::OutputArchive obs, popart;
  obs_norm_.save(obs);
  ar.write("obs_norm", obs);
  if (popart_) {
    popart_->save(popart);
    ar.write("popart", popart);
  }
  if (algo_->has_state()) {
    torch::serialize::OutputArchive a;
    algo_->save(a);
    ar.write("algorithm", a);
  }
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
  ar.write("kl_factor", torch::tensor(kl_factor_, torch::kFloat64));  // learner.kl_target's rate factor
}

void Trainer::load(torch::serialize::InputArchive& ar) {
  torch::serialize::InputArchive model, optim;
  ar.read("model", model);
  ar.read("optimizer", optim);
  models::load_policy_archive(policy_, model, "learner.pt's model");
  policy_->to(device_);
  optim_->load(optim);
  torch::serialize::InputArchive obs, popart;
  if (ar.try_read("obs_norm", obs)) obs_norm_.load(obs);
  else if (obs_norm_.enabled()) throw Error("learner.pt has no observation statistics (saved without model.obs_norm)");
  if (popart_) {
    if (!ar.try_read("popart", popart))
      throw Error("learner.pt has no PopArt statistics: saved with learner.value_norm = \"none\" or by an mpirl "
                  "before PopArt; resume it with --set learner.value_norm='\"none\"'");
    popart_->load(popart);
  }
  if (algo_->has_state()) {
    torch::serialize::InputArchive a;
    if (!ar.try_read("algorithm", a))
      throw Error(fmt::format("learner.pt has no state of learner.algo = \"{}\" (saved by another algorithm)", algo_->name()));
    algo_->load(a);
  }
  static_.reset();  // captured against the tensors before the load: captured again at the next update
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
  // Saved by an mpirl before learner.kl_target: the factor starts again at 1.
  torch::Tensor kl;
  kl_factor_ = ar.try_read("kl_factor", kl) ? kl.item<double>() : 1.0;
  apply_lr();
}

}  // namespace mpirl::learner
