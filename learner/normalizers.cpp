#include "learner/normalizers.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"

namespace mpirl::learner {

namespace {
const auto kF64 = torch::kFloat64;

torch::Tensor read_tensor(torch::serialize::InputArchive& ar, const std::string& key, const std::string& what) {
  torch::Tensor t;
  if (!ar.try_read(key, t)) throw Error(fmt::format("checkpoint: {} has no '{}' entry", what, key));
  return t;
}

// The weight and bias of the layer whose output is the value: the built-in head, or a Python
// module's value_head (models/policy_options.cpp checked at start that the value is its output).
std::pair<torch::Tensor, torch::Tensor> value_head_of(models::Policy& p) {
  if (!p->python()) return {p->value_head()->weight, p->value_head()->bias};
  const auto params = p->named_parameters();
  const auto* w = params.find("py.value_head.weight");
  const auto* b = params.find("py.value_head.bias");
  MPIRL_CHECK(w && b, "PopArt: the Python module has no value_head.weight and value_head.bias");
  return {*w, *b};
}
}  // namespace

RunningMoments::RunningMoments(int64_t dim, torch::Device device)
    : mean_(torch::zeros({dim}, torch::TensorOptions().dtype(kF64).device(device))), m2_(torch::zeros_like(mean_)) {}

void RunningMoments::merge(double n, const torch::Tensor& batch_mean, const torch::Tensor& batch_var) {
  if (n <= 0) return;
  torch::NoGradGuard g;
  const double total = count_ + n;
  auto delta = batch_mean.to(kF64) - mean_;
  m2_.add_(batch_var.to(kF64) * n + delta.square() * (count_ * n / total));
  mean_.add_(delta * (n / total));
  count_ = total;
}

torch::Tensor RunningMoments::var() const { return count_ > 0 ? m2_ / count_ : torch::zeros_like(m2_); }

void RunningMoments::save(torch::serialize::OutputArchive& ar) const {
  ar.write("count", torch::tensor(count_, kF64));
  ar.write("mean", mean_.cpu());
  ar.write("m2", m2_.cpu());
}

void RunningMoments::load(torch::serialize::InputArchive& ar) {
  auto mean = read_tensor(ar, "mean", "running moments"), m2 = read_tensor(ar, "m2", "running moments");
  if (mean.sizes() != mean_.sizes() || m2.sizes() != m2_.sizes())
    throw Error(fmt::format("checkpoint: running moments of {} values, this model normalises {}", mean.numel(),
                            mean_.numel()));
  torch::NoGradGuard g;
  mean_.copy_(mean);
  m2_.copy_(m2);
  count_ = read_tensor(ar, "count", "running moments").item<double>();
}

ObsNormalizer::ObsNormalizer(models::Policy& policy, AverageFn average, int learners)
    : policy_(policy),
      average_(std::move(average)),
      learners_(std::max(1, learners)),
      enabled_(policy->normalizes_obs()),
      moments_(policy->obs_shift().numel(), policy->obs_shift().device()) {}

void ObsNormalizer::update(const torch::Tensor& obs) {
  if (!enabled_) return;
  torch::NoGradGuard g;
  const int64_t dim = moments_.mean().size(0);
  auto x = obs.reshape({-1, dim}).to(kF64);
  // Centred on the running mean (the same on every learner), so that the squares stay well
  // conditioned once the statistics have settled.
  auto d = x - moments_.mean();
  auto s = torch::stack({d.mean(0), d.square().mean(0)});
  if (average_) average_(s);
  auto m1 = s[0];
  moments_.merge(double(x.size(0)) * learners_, moments_.mean() + m1, (s[1] - m1.square()).clamp_min(0.0));
  publish();
}

void ObsNormalizer::publish() {
  torch::NoGradGuard g;
  policy_->obs_shift().copy_(moments_.mean());
  policy_->obs_scale().copy_((moments_.var() + 1e-8).rsqrt());
}

void ObsNormalizer::load(torch::serialize::InputArchive& ar) {
  moments_.load(ar);
  if (enabled_) publish();
}

PopArt::PopArt(models::Policy& policy, double decay, AverageFn average)
    : policy_(policy),
      decay_(decay),
      average_(std::move(average)),
      mu_(torch::zeros({}, torch::TensorOptions().dtype(kF64).device(policy->value_shift().device()))),
      nu_(torch::ones_like(mu_)) {}

torch::Tensor PopArt::sigma() const { return (nu_ - mu_.square()).clamp_min(1e-8).sqrt().clamp(1e-4, 1e6); }

void PopArt::update(const torch::Tensor& target_mean, const torch::Tensor& target_sq_mean, const torch::Tensor& skip) {
  torch::NoGradGuard g;
  auto s = torch::stack({target_mean.reshape({}).to(kF64), target_sq_mean.reshape({}).to(kF64)});
  if (average_) average_(s);
  ++updates_;
  const double beta = std::max(decay_, 1.0 / double(updates_));
  s = s.to(mu_.device());
  // Held (on the device, no sync): non-finite targets, or a skipped step.
  auto hold = torch::logical_not(torch::isfinite(s).all());
  if (skip.defined()) hold = torch::logical_or(hold, skip.to(mu_.device()).to(torch::kBool));
  auto old_mu = policy_->value_shift().to(kF64);
  auto old_sigma = policy_->value_scale().to(kF64);
  mu_.copy_(torch::where(hold, mu_, mu_ * (1.0 - beta) + s[0] * beta));
  nu_.copy_(torch::where(hold, nu_, nu_ * (1.0 - beta) + s[1] * beta));
  auto sigma = this->sigma();
  auto [weight, bias] = value_head_of(policy_);
  // Outputs preserved: sigma' (w' h + b') + mu' = sigma (w h + b) + mu.
  auto w = weight * (old_sigma / sigma).to(weight.scalar_type());
  auto b = ((old_sigma * bias.to(kF64) + old_mu - mu_) / sigma).to(bias.scalar_type());
  weight.copy_(torch::where(hold, weight, w));
  bias.copy_(torch::where(hold, bias, b));
  policy_->value_shift().copy_(mu_.reshape({1}));
  policy_->value_scale().copy_(sigma.reshape({1}));
}

void PopArt::save(torch::serialize::OutputArchive& ar) const {
  ar.write("updates", torch::tensor(updates_));
  ar.write("mu", mu_.cpu());
  ar.write("nu", nu_.cpu());
}

void PopArt::load(torch::serialize::InputArchive& ar) {
  torch::NoGradGuard g;
  mu_.copy_(read_tensor(ar, "mu", "PopArt"));
  nu_.copy_(read_tensor(ar, "nu", "PopArt"));
  updates_ = read_tensor(ar, "updates", "PopArt").item<int64_t>();
}

}  // namespace mpirl::learner
