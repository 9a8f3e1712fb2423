#include "learner/placement.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#ifdef MPIRL_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

#include "core/test_hooks.h"
#include "core/error.h"
#include "learner/device.h"

namespace mpirl::learner {
namespace {

#ifdef MPIRL_WITH_CUDA
constexpr bool kCudaKernels = true;
#else
constexpr bool kCudaKernels = false;
#endif

// The physical GPU behind a device index: its UUID ("" if unknown).
std::string device_uuid(int index) {
#ifdef MPIRL_WITH_CUDA
  const cudaDeviceProp* p = at::cuda::getDeviceProperties(index);
  std::string s;
  for (unsigned char c : p->uuid.bytes) s += fmt::format("{:02x}", c);
  return s;
#else
  (void)index;
  return "";
#endif
}

// Every learner's entry of `mine` (a gather over the learners; strings up to 63 bytes).
std::vector<std::string> all_learners(const Comms& comms, const std::string& mine) {
  std::array<char, 64> buf{};
  std::strncpy(buf.data(), mine.c_str(), buf.size() - 1);
  std::vector<char> all(buf.size() * size_t(comms.layout.learners));
  MPIRL_MPI(MPI_Allgather(buf.data(), int(buf.size()), MPI_CHAR, all.data(), int(buf.size()), MPI_CHAR, comms.learners));
  std::vector<std::string> out;
  for (int i = 0; i < comms.layout.learners; ++i) out.emplace_back(all.data() + size_t(i) * buf.size());
  return out;
}

}  // namespace

ReducerRequest pick_device(const Config& cfg, const Comms& comms, int* picked) {
  int visible = torch::cuda::is_available() ? int(torch::cuda::device_count()) : 0;
  const char* fake = test_hook("MPIRL_FAKE_GPUS");
  const bool faked = visible == 0 && fake != nullptr && std::atoi(fake) > 0;
  if (faked) visible = std::atoi(fake);
  const std::string host = comms.host(comms.rank);
  auto p = pick_gpu(cfg.learner.device, comms.node_learner_index, comms.node_learners, visible, comms.rank, host,
                    kCudaKernels || faked);
  // Shared or not by the devices' UUIDs when every GPU learner knows its own; else the estimate.
  // Gathered: "" for a CPU learner, "?" for a GPU whose UUID is unknown.
  const std::string uuid = p.device < 0 ? "" : faked ? fmt::format("fake-{}-cuda:{}", host, p.device) : device_uuid(p.device);
  const auto uuids = all_learners(comms, p.device >= 0 && uuid.empty() ? "?" : uuid);
  if (p.device >= 0 && std::find(uuids.begin(), uuids.end(), "?") == uuids.end()) {
    std::vector<std::string> hosts;
    for (int i = 0; i < comms.layout.learners; ++i) hosts.push_back(comms.host(i));  // learners: world ranks 0..L-1
    const bool shared = shares_device(comms.rank, hosts, uuids);
    if (shared != p.shared)
      p.note = shared ? fmt::format("learner rank {} @ {} trains on the same GPU (UUID {}) as another learner of its "
                                    "host; NCCL cannot join two ranks on one device, so gradients go through MPI",
                                    comms.rank, host, uuid)
                      : "";
    p.shared = shared;
  }
  if (!p.note.empty()) spdlog::warn("{}", p.note);
  *picked = p.device;
  ReducerRequest r;
  if (faked)
    spdlog::info("MPIRL_FAKE_GPUS={}: learner rank {} @ {} (node index {} of {}) would use cuda:{}; training on the CPU",
                 visible, comms.rank, host, comms.node_learner_index, comms.node_learners, p.device);
  else if (p.device >= 0)
    r.device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(p.device));
  r.shared_gpu = p.shared;
  r.timeout_s = cfg.learner.collective_timeout_s;
  r.rank = comms.rank;
  r.host = host;
  return r;
}

nlohmann::json rank_table(const Comms& comms, int picked) {
  std::vector<int> picks(size_t(comms.layout.learners));
  MPIRL_MPI(MPI_Gather(&picked, 1, MPI_INT, picks.data(), 1, MPI_INT, 0, comms.learners));
  auto t = nlohmann::json::array();
  for (int r = 0; r < comms.layout.world; ++r) {
    nlohmann::json row = {{"rank", r}, {"role", role_name(comms.layout.role_of(r))}, {"host", comms.host(r)}};
    if (r < comms.layout.learners) row["gpu"] = picks[size_t(r)];
    t.push_back(row);
  }
  return t;
}

}  // namespace mpirl::learner
