#pragma once
// The chunked linear-scan kernel. One block owns 32 consecutive channels (one warp wide, so every
// load and store is a coalesced 128-byte row segment for fp32) and walks time in tiles of
// kWarps * kSteps steps:
//   1. each warp loads kSteps consecutive steps into registers and composes them into one affine
//      map h -> A h + B (the chunk's summary);
//   2. warp 0 scans the kWarps summaries through shared memory, starting from the carry left by
//      the previous tile, giving every chunk its incoming state;
//   3. each warp replays its registers from that state and writes the outputs.
// Every input is read once and every output written once, for any T and any N. The backward pass
// is the same kernel run against the forward direction over g = dL/dh, with the coefficient of
// the following step, and writes dL/db = g and dL/da = g * conj(h_prev).
//
// It uses only threadIdx, blockIdx, __shared__ and __syncthreads (no warp intrinsics), so
// tests/emulation runs it as host C++ with one thread per CUDA thread.
#include "kernels/cuda/scan_launch.h"
#include "kernels/scan_math.h"

namespace mpirl::kernels::cuda {

template <typename S, bool kBackward>
__global__ void __launch_bounds__(kLanes * kWarps) scan_kernel(ScanKernelArgs p) {
  using Ops = ScalarOps<S>;
  __shared__ S sA[kWarps][kLanes];
  __shared__ S sB[kWarps][kLanes];
  __shared__ S sCarry[kLanes];
  const int lane = threadIdx.x, w = threadIdx.y;
  const int64_t T = p.T, N = p.N;
  const int64_t c = int64_t(blockIdx.x) * kLanes + lane;
  const bool active = c < N;
  const S* a = static_cast<const S*>(p.a);
  const S* x = static_cast<const S*>(p.x);
  const S* h0 = static_cast<const S*>(p.h0);
  const int64_t dir = p.reverse ? -1 : 1;
  if (w == 0) sCarry[lane] = (!kBackward && active && h0) ? h0[c] : Ops::zero();
  for (int64_t base = 0; base < T; base += int64_t(kWarps) * kSteps) {
    S A[kSteps], B[kSteps];
    S Ap = Ops::one(), Bp = Ops::zero();
#pragma unroll
    for (int i = 0; i < kSteps; ++i) {
      const int64_t s = base + int64_t(w) * kSteps + i;
      A[i] = Ops::one();
      B[i] = Ops::zero();
      if (active && s < T) {
        const int64_t t = p.reverse ? T - 1 - s : s;
        if (!kBackward) {
          A[i] = a[t * N + c];
        } else {
          A[i] = s > 0 ? conj(a[(t - dir) * N + c]) : Ops::zero();
        }
        B[i] = x[t * N + c];
      }
      Ap = A[i] * Ap;
      Bp = A[i] * Bp + B[i];
    }
    sA[w][lane] = Ap;
    sB[w][lane] = Bp;
    __syncthreads();
    if (w == 0) {
      S h = sCarry[lane];
      for (int k = 0; k < kWarps; ++k) {
        S next = sA[k][lane] * h + sB[k][lane];
        sB[k][lane] = h;  // incoming state of chunk k
        h = next;
      }
      sCarry[lane] = h;
    }
    __syncthreads();
    S h = sB[w][lane];
#pragma unroll
    for (int i = 0; i < kSteps; ++i) {
      const int64_t s = base + int64_t(w) * kSteps + i;
      h = A[i] * h + B[i];
      if (active && s < T) {
        const int64_t t = p.reverse ? T - 1 - s : s;
        static_cast<S*>(p.out)[t * N + c] = h;
        if (kBackward) {
          S hp = s < T - 1 ? static_cast<const S*>(p.h)[(t + dir) * N + c] : (h0 ? h0[c] : Ops::zero());
          static_cast<S*>(p.grad_a)[t * N + c] = h * conj(hp);
        }
      }
    }
    __syncthreads();
  }
}

}  // namespace mpirl::kernels::cuda
