// Stepping an actor's env groups into a rollout slot: T steps of every group, the truncated
// episodes' bootstrap observations, the last observation carried into the next slot (actor/actor_loop.h).
// With an overlap O (R2D2's burn-in) the next slot also starts with this one's last O steps, their
// bootstrap records and the core state before them, and the actor steps only the T - O after them.
#include "actor/actor_loop.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/fault.h"
#include "envs/vector_env.h"

namespace mpirl::actor {

// Steps from t0 to T, group after group, writing straight into the slot. False if a Stop arrived
// mid-rollout.
bool Actor::collect(Slot& s, int64_t t0) {
  const int64_t D = spec_.obs_size(), L = spec_.dist_size(), A = spec_.action_size(), S = layout_->state_size();
  float* dist = f32(s, Seq::Dist);
  float* logp = f32(s, Seq::Logp);
  char* act = field<char>(s, Seq::Action);
  const int64_t act_bytes = spec_.discrete ? int64_t(sizeof(int64_t)) : A * int64_t(sizeof(float));
  if (t0 == 0) {
    // The core state carried across rollouts; the learner starts sequence mode from this copy.
    // (With an overlap, carry_over wrote state0 and the repeated steps' bootstrap records.)
    if (S > 0)
      for (int64_t e = 0; e < E_; ++e)
        std::memcpy(f32(s, Seq::State0) + e * S, policy_->state(int(e)), size_t(S) * sizeof(float));
    const int64_t K = layout_->boot_slots();
    if (K > 0) std::fill_n(field<int32_t>(s, Seq::BootStep), E_ * K, -1);
    std::fill(boot_count_.begin(), boot_count_.end(), 0);
  }
  uint8_t* init = u8(s, Seq::IsInit);
  for (int64_t t = t0; t < T_; ++t) {
    for (size_t g = 0; g < groups_.g.size(); ++g) {
      const int64_t first = groups_.g[g].first, n = groups_.g[g].n;
      fault_point();
      if (O_ > 0 && S > 0 && t == T_ - O_)  // the state before step T - O: the next rollout's state0
        for (int64_t e = first; e < first + n; ++e)
          std::memcpy(overlap_state_.data() + e * S, policy_->state(int(e)), size_t(S) * sizeof(float));
      // [n, obs...] straight from the slot (the policy converts uint8 pixels itself); the
      // distribution rows and log-probabilities land in the slot.
      if (!policy_->act(int(g), obs_row(s, first, t), (T_ + 1) * D, init + first * (T_ + 1) + t, T_ + 1,
                        {dist + (first * T_ + t) * L, T_ * L, logp + first * T_ + t, T_})) {
        stop_ = true;
        return false;
      }
      step_version_[size_t(t)] = g == 0 ? policy_->version() : std::min(step_version_[size_t(t)], policy_->version());
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
      if (reward_norm_) reward_norm_->step(first, n, o.reward, o.terminated, o.truncated, T_);
      // Central inference: this group's next observations go out now, while the others step.
      policy_->observed(int(g), obs_row(s, first, t + 1), (T_ + 1) * D, init + first * (T_ + 1) + t + 1, T_ + 1);
    }
  }
  // The sequence's version: the oldest behind any of its steps, the repeated ones included (carry_over
  // moved their versions to the front of step_version_).
  min_version_ = *std::min_element(step_version_.begin(), step_version_.end());
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

// The last observation of a rollout is the first of the next; with an overlap O, the last O steps
// (observations T-O..T, their actions, rewards, episode ends, behaviour rows, truncation records)
// start the next, after the core state before them.
void Actor::carry_over(Slot& from, Slot& to) {
  uint8_t* fi = u8(from, Seq::IsInit);
  uint8_t* ti = u8(to, Seq::IsInit);
  const int64_t O = O_, from_t = T_ - O, OB = spec_.obs_bytes();
  for (int64_t e = 0; e < E_; ++e) {
    std::memcpy(obs_row(to, e, 0), obs_row(from, e, from_t), size_t((O + 1) * OB));
    std::memcpy(ti + e * (T_ + 1), fi + e * (T_ + 1) + from_t, size_t(O + 1));
  }
  if (O == 0) return;
  std::copy(step_version_.begin() + from_t, step_version_.end(), step_version_.begin());
  // Per-step fields of [E, T, width] elements of `bytes` each: steps from_t..T-1 -> 0..O-1.
  auto steps = [&](Seq f, int64_t bytes) {
    char* a = field<char>(from, f);
    char* b = field<char>(to, f);
    for (int64_t e = 0; e < E_; ++e) std::memcpy(b + e * T_ * bytes, a + (e * T_ + from_t) * bytes, size_t(O * bytes));
  };
  steps(Seq::Action, spec_.discrete ? int64_t(sizeof(int64_t)) : spec_.action_size() * int64_t(sizeof(float)));
  steps(Seq::Reward, sizeof(float));
  steps(Seq::Terminated, 1);
  steps(Seq::Truncated, 1);
  steps(Seq::Logp, sizeof(float));
  steps(Seq::Dist, spec_.dist_size() * int64_t(sizeof(float)));
  const int64_t S = layout_->state_size(), K = layout_->boot_slots();
  if (S > 0) std::memcpy(f32(to, Seq::State0), overlap_state_.data(), size_t(E_ * S) * sizeof(float));
  if (K == 0) return;
  int32_t* fs = field<int32_t>(from, Seq::BootStep);
  int32_t* ts = field<int32_t>(to, Seq::BootStep);
  std::fill_n(ts, E_ * K, -1);
  for (int64_t e = 0; e < E_; ++e) {
    int64_t n = 0;
    for (int64_t k = 0; k < K; ++k) {
      if (fs[e * K + k] < from_t) continue;  // -1 (unused) or before the repeated steps
      std::memcpy(u8(to, Seq::BootObs) + (e * K + n) * OB, u8(from, Seq::BootObs) + (e * K + k) * OB, size_t(OB));
      if (S > 0)
        std::memcpy(f32(to, Seq::BootState) + (e * K + n) * S, f32(from, Seq::BootState) + (e * K + k) * S,
                    size_t(S) * sizeof(float));
      ts[e * K + n] = fs[e * K + k] - int32_t(from_t);
      ++n;
    }
    boot_count_[size_t(e)] = n;
  }
}

}  // namespace mpirl::actor
