#pragma once
// Which device a learner trains on. Learner i takes GPU (its index among the learners on its
// node) -- never a local rank that also counts the actors and the replay on that node. More
// learners than GPUs on a node share them round-robin, and that is reported: NCCL cannot join two
// ranks on one device, so such learners average gradients through MPI.
#include <string>
#include <vector>

namespace mpirl::learner {

struct GpuPick {
  int device = -1;      // CUDA device index; -1 = CPU
  bool shared = false;  // another learner on this node uses the same device
  std::string note;     // what to log (empty when nothing is worth saying)
};

// node_index/node_learners: this learner among the learners of its node; visible: CUDA devices
// visible to the process. `want` is learner.device ("auto", "cpu", "cuda"); "cuda" with no device
// visible throws mpirl::Error naming the rank and host. `shared` here is the estimate from the
// counts (more learners than visible devices); shares_device() below decides when the devices'
// UUIDs are known. `kernels`: this mpirl has its CUDA kernels (built with nvcc). Without them a
// visible GPU is not used: the scan cores and the graph step need them, so "auto" trains on the
// CPU (with a note saying how to build for the GPU) and "cuda" throws naming the build.
GpuPick pick_gpu(const std::string& want, int node_index, int node_learners, int visible, int rank,
                 const std::string& host, bool kernels = true);

// Whether learner `me` trains on the same physical GPU as another learner of its host: equal
// device UUIDs on equal hosts (uuids[i] "" = a CPU learner, never shared). Device indices cannot
// tell: with per-task GPU binding (srun --gpus-per-task=1, CUDA_VISIBLE_DEVICES per rank) every
// learner sees its own GPU as cuda:0. `hosts`, `uuids`: one entry per learner.
bool shares_device(int me, const std::vector<std::string>& hosts, const std::vector<std::string>& uuids);

}  // namespace mpirl::learner
