#include "learner/device.h"

#include <fmt/format.h>

#include "core/error.h"

namespace mpirl::learner {

GpuPick pick_gpu(const std::string& want, int node_index, int node_learners, int visible, int rank,
                 const std::string& host, bool kernels) {
  GpuPick p;
  if (want == "cuda" && visible <= 0)
    throw Error(fmt::format("learner.device = \"cuda\" but no CUDA device is visible on rank {} @ {}", rank, host));
  if (want == "cuda" && !kernels)
    throw Error(fmt::format("learner.device = \"cuda\" on rank {} @ {}, but this mpirl was built without its CUDA "
                            "kernels (no nvcc at configure time): rebuild with the CUDA toolkit on the PATH, or set "
                            "learner.device = \"cpu\"",
                            rank, host));
  if (want == "cpu" || visible <= 0) return p;
  if (!kernels) {
    p.note = fmt::format("learner rank {} @ {} sees {} GPU(s) but trains on the CPU: this mpirl was built without its "
                         "CUDA kernels (no nvcc at configure time); rebuild with the CUDA toolkit on the PATH to use them",
                         rank, host, visible);
    return p;
  }
  p.device = node_index % visible;
  p.shared = node_learners > visible;
  if (p.shared)
    p.note = fmt::format("{} learners on host {} share {} GPU(s): learner rank {} (node index {}) uses cuda:{} with "
                         "another learner; NCCL cannot join two ranks on one device, so gradients go through MPI",
                         node_learners, host, visible, rank, node_index, p.device);
  return p;
}

bool shares_device(int me, const std::vector<std::string>& hosts, const std::vector<std::string>& uuids) {
  const size_t m = size_t(me);
  if (m >= uuids.size() || uuids[m].empty()) return false;
  for (size_t i = 0; i < uuids.size(); ++i)
    if (i != m && hosts[i] == hosts[m] && uuids[i] == uuids[m]) return true;
  return false;
}

}  // namespace mpirl::learner
