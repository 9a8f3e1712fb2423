#pragma once
// R2D2's initial priority of a sequence, computed by the actor that made it (Ape-X, Horgan et al.
// 2018): r2d2.initial_priority = "actor". The actor acts on duelling Q-values (models::ModelOptions
// act_q: its rollout's `dist` rows are Q in h's scale), so it has, per step t, Q(s_t, .) of the
// parameters it acted with. For every step t after the burn-in whose n-step window it can close:
//   G_t   = sum_{k < m} gamma^k r'_{t+k} + gamma^m X,   r' = the learner's reward scaling and clipping,
//   X     = 0 at a termination (m = k + 1), else h^-1(max_a Q(s_{t+n}, a)) (m = n),
//   delta = Q(s_t, a_t) - h(G_t),
// and the sequence's priority is eta * max|delta| + (1 - eta) * mean|delta|, the learner's formula.
// It differs from the learner's TD error (learner/algorithms/r2d2/targets.h) where Ape-X's does:
// the actor's (older) parameters, its own greedy value in place of the target network's value of
// the online network's greedy action. A window the actor cannot close is left out: one that meets
// a truncation (its bootstrap value is the learner's to compute) or runs past the sequence's last
// step (the next observation's Q comes with the next rollout). With no step left, the priority is
// -1: the replay gives the item the largest priority so far.
// tests/unit/test_sequence_priority.cpp checks it against the learner's tensor functions.
#include <cstdint>

#include "core/config.h"

namespace mpirl::actor {

struct PriorityOptions {
  int64_t burn_in = 0;
  int n_step = 1;
  double gamma = 0.99, eta = 0.9, rescale_eps = 1e-3;
  double reward_scale = 1, reward_clip = 0;  // learner.reward_scale, learner.reward_clip (0: none)
};
PriorityOptions priority_options(const Config& cfg);

// One sequence of T steps: q [T, A] (row t at q + t * q_stride), actions/rewards/terminated/
// truncated [T] (contiguous). Returns the priority, or -1 when no window closes.
float sequence_priority(const float* q, int64_t q_stride, int64_t A, const int64_t* actions, const float* rewards,
                        const uint8_t* terminated, const uint8_t* truncated, int64_t T, const PriorityOptions& o);

}  // namespace mpirl::actor
