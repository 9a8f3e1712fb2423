#pragma once
// The reset-aware linear scan, LibTorch side: h_t = a_t * h_{t-1} + b_t over dim 0 of time-major
// [T, ...] tensors (a reset at t is a_t = 0). Runs on CPU (parallel over channels) or CUDA
// (parallel over channels and time), in float32/float64/complex64/complex128, with autograd whose
// backward is itself a scan run the other way. `reverse` runs h_t = a_t * h_{t+1} + b_t with
// h_T = h0 (returns, V-trace). h0 ([...] = a.shape[1:]) may be undefined for zeros.
#include <torch/torch.h>

namespace mpirl::kernels {

torch::Tensor linear_scan(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& h0 = {},
                          bool reverse = false);

// The native kernels with autograd, whatever scan_backend() says (what the self-check tests).
torch::Tensor linear_scan_native(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& h0 = {},
                                 bool reverse = false);

// What linear_scan() runs: the native kernels (CPU, CUDA) or linear_scan_aten. A process-wide
// setting like torch's thread count, made once at start-up before any scan runs
// (kernels.scan_backend, or the learners' self-check falling back to ATen), never mid-run.
enum class ScanBackend { Native, Aten };
void set_scan_backend(ScanBackend b);
ScanBackend scan_backend();
const char* scan_backend_name(ScanBackend b);

// The same recurrence as plain ATen operations, one step at a time: autograd through ATen's own
// derivatives (complex included), no custom kernel, no host synchronisation (capturable in a CUDA
// graph). T small kernels per call, so slow for long T: the reference the CUDA kernel is checked
// against on a GPU, and the fallback when that check fails.
torch::Tensor linear_scan_aten(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& h0 = {},
                               bool reverse = false);

// The raw kernels without autograd (used by linear_scan and by tests/benchmarks).
torch::Tensor linear_scan_forward(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& h0, bool reverse);
// Returns {dL/da, dL/db, dL/dh0}.
std::vector<torch::Tensor> linear_scan_backward(const torch::Tensor& a, const torch::Tensor& h, const torch::Tensor& h0,
                                                const torch::Tensor& grad_h, bool reverse);

}  // namespace mpirl::kernels
