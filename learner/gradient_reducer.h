#pragma once
// Gradient averaging across learners behind one small interface. Today: MPI_Allreduce over host
// memory (learners on CPU, or sharing a GPU); the GPU-learner work adds NCCL behind the same call.
#include <memory>
#include <string>
#include <vector>

#include <mpi.h>
#include <torch/torch.h>

namespace mpirl::learner {

class GradientReducer {
 public:
  virtual ~GradientReducer() = default;
  // Replaces every parameter's gradient by its mean over the learners (a missing gradient
  // counts as zeros). Every learner calls it once per optimizer step, in the same order.
  virtual void average(const std::vector<torch::Tensor>& params) = 0;
  virtual std::string name() const = 0;
};

// One learner: nothing to average.
class NoReducer final : public GradientReducer {
 public:
  void average(const std::vector<torch::Tensor>&) override {}
  std::string name() const override { return "none (1 learner)"; }
};

// Flattens the gradients into one buffer, MPI_Allreduce(SUM) on the host, divides, copies back.
class MpiReducer final : public GradientReducer {
 public:
  MpiReducer(MPI_Comm learners, int size) : comm_(learners), size_(size) {}
  void average(const std::vector<torch::Tensor>& params) override;
  std::string name() const override { return "MPI_Allreduce (host)"; }

 private:
  MPI_Comm comm_;
  int size_;
  torch::Tensor host_;  // reused flat buffer
};

std::unique_ptr<GradientReducer> make_gradient_reducer(MPI_Comm learners, int size);

}  // namespace mpirl::learner
