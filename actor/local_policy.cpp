#include "actor/group_policy.h"

#include "core/clock.h"
#include "core/error.h"
#include "envs/vector_env.h"

namespace mpirl::actor {

int Groups::of_env(int e) const {
  for (size_t i = 0; i < g.size(); ++i)
    if (e >= g[i].first && e < g[i].first + g[i].n) return int(i);
  MPIRL_CHECK(false, "env {} is in no group", e);
  return -1;
}

std::vector<double> actor_epsilons(const Config& cfg, const Comms& comms) {
  if (cfg.learner.algo != "r2d2") return {};
  const int64_t E = cfg.env.num_envs;
  return models::epsilons({cfg.r2d2.epsilon_base, cfg.r2d2.epsilon_alpha}, comms.layout.actor_index(comms.rank) * E, E,
                          comms.layout.actors() * E);
}

LocalPolicy::LocalPolicy(const Config& cfg, const Comms& comms, const envs::EnvSpec& spec, const Groups& groups,
                         uint64_t seed)
    : spec_(spec), groups_(groups), policy_(spec, models::model_options(cfg)),
      params_(comms.publish, models::num_params(policy_), cfg.actor.param_tests) {
  policy_->eval();
  // Group 0 samples with the actor's own seed: one group acts exactly as actors did before groups.
  const std::vector<double> eps = actor_epsilons(cfg, comms);
  for (size_t i = 0; i < groups_.g.size(); ++i) {
    acting_.emplace_back(policy_, groups_.g[i].n, i == 0 ? seed : envs::mix_seed(seed, 0x6a09e667u + i));
    if (!eps.empty()) acting_.back().set_epsilons({eps.begin() + groups_.g[i].first, eps.begin() + groups_.g[i].first + groups_.g[i].n});
  }
  flat_.resize(size_t(models::num_params(policy_)));
}

bool LocalPolicy::start() {
  params_.post();
  Backoff b;
  while (!stop_) {
    const int64_t before = version_;
    poll();
    if (version_ != before) return true;
    b.idle();
  }
  return false;
}

bool LocalPolicy::poll() {
  int64_t v = 0;
  switch (params_.poll(flat_.data(), &v)) {
    case ParamChannel::Got::Params:
      models::read_flat(policy_, flat_.data());
      version_ = v;
      break;
    case ParamChannel::Got::Stop: stop_ = true; break;
    case ParamChannel::Got::Nothing: break;
  }
  return !stop_;
}

bool LocalPolicy::act(int g, const void* obs, int64_t obs_stride, const uint8_t* is_init, int64_t init_stride,
                      const Rows& out) {
  if (!poll()) return false;
  auto& a = acting_[size_t(g)];
  a.step(models::obs_rows(spec_, const_cast<void*>(obs), a.num_envs(), obs_stride), is_init, init_stride, out);
  return true;
}

const void* LocalPolicy::actions(int g) const {
  const auto& a = acting_[size_t(g)];
  return spec_.discrete ? static_cast<const void*>(a.discrete_actions()) : a.box_actions();
}

const float* LocalPolicy::state(int e) {
  const int g = groups_.of_env(e);
  const auto& st = acting_[size_t(g)].state();
  if (!st.defined()) return nullptr;
  return st.data_ptr<float>() + int64_t(e - groups_.g[size_t(g)].first) * st.size(1);
}

}  // namespace mpirl::actor
