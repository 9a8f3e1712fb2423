#include "learner/train_batch.h"

#include "core/error.h"

namespace mpirl::learner {

namespace {
// `per_step` maps a [T(+1), B, ...] field, `per_column` a [B, ...] one; undefined fields stay
// undefined, and `priorities` is left out.
template <class Step, class Column>
TrainBatch map_fields(const TrainBatch& a, Step per_step, Column per_column) {
  auto s = [&](const torch::Tensor& t) { return t.defined() ? per_step(t) : t; };
  auto c = [&](const torch::Tensor& t) { return t.defined() ? per_column(t) : t; };
  TrainBatch b;
  b.obs = s(a.obs);
  b.actions = s(a.actions);
  b.rewards = s(a.rewards);
  b.terminated = s(a.terminated);
  b.truncated = s(a.truncated);
  b.behaviour_logp = s(a.behaviour_logp);
  b.proximal_logp = s(a.proximal_logp);
  b.trunc_value = s(a.trunc_value);
  b.advantages = s(a.advantages);
  b.targets = s(a.targets);
  b.is_init = s(a.is_init);
  b.state0 = c(a.state0);
  b.weights = c(a.weights);
  b.keep = c(a.keep);
  return b;  // priorities are per sequence of the whole batch: not a minibatch's
}
}  // namespace

TrainBatch TrainBatch::slice_batch(int64_t begin, int64_t end) const {
  return map_fields(
      *this, [&](const torch::Tensor& t) { return t.slice(1, begin, end); },
      [&](const torch::Tensor& t) { return t.slice(0, begin, end); });
}

TrainBatch TrainBatch::select_batch(const torch::Tensor& columns) const {
  return map_fields(
      *this, [&](const torch::Tensor& t) { return t.index_select(1, columns.to(t.device())); },
      [&](const torch::Tensor& t) { return t.index_select(0, columns.to(t.device())); });
}

TrainBatch TrainBatch::flatten_steps() const {
  MPIRL_CHECK(!state0.defined(), "TrainBatch::flatten_steps: a batch with core states (steps need their sequence)");
  const int64_t T = rewards.size(0), B = rewards.size(1);
  auto step = [&](const torch::Tensor& t) {  // [T(+1), B, ...] -> [1, T x B, ...] (obs, is_init: step t's own)
    auto shape = t.sizes().vec();
    shape.erase(shape.begin(), shape.begin() + 2);
    shape.insert(shape.begin(), {1, T * B});
    return t.slice(0, 0, T).reshape(shape);
  };
  auto column = [&](const torch::Tensor& t) {  // [B] -> [T x B]: each step keeps its sequence's value
    return t.unsqueeze(0).expand({T, B}).reshape({T * B});
  };
  TrainBatch b = map_fields(*this, step, column);
  b.priorities = priorities;  // per sequence: for the replay, not for the steps
  return b;
}

}  // namespace mpirl::learner
