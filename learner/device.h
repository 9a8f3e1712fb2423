#pragma once
// Which device a learner trains on. Learner i takes GPU (its index among the learners on its
// node) -- never a local rank that also counts the actors and the replay on that node. More
// learners than GPUs on a node share them round-robin, and that is reported: NCCL cannot join two
// ranks on one device, so such learners average gradients through MPI.
#include <string>

namespace mpirl::learner {

struct GpuPick {
  int device = -1;      // CUDA device index; -1 = CPU
  bool shared = false;  // another learner on this node uses the same device
  std::string note;     // what to log (empty when nothing is worth saying)
};

// node_index/node_learners: this learner among the learners of its node; visible: CUDA devices
// visible to the process. `want` is learner.device ("auto", "cpu", "cuda"); "cuda" with no device
// visible throws mpirl::Error naming the rank and host.
GpuPick pick_gpu(const std::string& want, int node_index, int node_learners, int visible, int rank,
                 const std::string& host);

}  // namespace mpirl::learner
