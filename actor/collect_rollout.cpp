// Stepping an actor's env groups into a rollout slot: T steps of every group, the truncated
// episodes' bootstrap observations, the last observation carried into the next slot (actor/actor_loop.h).
#include "actor/actor_loop.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "core/fault.h"
#include "envs/vector_env.h"

namespace mpirl::actor {

// Steps T times, group after group, writing straight into the slot. False if a Stop arrived
// mid-rollout.
bool Actor::collect(Slot& s) {
  const int64_t D = spec_.obs_size(), L = spec_.dist_size(), A = spec_.action_size(), S = layout_->state_size();
  float* dist = f32(s, Seq::Dist);
  float* logp = f32(s, Seq::Logp);
  char* act = field<char>(s, Seq::Action);
  const int64_t act_bytes = spec_.discrete ? int64_t(sizeof(int64_t)) : A * int64_t(sizeof(float));
  min_version_ = std::numeric_limits<int64_t>::max();
  // The core state carried across rollouts; the learner starts sequence mode from this copy.
  if (S > 0)
    for (int64_t e = 0; e < E_; ++e)
      std::memcpy(f32(s, Seq::State0) + e * S, policy_->state(int(e)), size_t(S) * sizeof(float));
  const int64_t K = layout_->boot_slots();
  if (K > 0) std::fill_n(field<int32_t>(s, Seq::BootStep), E_ * K, -1);
  std::fill(boot_count_.begin(), boot_count_.end(), 0);
  uint8_t* init = u8(s, Seq::IsInit);
  for (int64_t t = 0; t < T_; ++t) {
    for (size_t g = 0; g < groups_.g.size(); ++g) {
      const int64_t first = groups_.g[g].first, n = groups_.g[g].n;
      fault_point();
      // [n, obs...] straight from the slot (the policy converts uint8 pixels itself); the
      // distribution rows and log-probabilities land in the slot.
      if (!policy_->act(int(g), obs_row(s, first, t), (T_ + 1) * D, init + first * (T_ + 1) + t, T_ + 1,
                        {dist + (first * T_ + t) * L, T_ * L, logp + first * T_ + t, T_})) {
        stop_ = true;
        return false;
      }
      min_version_ = std::min(min_version_, policy_->version());
      const char* a = static_cast<const char*>(policy_->actions(int(g)));
      for (int64_t e = 0; e < n; ++e)
        std::memcpy(act + ((first + e) * T_ + t) * act_bytes, a + e * act_bytes, size_t(act_bytes));
      envs::StepOutputs o;
      o.obs = obs_row(s, first, t + 1);
      o.obs_stride = (T_ + 1) * D;
      o.is_init = init + first * (T_ + 1) + t + 1;
      o.is_init_stride = T_ + 1;
      o.reward = f32(s, Seq::Reward) + first * T_ + t;
      o.terminated = u8(s, Seq::Terminated) + first * T_ + t;
      o.truncated = u8(s, Seq::Truncated) + first * T_ + t;
      o.scalar_stride = T_;
      venv_[g]->step(spec_.discrete ? static_cast<const int64_t*>(policy_->actions(int(g))) : nullptr,
                     spec_.discrete ? nullptr : static_cast<const float*>(policy_->actions(int(g))), o);
      for (int64_t e = 0; e < n; ++e)
        if (o.truncated[e * T_] && !o.terminated[e * T_]) record_truncation(s, int(g), first + e, t);
      // Central inference: this group's next observations go out now, while the others step.
      policy_->observed(int(g), obs_row(s, first, t + 1), (T_ + 1) * D, init + first * (T_ + 1) + t + 1, T_ + 1);
    }
  }
  return true;
}

// A truncated episode bootstraps from the value of its last state, which the learner computes
// with its current parameters: the actor sends that observation and its core state there.
void Actor::record_truncation(Slot& s, int g, int64_t e, int64_t t) {
  const int64_t K = layout_->boot_slots(), S = layout_->state_size(), OB = spec_.obs_bytes();
  const int64_t k = boot_count_[size_t(e)]++;
  if (k >= K) {
    if (spec_.max_episode_steps < 0)
      throw Error(fmt::format(
          "env '{}' (env index {}) truncated {} episodes within one {}-step rollout but declares no time limit "
          "(mpirl then keeps room for {} truncation per rollout). Declare it, and mpirl sizes its bootstrap "
          "slots from it: gymnasium.make(..., max_episode_steps=N), a gymnasium.wrappers.TimeLimit around each "
          "env, or a `max_episode_steps` attribute on the env or on the vector env your factory returns",
          spec_.id, e, k + 1, T_, K));
    throw Error(fmt::format("env '{}' (env index {}) truncated {} episodes within one {}-step rollout; its spec "
                            "declares max_episode_steps = {}, which allows at most {}",
                            spec_.id, e, k + 1, T_, spec_.max_episode_steps, K));
  }
  const int local = int(e - groups_.g[size_t(g)].first);
  std::memcpy(u8(s, Seq::BootObs) + (e * K + k) * OB, venv_[size_t(g)]->final_obs_bytes(local), size_t(OB));
  if (S > 0)
    std::memcpy(f32(s, Seq::BootState) + (e * K + k) * S, policy_->state(int(e)), size_t(S) * sizeof(float));
  field<int32_t>(s, Seq::BootStep)[e * K + k] = int32_t(t);
}

// The last observation of a rollout is the first of the next.
void Actor::carry_over(Slot& from, Slot& to) {
  uint8_t* fi = u8(from, Seq::IsInit);
  uint8_t* ti = u8(to, Seq::IsInit);
  for (int64_t e = 0; e < E_; ++e) {
    std::memcpy(obs_row(to, e, 0), obs_row(from, e, T_), size_t(spec_.obs_bytes()));
    ti[e * (T_ + 1)] = fi[e * (T_ + 1) + T_];
  }
}

}  // namespace mpirl::actor
