#include "learner/algorithms/r2d2/r2d2.h"

#include <fmt/format.h>

#include "core/error.h"
#include "learner/algorithms/actor_critic.h"
#include "learner/algorithms/r2d2/targets.h"

namespace mpirl::learner {

namespace {
// The tensors a copy of the online network into the target covers: parameters and buffers
// (observation statistics included), by name.
std::vector<std::pair<std::string, torch::Tensor>> named_tensors(const models::PolicyModel& m) {
  std::vector<std::pair<std::string, torch::Tensor>> v;
  for (const auto& p : m.named_parameters()) v.emplace_back(p.key(), p.value());
  for (const auto& b : m.named_buffers()) v.emplace_back(b.key(), b.value());
  return v;
}
}  // namespace

void R2D2::attach(const std::shared_ptr<models::PolicyModel>& online, const MakeModel& make) {
  online_ = online;
  target_ = make();
  for (auto& p : target_->parameters()) p.set_requires_grad(false);
  copy_to_target();
}

void R2D2::copy_to_target() {
  torch::NoGradGuard g;
  auto from = named_tensors(*online_), to = named_tensors(*target_);
  MPIRL_CHECK(from.size() == to.size(), "r2d2: the target network has {} tensors, the online one {}", to.size(), from.size());
  for (size_t i = 0; i < from.size(); ++i) {
    MPIRL_CHECK(from[i].first == to[i].first && from[i].second.sizes() == to[i].second.sizes(),
                "r2d2: the target network's {} does not match the online network's {}", to[i].first, from[i].first);
    to[i].second.copy_(from[i].second);  // in place: a captured step keeps reading them
  }
}

std::vector<torch::Tensor> R2D2::state_tensors() const {
  std::vector<torch::Tensor> v;
  for (auto& [name, t] : named_tensors(*target_)) v.push_back(t);
  return v;
}

void R2D2::after_step() {
  if (++steps_ % o_.target_period == 0) copy_to_target();
}

void R2D2::save(torch::serialize::OutputArchive& ar) const {
  ar.write("steps", torch::tensor(steps_, torch::kInt64));
  torch::serialize::OutputArchive t;
  target_->save(t);
  ar.write("target", t);
}

void R2D2::load(torch::serialize::InputArchive& ar) {
  torch::Tensor steps;
  ar.read("steps", steps);
  steps_ = steps.item<int64_t>();
  torch::serialize::InputArchive t;
  ar.read("target", t);
  const auto device = target_->parameters().empty() ? torch::Device(torch::kCPU) : target_->parameters()[0].device();
  target_->load(t);
  target_->to(device);
  for (auto& p : target_->parameters()) p.set_requires_grad(false);
}

models::PolicyOutput R2D2::forward(models::PolicyModel& m, const TrainBatch& b) const {
  const int64_t bi = o_.burn_in;
  if (bi == 0) return m.unroll(b.obs, b.is_init, b.state0);
  torch::Tensor state = b.state0;
  if (m.state_size() > 0) {  // the core's state at the end of the burn-in, without gradient
    torch::NoGradGuard g;
    for (int64_t t = 0; t < bi; ++t) m.step(b.obs[t], b.is_init[t], state);
  }
  return m.unroll(b.obs.slice(0, bi), b.is_init.slice(0, bi), state);
}

torch::Tensor R2D2::bootstrap_value(models::PolicyModel& m, const torch::Tensor& obs, const torch::Tensor& state) const {
  torch::NoGradGuard g;
  auto no_reset = torch::zeros({obs.size(0)}, torch::TensorOptions().dtype(torch::kFloat32).device(obs.device()));
  // Clones: a model.python module may advance its state in place.
  torch::Tensor s1 = state.defined() ? state.clone() : state, s2 = state.defined() ? state.clone() : state;
  auto on = m.step(obs, no_reset, s1);
  auto tg = target_->step(obs, no_reset, s2);
  auto greedy = r2d2::q_values(on.dist, on.value).argmax(-1, /*keepdim=*/true);
  auto q = r2d2::q_values(tg.dist, tg.value).gather(-1, greedy).squeeze(-1);
  return r2d2::unrescale(q, o_.rescale_eps);
}

LossTerms R2D2::loss(const envs::EnvSpec& spec, const TrainBatch& b, const models::PolicyOutput& out,
                     const LossOptions& o) const {
  MPIRL_CHECK(spec.discrete, "r2d2 needs a discrete action space (env '{}')", spec.id);
  const int64_t T = b.rewards.size(0), bi = o_.burn_in;
  auto q = r2d2::q_values(out.dist, out.value);  // [T - bi + 1, B, A]
  torch::Tensor returns;
  {
    torch::NoGradGuard g;
    auto greedy = q.detach().argmax(-1, /*keepdim=*/true);
    auto tout = forward(*target_, b);
    auto boot = r2d2::unrescale(r2d2::q_values(tout.dist, tout.value).gather(-1, greedy).squeeze(-1), o_.rescale_eps);
    torch::Tensor rewards = b.rewards.slice(0, bi);
    if (o.reward_scale != 1.0) rewards = rewards * o.reward_scale;
    if (o.reward_clip > 0) rewards = rewards.clamp(-o.reward_clip, o.reward_clip);
    returns = r2d2::n_step_returns(rewards, b.terminated.slice(0, bi), b.truncated.slice(0, bi),
                                   b.trunc_value.slice(0, bi), boot, o.gamma, o_.n_step);
  }
  auto taken = q.slice(0, 0, T - bi).gather(-1, b.actions.slice(0, bi).unsqueeze(-1)).squeeze(-1);  // [T - bi, B]
  auto delta = taken - r2d2::rescale(returns, o_.rescale_eps);
  LossTerms l;
  l.value = actor_critic::weighted_mean(0.5 * delta.square(), b);
  l.total = l.value;
  l.priorities = r2d2::sequence_priorities(delta.detach(), o_.priority_eta);
  l.q_mean = r2d2::unrescale(taken.detach(), o_.rescale_eps).mean();
  return l;
}

}  // namespace mpirl::learner
