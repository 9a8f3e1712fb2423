#include "learner/device.h"

#include <fmt/format.h>

#include "core/error.h"

namespace mpirl::learner {

GpuPick pick_gpu(const std::string& want, int node_index, int node_learners, int visible, int rank,
                 const std::string& host) {
  GpuPick p;
  if (want == "cuda" && visible <= 0)
    throw Error(fmt::format("learner.device = \"cuda\" but no CUDA device is visible on rank {} @ {}", rank, host));
  if (want == "cpu" || visible <= 0) return p;
  p.device = node_index % visible;
  p.shared = node_learners > visible;
  if (p.shared)
    p.note = fmt::format("{} learners on host {} share {} GPU(s): learner rank {} (node index {}) uses cuda:{} with "
                         "another learner; NCCL cannot join two ranks on one device, so gradients go through MPI",
                         node_learners, host, visible, rank, node_index, p.device);
  return p;
}

}  // namespace mpirl::learner
