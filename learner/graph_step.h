#pragma once
// The learner's optimizer step on static device buffers, captured as a CUDA graph and replayed
// (learner.cuda_graph = true, the default on CUDA). One launch then replaces the hundreds of small
// kernel launches of forward (scan cores and V-trace included), loss, backward, gradient
// averaging, clipping and the optimizer step, with no host synchronisation.
//
// The first run() copies its batch into the static inputs, warms the step up on a side stream
// (cuBLAS handles, autograd buffers and the allocator's blocks come into being outside the
// capture), restores the parameters and optimizer state the warm-up changed, captures the step
// and replays it: the warm-up leaves no trace on training. Later runs copy (device to device) and
// replay. When the gradient reducer is not capturable (MPI over host memory) the step is two
// graphs, the host all-reduce between them.
//
// Mode::Uncaptured runs the same static-buffer path, warm-up and its undoing included, without
// capture (on any device): the CPU tests check it against the eager step, the GPU tests check the
// captured one against both.
#include <functional>
#include <memory>
#include <vector>

#include <torch/torch.h>

#include "core/error.h"
#include "learner/gradient_reducer.h"
#include "learner/algorithms/algorithm.h"

namespace mpirl::learner {

// The capture itself failed (the warm-up ran and was undone; the captured kernels never ran).
class CaptureError : public Error {
 public:
  using Error::Error;
};

struct StepFns {
  std::function<LossTerms(const TrainBatch&)> grad;  // gradients to none, forward, loss, backward
  std::function<torch::Tensor()> apply;               // clipping and the optimizer step: the norm
};

struct StepOut {
  LossTerms loss;
  torch::Tensor grad_norm;
};

class StaticStep {
 public:
  enum class Mode { Uncaptured, Graph };
  // `params`: what the reducer averages; `state`: every tensor a step changes (parameters and
  // optimizer state), saved and restored around the warm-up.
  StaticStep(Mode mode, StepFns fns, GradientReducer& reducer, std::vector<torch::Tensor> params,
             std::vector<torch::Tensor> state);
  ~StaticStep();
  StaticStep(const StaticStep&) = delete;
  StaticStep& operator=(const StaticStep&) = delete;

  // Copies `b` into the static inputs (allocated from its shapes by the first call; a batch of
  // another shape throws) and runs one step. The outputs are the static ones: valid until the
  // next run().
  const StepOut& run(const TrainBatch& b);
  Mode mode() const { return mode_; }
  int graphs() const;  // captured graphs: 0 before the first run or uncaptured, else 1 or 2

 private:
  void allocate(const TrainBatch& b);
  void copy_in(const TrainBatch& b);
  void capture();
  void step_now();
  std::vector<torch::Tensor> saved_state() const;
  void undo_warm_up(const std::vector<torch::Tensor>& saved);  // state restored, gradients none

  static constexpr int kWarmupSteps = 3;

  Mode mode_;
  StepFns fns_;
  GradientReducer& reducer_;
  std::vector<torch::Tensor> params_, state_;
  TrainBatch in_;
  StepOut out_;
  struct Graphs;  // CUDA graphs (learner/graph_step.cpp)
  std::unique_ptr<Graphs> graphs_;
  bool warmed_up_ = false;  // Uncaptured: the warm-up (and its undoing) ran once, as before a capture
};

}  // namespace mpirl::learner
