#include "learner/trainer.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/error.h"
#include "learner/algorithms/make_algorithm.h"
#include "learner/schedule.h"

namespace mpirl::learner {

torch::Tensor clip_grad_norm(const std::vector<torch::Tensor>& params, double max_norm) {
  torch::NoGradGuard g;
  std::vector<torch::Tensor> grads;
  for (auto& p : params)
    if (p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) return torch::zeros({});
  // Multi-tensor ops: one for the norms and one for the scaling, not one of each per parameter
  // (dispatches are most of a small MLP's step on a CPU).
  auto total = torch::stack(at::_foreach_norm(grads, 2)).norm(2);
  if (max_norm > 0) at::_foreach_mul_(grads, (max_norm / (total + 1e-6)).clamp_max(1.0));
  return total;
}

namespace {
StepMode resolve(StepMode m, const Config& cfg, torch::Device device) {
  if (m == StepMode::Auto) return device.is_cuda() && cfg.learner.cuda_graph ? StepMode::Graph : StepMode::Eager;
  MPIRL_CHECK(m != StepMode::Graph || device.is_cuda(), "CUDA-graph steps need a CUDA device, not {}", device.str());
  return m;
}
}  // namespace

namespace {
models::Policy make_policy(const Config& cfg, const envs::EnvSpec& spec, torch::Device device) {
  models::Policy p(spec, models::model_options(cfg));
  p->to(device);
  return p;
}
}  // namespace

Trainer::Trainer(const Config& cfg, const envs::EnvSpec& spec, torch::Device device, GradientReducer& reducer,
                 StepMode mode, AverageFn average, int learners)
    : cfg_(cfg),
      spec_(spec),
      device_(device),
      reducer_(reducer),
      policy_(make_policy(cfg, spec, device)),
      model_(policy_.ptr()),
      algo_(make_algorithm(cfg)),
      lo_(loss_options(cfg)),
      mode_(resolve(mode, cfg, device)),
      obs_norm_(policy_, average, learners),
      average_(average) {
  algo_->attach(model_, [this] { return make_policy(cfg_, spec_, device_).ptr(); });
  params_ = model_->parameters();
  optim_ = make_optimizer(cfg, params_);
  if (cfg.learner.entropy_schedule != "constant")
    lo_.entropy_coef_t = torch::full({}, cfg.learner.entropy_coef, torch::TensorOptions().device(device_));
  if (cfg.learner.value_norm == "popart") {
    popart_ = std::make_unique<PopArt>(policy_, cfg.learner.value_norm_decay, average);
    lo_.value_scale = policy_->value_scale();  // the buffer itself: PopArt updates it in place
  }
  const auto f = torch::TensorOptions().dtype(torch::kFloat32).device(device_);
  skip_ = torch::zeros({}, f);
  skipped_ = torch::zeros({}, f);
  in_a_row_ = torch::zeros({}, f);
  nan_ = torch::zeros({}, f);
}

void Trainer::apply_lr() {
  const auto& l = cfg_.learner;
  const double base = l.lr_schedule == "constant" ? l.lr : scheduled(l.lr_schedule, l.lr, l.lr_final, progress_);
  optim_->set_lr(lr_factor_ * kl_factor_ * base);
}

void Trainer::set_progress(double f) {
  const auto& l = cfg_.learner;
  progress_ = f;
  if (l.lr_schedule != "constant") apply_lr();
  if (lo_.entropy_coef_t.defined()) {
    torch::NoGradGuard g;
    lo_.entropy_coef = scheduled(l.entropy_schedule, l.entropy_coef, l.entropy_coef_final, f);
    lo_.entropy_coef_t.fill_(lo_.entropy_coef);
  }
}

void Trainer::bootstrap(TrainBatch& batch, const BootInputs& boot) {
  batch.trunc_value = torch::zeros_like(batch.rewards);
  if (boot.count == 0) return;
  torch::NoGradGuard g;
  auto v = algo_->bootstrap_value(*model_, boot.obs, boot.state);
  batch.trunc_value.index_put_({boot.t, boot.b}, v.to(batch.trunc_value.scalar_type()));
}

void Trainer::set_mode(StepMode m) {
  mode_ = resolve(m, cfg_, device_);
  if (!capture_failure_.empty() && mode_ != StepMode::Eager) mode_ = StepMode::Eager;  // tried once: no retries
  static_.reset();
}

std::string Trainer::describe() const {
  const char* m = mode_ == StepMode::Graph    ? "CUDA graph"
                  : mode_ == StepMode::Static ? "static buffers, uncaptured"
                                              : "eager";
  std::string s = fmt::format("{} steps, {}", m, optim_->name());
  if (!cfg_.model.python.empty())
    s += fmt::format(", model.python {}{}", cfg_.model.python,
                     capture_failure_.empty() ? "" : " (its step could not be captured: eager)");
  if (mode_ == StepMode::Graph && !reducer_.capturable())
    s += ", two graphs around the host all-reduce (the reducer cannot be captured)";
  return s;
}

StepFns Trainer::step_fns() {
  StepFns f;
  f.grad = [this](const TrainBatch& b) {
    optim_->zero_grad(true);
    LossTerms by_hand;  // an eager CPU step where the algorithm has the gradient in closed form
    if (mode_ == StepMode::Eager && !nan_on_ && cfg_.learner.grad_by_hand &&
        algo_->grad_by_hand(spec_, *model_, b, lo_, by_hand))
      return by_hand;
    auto out = algo_->forward(*model_, b);
    LossTerms l = algo_->loss(spec_, b, out, lo_);
    // x 1, or from the test hook on x NaN: NaN loss and gradients (an eager step leaves out the x 1)
    if (mode_ != StepMode::Eager || nan_on_) l.total = l.total * (1 + nan_);
    {
      models::GilRelease gil;  // model.python: autograd threads may need the GIL for the module's graph
      l.total.backward();
    }
    return l;
  };
  f.apply = [this] {
    auto norm = clip_grad_norm(params_, cfg_.learner.max_grad_norm);
    // Skipped on the device when the averaged gradient norm (the same on every learner) is not
    // finite: a NaN or inf loss, gradient or parameter shows there.
    torch::NoGradGuard g;
    skip_.copy_(torch::logical_not(torch::isfinite(norm)).to(torch::kFloat32));
    optim_->step(skip_);
    skipped_.add_(skip_);
    in_a_row_.add_(skip_).mul_(skip_);
    return norm;
  };
  return f;
}

StepOut Trainer::step(const TrainBatch& b) {
  if (mode_ == StepMode::Eager) {
    auto f = step_fns();
    StepOut o;
    o.loss = f.grad(b);
    reducer_.average(params_);
    o.grad_norm = f.apply();
    return o;
  }
  if (!static_) {
    std::vector<torch::Tensor> state = params_;
    for (auto& t : optim_->state()) state.push_back(t);
    for (auto* t : {&skip_, &skipped_, &in_a_row_}) state.push_back(*t);  // a warm-up leaves no count
    static_ = std::make_unique<StaticStep>(mode_ == StepMode::Graph ? StaticStep::Mode::Graph
                                                                     : StaticStep::Mode::Uncaptured,
                                           step_fns(), reducer_, params_, std::move(state));
  }
  if (cfg_.model.python.empty() || static_->graphs() > 0) return static_->run(b);  // static outputs: the
                                                                                  // caller clones them
  // A Python module may do what a capture cannot (a host sync, a data-dependent shape): its first
  // static step falls back to eager steps, said once in the log. The warm-up was undone and a
  // failed capture ran nothing, so the parameters and optimizer state are as before the attempt.
  try {
    return static_->run(b);
  } catch (const CaptureError& e) {
    capture_failure_ = e.what();
    spdlog::warn("model.python {}: the learner step runs eagerly, {}", cfg_.model.python, capture_failure_);
    mode_ = StepMode::Eager;
    static_.reset();
    return step(b);  // its zero_grad(true) drops gradients the capture left
  }
}

namespace {
// Copies of the loss terms (the static step's outputs are overwritten by its next run).
LossTerms own(const LossTerms& l) {
  auto c = [](const torch::Tensor& t) { return t.defined() ? t.detach().clone() : t; };
  return {c(l.total),         c(l.policy),     c(l.value),       c(l.entropy),       c(l.clip_fraction),
          c(l.mean_rho),      c(l.priorities), c(l.target_mean), c(l.target_sq_mean), c(l.q_mean)};
}
}  // namespace

void Trainer::after_update(UpdateResult& r) {
  r.lr = optim_->lr();
  r.entropy_coef = lo_.entropy_coef;
  if (!popart_) return;
  popart_->update(r.last.target_mean, r.last.target_sq_mean, skip_);
  r.value_mu = popart_->mu();
  r.value_sigma = popart_->sigma();
}

namespace {
// A random order of B columns from the CPU generator, on `device` (one pinned, asynchronous copy).
torch::Tensor shuffle_order_on(int64_t B, torch::Device device) {
  auto order = torch::randperm(B, torch::kLong);
  return device.is_cuda() ? order.pin_memory().to(device, /*non_blocking=*/true) : order;
}
}  // namespace

UpdateResult Trainer::update(TrainBatch& received, const BootInputs& boot) {
  model_->train();
  if (obs_norm_.enabled()) obs_norm_.update(received.obs.slice(0, 0, received.rewards.size(0)));
  bootstrap(received, boot);
  // prepare() may add fields or reshape (APPO over steps): on a copy of the tensor handles, so that
  // the batch source's batch keeps its [T, B] shape.
  TrainBatch batch = received;
  algo_->prepare(spec_, *model_, batch, lo_);
  UpdateResult r;
  const bool copies = mode_ != StepMode::Eager;
  std::vector<torch::Tensor> prios;
  const int64_t B = batch.rewards.size(1), mb = B / algo_->minibatches();
  StepOut o;
  TrainBatch shuffled;
  for (int ep = 0; ep < algo_->epochs(); ++ep) {
    // The order comes from the CPU generator (seeded by run.seed; its state is saved with the
    // learner's and restored on resume), so the self-check's repeated update draws the same orders.
    const TrainBatch& order = algo_->shuffles() ? shuffled = batch.select_batch(shuffle_order_on(B, device_)) : batch;
    for (int64_t s = 0; s < B; s += mb) {
      // The logging-only loss terms are read from the update's last step, and the priorities
      // from the first pass where prepare() did not set them: an eager step computes them there
      // only (a static step's captured graph always does).
      lo_.stats = copies || (ep + 1 == algo_->epochs() && s + mb >= B) || (ep == 0 && !batch.priorities.defined());
      // A static step copies the slice into its buffers; one minibatch is the batch itself.
      o = step(mb == B ? order : order.slice_batch(s, s + mb));
      algo_->after_step();
      ++r.steps;
      if (ep == 0 && !batch.priorities.defined())  // otherwise prepare() computed them
        prios.push_back(copies ? o.loss.priorities.clone() : o.loss.priorities);
    }
  }
  lo_.stats = true;
  r.last = copies ? own(o.loss) : o.loss;
  r.grad_norm = copies ? o.grad_norm.clone() : o.grad_norm;
  r.priorities = batch.priorities.defined() ? batch.priorities : prios.size() == 1 ? prios[0] : torch::cat(prios);
  after_update(r);
  if (const double target = cfg_.learner.kl_target; target > 0) {
    r.kl = measure_kl(batch);
    // A non-finite KL (the non-finite guard's business) leaves the rate as it is.
    if (r.kl > 2 * target) kl_factor_ = std::max(kKlFactorMin, kl_factor_ / 1.5);
    else if (r.kl < target / 2) kl_factor_ = std::min(kKlFactorMax, kl_factor_ * 1.5);
    apply_lr();
  }
  return r;
}

Trainer::NonFinite Trainer::nonfinite() const {
  const auto both = torch::stack({skipped_, in_a_row_}).to(torch::kCPU, torch::kFloat64);
  const double* v = both.data_ptr<double>();
  return {int64_t(v[0]), int64_t(v[1])};
}

bool Trainer::parameters_finite() const {
  models::Policy p = policy_;
  return models::all_finite(p);
}

std::vector<torch::Tensor> Trainer::state_tensors() const {
  std::vector<torch::Tensor> all = model_->parameters();
  for (const auto& t : model_->buffers()) all.push_back(t);
  for (const auto& t : optim_->state()) all.push_back(t);
  if (popart_)
    for (const auto& t : popart_->state()) all.push_back(t);
  for (const auto& t : algo_->state_tensors()) all.push_back(t);
  return all;
}

void Trainer::snapshot() {
  torch::NoGradGuard g;
  snapshot_.clear();
  for (const auto& t : state_tensors()) snapshot_.push_back(t.detach().clone());
}

bool Trainer::restore(double lr_factor) {
  if (snapshot_.empty()) return false;
  torch::NoGradGuard g;
  std::vector<torch::Tensor> all = state_tensors();
  MPIRL_CHECK(all.size() == snapshot_.size(), "snapshot of {} tensors for {}", snapshot_.size(), all.size());
  for (size_t i = 0; i < all.size(); ++i) all[i].copy_(snapshot_[i]);  // in place: a captured graph keeps them
  in_a_row_.zero_();
  lr_factor_ *= lr_factor;
  apply_lr();
  return true;
}

void Trainer::inject_nan(bool on) {
  torch::NoGradGuard g;
  nan_.fill_(on ? std::nan("") : 0.0);
  nan_on_ = on;
}

}  // namespace mpirl::learner
