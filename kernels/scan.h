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

// The raw kernels without autograd (used by linear_scan and by tests/benchmarks).
torch::Tensor linear_scan_forward(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& h0, bool reverse);
// Returns {dL/da, dL/db, dL/dh0}.
std::vector<torch::Tensor> linear_scan_backward(const torch::Tensor& a, const torch::Tensor& h, const torch::Tensor& h0,
                                                const torch::Tensor& grad_h, bool reverse);

}  // namespace mpirl::kernels
