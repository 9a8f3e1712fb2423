// `mpirl selftest`: the learners' self-checks on every rank, before a long run, on a new cluster:
// the scan kernels against the ATen reference on each rank's device, one learner step in the mode
// a learner would use (a CUDA graph; on the CPU the static-buffer path) against an eager one,
// central inference on the device an inference rank would use against local acting, the
// gradient all-reduce over all ranks against MPI_Allreduce, and the all-reduce bandwidth between
// the ranks (MPI; NCCL too when every rank has a GPU). Rank 0 prints one table; exit 0 when every
// check that ran passed, 1 otherwise.
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "app/commands.h"
#include "core/config.h"
#include "core/error.h"
#include "envs/registry.h"
#include "inference/check.h"
#include "learner/reducer_choice.h"
#include "learner/nccl_reducer.h"
#include "learner/self_check.h"
#include "learner/trainer.h"

#ifdef MPIRL_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

namespace mpirl {
namespace {

using learner::CheckResult;

struct Here {
  torch::Device device = torch::kCPU;
  std::string host, device_name = "cpu";
  bool shared_gpu = false;  // more ranks on this node than GPUs: NCCL cannot join them
};

// Every rank calls it (a collective): rank i of a node takes GPU i modulo the node's GPUs.
Here where_am_i() {
  Here h;
  char name[256] = {0};
  gethostname(name, sizeof(name) - 1);
  h.host = name;
  MPI_Comm node;
  int local = 0, on_node = 1;
  MPIRL_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  MPIRL_MPI(MPI_Comm_rank(node, &local));
  MPIRL_MPI(MPI_Comm_size(node, &on_node));
  MPIRL_MPI(MPI_Comm_free(&node));
#ifdef MPIRL_WITH_CUDA
  if (torch::cuda::is_available()) {
    const int gpus = int(torch::cuda::device_count());
    const int idx = local % gpus;
    h.device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(idx));
    h.device_name = fmt::format("cuda:{} {}", idx, at::cuda::getDeviceProperties(idx)->name);
    h.shared_gpu = on_node > gpus;
  }
#else
  (void)local;
  (void)on_node;
#endif
  return h;
}

std::string verdict(const CheckResult& c) {
  if (!c.ran) return "-";
  return fmt::format("{} {:.1e}", c.ok ? "ok" : "FAILED", c.max_error);
}

// Seconds per all-reduce of `floats` floats (2 warm-up calls, then `reps` timed ones).
template <typename F>
double timed(F&& allreduce, int reps) {
  for (int i = 0; i < 2; ++i) allreduce();
  MPIRL_MPI(MPI_Barrier(MPI_COMM_WORLD));
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) allreduce();
  double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps, worst = 0;
  MPIRL_MPI(MPI_Allreduce(&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
  return worst;
}

// nccl-tests' convention: algorithm bandwidth = bytes / time; bus bandwidth = that x 2(n-1)/n.
std::string bandwidth(const char* what, double bytes, double seconds, int n) {
  const double alg = bytes / seconds / 1e9;
  return fmt::format("{} {:.0f} MiB over {} ranks: {:.3f} ms, {:.2f} GB/s algorithm, {:.2f} GB/s bus", what,
                     bytes / (1 << 20), n, seconds * 1e3, alg, alg * 2.0 * (n - 1) / n);
}

int run(const Config& cfg, int rank, int world) {
  const Here here = where_am_i();
  // This rank's checks: the scan, and a learner step in the mode it would train in.
  std::vector<CheckResult> local = {learner::check_scan(here.device, rank)};
  const envs::EnvSpec spec = envs::env_spec(cfg);
  {
    learner::NoReducer none;
    torch::manual_seed(cfg.run.seed);
    learner::Trainer trainer(cfg, spec, here.device, none,
                             here.device.is_cuda() ? learner::StepMode::Auto : learner::StepMode::Static);
    local.push_back(learner::check_step(trainer, cfg, spec, rank));
  }
  {  // Central inference on the device an inference rank here would use, against local acting.
    CheckResult c;
    c.name = "inference";
    const torch::Device dev = cfg.inference.device == "cpu" ? torch::Device(torch::kCPU) : here.device;
    if (cfg.inference.device == "cuda" && !dev.is_cuda()) c.note = "inference.device = \"cuda\" but no GPU is visible";
    if (c.note.empty()) {
      const auto o = inference::check_central_inference(cfg, spec, dev, learner::injected_fault("inference", rank));
      c.ran = true;
      c.ok = o.ok;
      c.max_error = o.max_error;
      c.tolerance = o.tolerance;
      c.what = o.what;
      if (o.actions_differing) c.note = fmt::format("{} greedy actions differ", o.actions_differing);
    }
    local.push_back(c);
  }
  // The gradient all-reduce over every rank, as learners on these devices would average.
  learner::ReducerRequest req;
  req.device = here.device;
  req.shared_gpu = here.shared_gpu;
  req.rank = rank;
  req.host = here.host;
  req.timeout_s = cfg.learner.collective_timeout_s;
  std::string why;
  auto reducer = learner::make_gradient_reducer(MPI_COMM_WORLD, world, req, &why);
  std::vector<CheckResult> shared = {learner::check_reducer(*reducer, MPI_COMM_WORLD, world, here.device, rank)};
  learner::agree(shared, MPI_COMM_WORLD);
  std::vector<std::string> lines;
  if (world > 1) {
    const int64_t n = int64_t(1) << 22;  // 16 MiB of float32
    std::vector<float> in(static_cast<size_t>(n), 1.0f), out(static_cast<size_t>(n));
    const double t = timed([&] { MPIRL_MPI(MPI_Allreduce(in.data(), out.data(), int(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD)); }, 5);
    lines.push_back(bandwidth("MPI_Allreduce", 4.0 * double(n), t, world));
    if (reducer->kind() == learner::ReducerKind::Nccl) {
      auto p = torch::zeros({n}, torch::TensorOptions().device(here.device)).requires_grad_(true);
      p.mutable_grad() = torch::ones_like(p);
      const double tn = timed(
          [&] {
            reducer->average({p});
            reducer->wait();  // bounded by learner.collective_timeout_s
          },
          5);
      lines.push_back(bandwidth("NCCL all-reduce (with pack/unpack)", 4.0 * double(n), tn, world));
    }
  }
  // Rank 0 gathers every rank's row.
  nlohmann::json row = {{"rank", rank}, {"host", here.host}, {"device", here.device_name}};
  for (const auto& c : local) row[c.name] = learner::to_json(c);
  const std::string text = row.dump();
  int len = int(text.size());
  std::vector<int> lens(static_cast<size_t>(world)), offs(static_cast<size_t>(world));
  MPIRL_MPI(MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, MPI_COMM_WORLD));
  for (int r = 1; r < world; ++r) offs[size_t(r)] = offs[size_t(r - 1)] + lens[size_t(r - 1)];
  std::string all(rank == 0 ? size_t(offs.back() + lens.back()) : 0, '\0');
  MPIRL_MPI(MPI_Gatherv(text.data(), len, MPI_CHAR, all.data(), lens.data(), offs.data(), MPI_CHAR, 0, MPI_COMM_WORLD));
  bool ok = shared[0].ok;
  for (const auto& c : local) ok = ok && (!c.ran || c.ok);
  int all_ok = ok, every = 0;
  MPIRL_MPI(MPI_Allreduce(&all_ok, &every, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
  if (rank != 0) return every ? 0 : 1;

  bool any_gpu = false;
  fmt::print("mpirl selftest: {} rank(s); torch {}, CUDA kernels {}, NCCL {}\n", world, MPIRL_TORCH_VERSION,
#ifdef MPIRL_WITH_CUDA
             fmt::format("built with CUDA {}.{}", CUDART_VERSION / 1000, (CUDART_VERSION % 1000) / 10),
#else
             std::string("not built"),
#endif
             learner::nccl_version());
  fmt::print("{:>4}  {:<10} {:<16} {:<14} {:<14} {:<14}\n", "rank", "host", "device", "scan", "step", "inference");
  for (int r = 0; r < world; ++r) {
    auto j = nlohmann::json::parse(all.substr(size_t(offs[size_t(r)]), size_t(lens[size_t(r)])));
    auto cell = [&](const char* k) {
      CheckResult c;
      c.ran = j[k]["ran"];
      c.ok = j[k]["ok"];
      c.max_error = j[k]["max_error"];
      return verdict(c);
    };
    const std::string dev = j["device"];
    any_gpu = any_gpu || dev != "cpu";
    fmt::print("{:>4}  {:<10} {:<16} {:<14} {:<14} {:<14}\n", r, std::string(j["host"]).substr(0, 10), dev.substr(0, 16),
               cell("scan"), cell("step"), cell("inference"));
  }
  const auto& red = shared[0];
  fmt::print("all-reduce check: {} vs MPI_Allreduce: {}{}\n  (the learners' reducer here: {})\n", reducer->name(),
             red.ran ? (red.ok ? "ok" : "FAILED") : "not run",
             red.ran ? fmt::format(", max error {:.1e}", red.max_error) : " (" + red.note + ")", why);
  for (const auto& l : lines) fmt::print("{}\n", l);
  if (!any_gpu)
    fmt::print("GPU checks not run (no GPU visible):\n"
               "  the CUDA scan kernel (the CPU kernels were checked),\n"
               "  the CUDA graph step (the same static-buffer path was checked, uncaptured),\n"
               "  central inference on a GPU (its Policy::step path was checked on the CPU),\n"
               "  the NCCL all-reduce and its bandwidth.\n");
  fmt::print("{}\n", every ? "selftest: every check passed" : "selftest: FAILED (see above)");
  return every ? 0 : 1;
}

}  // namespace

int selftest_main(int* argc, char*** argv, const std::string& config_file, const std::vector<std::string>& overrides) {
  MPI_Init(argc, argv);
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  Config cfg;
  try {  // every rank reads the same config: a bad key fails on all alike, said once, exit 2
    cfg = load_config(config_file, overrides);
  } catch (const std::exception& e) {
    if (rank == 0) fmt::print(stderr, "mpirl selftest: config error: {}\n", e.what());
    MPI_Finalize();
    return 2;
  }
  int code = 0;
  try {
    code = run(cfg, rank, world);
  } catch (const std::exception& e) {
    fmt::print(stderr, "mpirl selftest: rank {}: {}\n", rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return code;
}

}  // namespace mpirl
