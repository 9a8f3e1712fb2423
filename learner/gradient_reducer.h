#pragma once
// Gradient averaging across learners behind one small interface: NCCL between learners that each
// own a GPU (learner/nccl_reducer.h), MPI_Allreduce over host memory otherwise (learners on CPU,
// learners sharing a GPU, or a build without NCCL). The choice is collective and logged
// (learner/reducer_choice.h).
#include <memory>
#include <string>
#include <vector>

#include <mpi.h>
#include <torch/torch.h>

namespace mpirl::learner {

enum class ReducerKind { None, Mpi, Nccl };

class GradientReducer {
 public:
  virtual ~GradientReducer() = default;
  // Replaces every parameter's gradient by its mean over the learners (a missing gradient
  // counts as zeros). Every learner calls it once per optimizer step, in the same order.
  virtual void average(const std::vector<torch::Tensor>& params) = 0;
  virtual std::string name() const = 0;
  virtual ReducerKind kind() const = 0;
  // True when average() is device work only (no host synchronisation), so that a CUDA graph can
  // capture it with the rest of the step (learner/graph_step.h); the MPI host path is not.
  virtual bool capturable() const { return false; }
  // Called after each replay of a graph that captured average(): the reducer watches that launch
  // as it watches an eager call (NCCL: completion, async errors, learner.collective_timeout_s).
  virtual void replayed() {}
  // Until the last average() has completed on the device; NCCL: polled, bounded by
  // learner.collective_timeout_s and its async errors (a read-back would block without a bound).
  virtual void wait() {}
};

// One learner: nothing to average.
class NoReducer final : public GradientReducer {
 public:
  void average(const std::vector<torch::Tensor>&) override {}
  std::string name() const override { return "none (1 learner)"; }
  ReducerKind kind() const override { return ReducerKind::None; }
  bool capturable() const override { return true; }
};

// Flattens the gradients into one buffer, MPI_Allreduce(SUM) on the host, divides, copies back
// into the same gradient tensors.
class MpiReducer final : public GradientReducer {
 public:
  MpiReducer(MPI_Comm learners, int size) : comm_(learners), size_(size) {}
  void average(const std::vector<torch::Tensor>& params) override;
  std::string name() const override { return "MPI_Allreduce (host)"; }
  ReducerKind kind() const override { return ReducerKind::Mpi; }

 private:
  MPI_Comm comm_;
  int size_;
  torch::Tensor host_;  // reused flat buffer
};

// What a learner brings to the choice of reducer.
struct ReducerRequest {
  torch::Device device = torch::kCPU;
  bool shared_gpu = false;     // another learner on this node trains on the same GPU
  double timeout_s = 300;      // learner.collective_timeout_s
  int rank = 0;                // world rank, for messages
  std::string host;
};

}  // namespace mpirl::learner
