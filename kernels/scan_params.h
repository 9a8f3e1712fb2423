#pragma once
// Plain parameter structs of the linear-scan kernels (no torch types: the CPU and CUDA kernels
// depend on this header only; kernels/scan.h is the LibTorch binding on top).
//
// The recurrence, over time-major [T, N] contiguous arrays (N = every non-time dimension):
//   forward order (reverse = false):  h_t = a_t * h_{t-1} + b_t,  h_{-1} = h0
//   reverse order (reverse = true):   h_t = a_t * h_{t+1} + b_t,  h_T  = h0
// Its backward is the same recurrence run the other way over g = dL/dh:
//   g_t = dL/dh_t + conj(a_next(t)) * g_next(t);  dL/db_t = g_t;  dL/da_t = g_t * conj(h_prev(t))
// (conjugates follow PyTorch's convention for complex gradients.)
#include <cstdint>

namespace mpirl::kernels {

enum class ScanDType { F32, F64, C64, C128 };

struct ScanForwardParams {
  int64_t T = 0, N = 0;
  ScanDType dtype = ScanDType::F32;
  bool reverse = false;
  const void* a = nullptr;   // [T, N]
  const void* b = nullptr;   // [T, N]
  const void* h0 = nullptr;  // [N] or null (zeros)
  void* h = nullptr;         // [T, N] out
};

struct ScanBackwardParams {
  int64_t T = 0, N = 0;
  ScanDType dtype = ScanDType::F32;
  bool reverse = false;          // direction of the forward recurrence
  const void* a = nullptr;       // [T, N]
  const void* h = nullptr;       // [T, N] forward output
  const void* h0 = nullptr;      // [N] or null (zeros)
  const void* grad_h = nullptr;  // [T, N]
  void* grad_a = nullptr;        // [T, N] out
  void* grad_b = nullptr;        // [T, N] out (= g)
};

}  // namespace mpirl::kernels
