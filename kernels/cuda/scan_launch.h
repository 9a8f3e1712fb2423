#pragma once
// How the CUDA scan launchers map their parameters onto the kernel: the tile constants, the
// kernel's argument block for each pass, and the grid and block shape. Plain C++ (no CUDA
// headers): the real launcher (scan_cuda.cu) and the kernel's CPU emulation
// (tests/emulation/test_scan_kernel_emulated.cpp) use this one mapping, so the emulation also
// tests it.
#include <cstdint>

#include "kernels/scan_params.h"

namespace mpirl::kernels::cuda {

constexpr int kLanes = 32;  // channels per block (one warp wide)
constexpr int kWarps = 16;  // chunks per tile (warps per block)
constexpr int kSteps = 8;   // steps per chunk

struct ScanKernelArgs {
  int64_t T, N;
  bool reverse;  // iteration direction of this pass
  const void* a;
  const void* x;   // forward: b; backward: dL/dh
  const void* h0;  // forward: initial state; backward: h0 of the forward pass (for dL/da)
  const void* h;   // backward: forward output
  void* out;       // forward: h; backward: dL/db
  void* grad_a;    // backward only
};

struct LaunchShape {
  unsigned grid_x;            // blocks: one per kLanes channels
  unsigned block_x, block_y;  // threads: kLanes lanes x kWarps warps
};

inline LaunchShape launch_shape(int64_t N) { return {unsigned((N + kLanes - 1) / kLanes), kLanes, kWarps}; }

inline ScanKernelArgs forward_args(const ScanForwardParams& p) {
  return {p.T, p.N, p.reverse, p.a, p.b, p.h0, nullptr, p.h, nullptr};
}

// The backward pass runs against the forward direction.
inline ScanKernelArgs backward_args(const ScanBackwardParams& p) {
  return {p.T, p.N, !p.reverse, p.a, p.grad_h, p.h0, p.h, p.grad_b, p.grad_a};
}

}  // namespace mpirl::kernels::cuda
