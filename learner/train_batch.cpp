#include "learner/train_batch.h"

namespace mpirl::learner {

TrainBatch TrainBatch::slice_batch(int64_t begin, int64_t end) const {
  auto s = [&](const torch::Tensor& t) { return t.slice(1, begin, end); };
  TrainBatch b{s(obs), s(actions), s(rewards), s(terminated), s(truncated), s(behaviour_logp), {}, s(trunc_value), {}, {}, {}, {}};
  if (proximal_logp.defined()) b.proximal_logp = s(proximal_logp);
  if (weights.defined()) b.weights = weights.slice(0, begin, end);
  if (keep.defined()) b.keep = keep.slice(0, begin, end);
  if (is_init.defined()) b.is_init = s(is_init);
  if (state0.defined()) b.state0 = state0.slice(0, begin, end);
  return b;
}

}  // namespace mpirl::learner
