#pragma once
// One learner batch, time-major, on the learner's device: what the batch source makes, the
// (static or captured) optimizer step copies in, and every algorithm (learner/algorithms/) reads.
#include <torch/torch.h>

namespace mpirl::learner {

struct TrainBatch {
  torch::Tensor obs;          // [T+1, B, obs...] float32, or uint8 pixels (the policy converts)
  torch::Tensor actions;      // [T, B] int64 or [T, B, A] float
  torch::Tensor rewards;      // [T, B] float
  torch::Tensor terminated;   // [T, B] float 0/1
  torch::Tensor truncated;    // [T, B] float 0/1
  torch::Tensor behaviour_logp;  // [T, B]
  torch::Tensor proximal_logp;   // [T, B] the learner's policy at the start of the update (APPO with
                                 // learner.appo_proximal); undefined otherwise
  torch::Tensor trunc_value;  // [T, B]
  torch::Tensor advantages;   // [T, B] fixed for the update (APPO with appo_minibatch = "steps"); undefined:
  torch::Tensor targets;      // [T, B]  each step computes its own from the policy's outputs
  torch::Tensor is_init;      // [T+1, B] float 0/1: the observation starts an episode (core reset)
  torch::Tensor state0;       // [B, S] recurrent state before step 0 (undefined without a core)
  torch::Tensor weights;      // [B] importance weights of a prioritized replay (undefined = 1)
  torch::Tensor keep;         // [B] 1 = trained on, 0 = masked out (too old); undefined = all kept.
                              // Losses are means over the kept sequences of each (mini)batch.
  torch::Tensor priorities;   // [B] the replay's new priorities when the update computed them up front
                              // (per sequence: flatten_steps keeps them, slices and selections do not)
  TrainBatch slice_batch(int64_t begin, int64_t end) const;  // columns [begin, end)
  TrainBatch select_batch(const torch::Tensor& columns) const;  // columns in this order (int64 [n])
  // Every step as a sequence of its own: T = 1, B = T x B (step t of column b at column t B + b), obs
  // and is_init [1, T x B] too: no next observation, so only for a batch whose advantages and targets
  // are already fixed (APPO's appo_minibatch = "steps"), of a policy without a core.
  TrainBatch flatten_steps() const;
};

}  // namespace mpirl::learner
