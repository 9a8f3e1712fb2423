#include "learner/nccl_reducer.h"

#include "core/error.h"

#if MPIRL_WITH_NCCL
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <thread>
#endif

namespace mpirl::learner {

#if MPIRL_WITH_NCCL
namespace {

// Runs `f` on a thread of its own and waits for it at most `seconds`; false if it did not finish
// (the thread is then left to the process's exit, which follows the error being reported). NCCL's
// ncclCommAbort and ncclCommDestroy wait until every CUDA graph that captured an operation of the
// communicator is destroyed (NCCL >= 2.26: commDestroySync spins on localPersistentRefs), and the
// Trainer's graphs outlive a failure detected inside a replay; a bounded wait keeps
// learner.collective_timeout_s a timeout instead of an endless hang.
bool bounded(std::function<void()> f, double seconds) {
  auto done = std::make_shared<std::atomic<bool>>(false);
  std::thread([f = std::move(f), done] {
    f();
    done->store(true);
  }).detach();
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!done->load() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return done->load();
}

class NcclReducer final : public GradientReducer {
 public:
  NcclReducer(MPI_Comm learners, int size, const ReducerRequest& req) : req_(req) {
    int rank = 0;
    MPIRL_MPI(MPI_Comm_rank(learners, &rank));
    ncclUniqueId id{};
    if (rank == 0) check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    MPIRL_MPI(MPI_Bcast(&id, int(sizeof id), MPI_BYTE, 0, learners));
    c10::cuda::CUDAGuard guard(req_.device.index());
    // Non-blocking: a peer that never joins ends in a timeout naming this rank, not a hang.
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclResult_t r = ncclCommInitRankConfig(&comm_, size, id, rank, &config);
    if (r != ncclSuccess && r != ncclInProgress) fail("ncclCommInitRankConfig", r);
    wait_ready("ncclCommInitRankConfig");
    if (cudaError_t e = cudaEventCreateWithFlags(&done_, cudaEventDisableTiming); e != cudaSuccess)
      fail_cuda("cudaEventCreate", e);
  }

  // Never destroys a communicator mid-operation, and never waits without a bound: the last
  // all-reduce is given learner.collective_timeout_s to complete, then the communicator is
  // finalized (non-blocking: polled until it leaves ncclInProgress) and destroyed, each bounded.
  // The Trainer (and its CUDA graphs) is destroyed before the reducer it was built on.
  ~NcclReducer() override {
    if (comm_) {
      const double t = req_.timeout_s;
      const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(t);
      while (pending_ && cudaEventQuery(done_) == cudaErrorNotReady && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      const bool idle = !pending_ || cudaEventQuery(done_) == cudaSuccess;
      ncclComm_t c = comm_;
      comm_ = nullptr;
      if (!idle) {  // the last all-reduce never completed: a peer is gone
        bounded([c] { ncclCommAbort(c); }, 10);
      } else {
        auto finalize_destroy = [c, t] {
          ncclResult_t st = ncclCommFinalize(c);  // non-blocking: ncclInProgress until flushed
          const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(t);
          while (st == ncclInProgress && std::chrono::steady_clock::now() < end) {
            std::this_thread::sleep_for(std::chrono::microseconds(100));
            if (ncclCommGetAsyncError(c, &st) != ncclSuccess) break;
          }
          ncclCommDestroy(c);
        };
        bounded(finalize_destroy, t + 5);  // if it does not return, it is left to the process's exit
      }
    }
    if (done_) cudaEventDestroy(done_);
  }

  std::string name() const override { return "NCCL all-reduce (one GPU per learner)"; }
  ReducerKind kind() const override { return ReducerKind::Nccl; }
  bool capturable() const override { return true; }

  // Inside a CUDA graph capture only the device work is recorded; each replay is then watched
  // through replayed(), as an eager call watches itself.
  void replayed() override {
    c10::cuda::CUDAGuard guard(req_.device.index());
    wait_previous();
    watch(c10::cuda::getCurrentCUDAStream(req_.device.index()).stream());
  }

  void wait() override {
    c10::cuda::CUDAGuard guard(req_.device.index());
    wait_previous();
  }

  void average(const std::vector<torch::Tensor>& params) override {
    torch::NoGradGuard no_grad;
    c10::cuda::CUDAGuard guard(req_.device.index());
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream(req_.device.index()).stream();
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    if (cudaError_t e = cudaStreamIsCapturing(stream, &capture); e != cudaSuccess) fail_cuda("cudaStreamIsCapturing", e);
    const bool capturing = capture != cudaStreamCaptureStatusNone;
    if (!capturing) wait_previous();
    int64_t n = 0;
    for (auto& p : params) n += p.numel();
    if (!flat_.defined() || flat_.numel() != n)
      flat_ = torch::empty({n}, torch::TensorOptions().device(req_.device).dtype(torch::kFloat32));
    int64_t off = 0;
    for (auto& p : params) {  // pack (a missing gradient counts as zeros)
      auto v = flat_.narrow(0, off, p.numel());
      if (p.grad().defined()) v.copy_(p.grad().reshape(-1));
      else v.zero_();
      off += p.numel();
    }
    ncclResult_t r = ncclAllReduce(flat_.data_ptr<float>(), flat_.data_ptr<float>(), size_t(n), ncclFloat32, ncclAvg,
                                   comm_, stream);
    if (r == ncclInProgress) wait_ready("ncclAllReduce");
    else if (r != ncclSuccess) fail("ncclAllReduce", r);
    if (!capturing) watch(stream);
    off = 0;
    for (auto& p : params) {  // unpack, ordered after the all-reduce on the same stream
      auto v = flat_.narrow(0, off, p.numel()).view_as(p);
      if (p.grad().defined()) p.grad().copy_(v);
      else const_cast<torch::Tensor&>(p).mutable_grad() = v.clone();
      off += p.numel();
    }
  }

 private:
  [[noreturn]] void fail(const char* what, ncclResult_t r) {
    std::string detail = comm_ ? ncclGetLastError(comm_) : "";
    abort_comm();
    throw Error(fmt::format("learner rank {} @ {}: {} failed: {}{}{}", req_.rank, req_.host, what,
                            ncclGetErrorString(r), detail.empty() ? "" : ": ", detail));
  }
  // `e`: the failing call's own result (cudaGetLastError could report an older error instead).
  [[noreturn]] void fail_cuda(const char* what, cudaError_t e) {
    abort_comm();
    throw Error(fmt::format("learner rank {} @ {}: {} failed: {} ({})", req_.rank, req_.host, what,
                            cudaGetErrorString(e), cudaGetErrorName(e)));
  }
  // Before an error is thrown: the abort sets the communicator's abort flag at once (a kernel
  // stuck on a lost peer returns) but may then wait for CUDA graphs holding the communicator, so
  // it is bounded; the process ends right after the error (MPI_Abort).
  void abort_comm() {
    if (!comm_) return;
    ncclComm_t c = comm_;
    comm_ = nullptr;
    bounded([c] { ncclCommAbort(c); }, 10);
  }
  // The all-reduce just enqueued on `stream` is pending until its event completes.
  void watch(cudaStream_t stream) {
    if (cudaError_t e = cudaEventRecord(done_, stream); e != cudaSuccess) fail_cuda("cudaEventRecord", e);
    pending_ = true;
    started_ = std::chrono::steady_clock::now();
  }
  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  }
  void check(ncclResult_t r, const char* what) {
    if (r != ncclSuccess) fail(what, r);
  }
  // Polls the communicator's async error (sleeping, not spinning) until the call is done.
  void wait_ready(const char* what) {
    started_ = std::chrono::steady_clock::now();
    for (;;) {
      ncclResult_t st = ncclSuccess;
      check(ncclCommGetAsyncError(comm_, &st), "ncclCommGetAsyncError");
      if (st == ncclSuccess) return;
      if (st != ncclInProgress) fail(what, st);
      timeout_check(what);
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  // The previous all-reduce must have completed before its bucket is reused; normally it has.
  void wait_previous() {
    while (pending_) {
      const cudaError_t q = cudaEventQuery(done_);
      if (q == cudaSuccess) {
        pending_ = false;
        return;
      }
      if (q != cudaErrorNotReady) fail_cuda("cudaEventQuery", q);
      ncclResult_t st = ncclSuccess;
      check(ncclCommGetAsyncError(comm_, &st), "ncclCommGetAsyncError");
      if (st != ncclSuccess && st != ncclInProgress) fail("ncclAllReduce (async)", st);
      timeout_check("ncclAllReduce");
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  void timeout_check(const char* what) {
    if (elapsed() <= req_.timeout_s) return;
    abort_comm();
    throw Error(fmt::format("learner rank {} @ {}: {} did not complete within learner.collective_timeout_s = {} s "
                            "(a peer learner is gone or stuck); the NCCL communicator was aborted",
                            req_.rank, req_.host, what, req_.timeout_s));
  }

  ReducerRequest req_;
  ncclComm_t comm_ = nullptr;
  cudaEvent_t done_ = nullptr;
  bool pending_ = false;
  std::chrono::steady_clock::time_point started_;
  torch::Tensor flat_;  // the device bucket, reused
};

}  // namespace

bool nccl_available() { return true; }

std::string nccl_version() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "unknown";
  return fmt::format("{}.{}.{}", v / 10000, (v / 100) % 100, v % 100);
}

std::unique_ptr<GradientReducer> make_nccl_reducer(MPI_Comm learners, int size, const ReducerRequest& req) {
  MPIRL_CHECK(req.device.is_cuda(), "the NCCL reducer needs a CUDA device, not {}", req.device.str());
  return std::make_unique<NcclReducer>(learners, size, req);
}

#else

bool nccl_available() { return false; }

std::string nccl_version() { return "none"; }

std::unique_ptr<GradientReducer> make_nccl_reducer(MPI_Comm, int, const ReducerRequest& req) {
  throw Error(fmt::format("learner rank {} @ {}: this mpirl was built without NCCL", req.rank, req.host));
}

#endif

}  // namespace mpirl::learner
