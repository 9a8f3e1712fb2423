#pragma once
// Runs a CUDA kernel as host C++, for kernels that use only threadIdx, blockIdx, __shared__ and
// __syncthreads (no warp intrinsics, no atomics): the CUDA keywords are defined away, every CUDA
// thread of a block is a std::thread with its own thread-local indices, __syncthreads is a
// std::barrier over the block's threads, and blocks run one after another (so a function-local
// static plays a block's shared memory). Races between the threads of a block are real races
// here: a missing __syncthreads gives wrong results (and ThreadSanitizer reports).
// Include this before the kernel's .cuh, and nowhere else.
#include <barrier>
#include <cstddef>
#include <thread>
#include <vector>

#if defined(__CUDACC__)
#error "cuda_emulation.h is for host compilers only"
#endif

#define __global__
#define __launch_bounds__(...)
#define __shared__ static

namespace mpirl::emulation {
struct Index3 {
  unsigned x = 0, y = 0, z = 0;
};
}  // namespace mpirl::emulation

inline thread_local mpirl::emulation::Index3 threadIdx, blockIdx;
inline thread_local std::barrier<>* g_emulated_block_barrier = nullptr;

inline void __syncthreads() { g_emulated_block_barrier->arrive_and_wait(); }

namespace mpirl::emulation {

// kernel(): one CUDA thread's body (e.g. [&] { scan_kernel<float, false>(args); }).
template <typename Kernel>
void launch(unsigned grid_x, unsigned block_x, unsigned block_y, const Kernel& kernel) {
  const std::ptrdiff_t n = std::ptrdiff_t(block_x) * block_y;
  for (unsigned b = 0; b < grid_x; ++b) {
    std::barrier<> block(n);
    std::vector<std::thread> threads;
    threads.reserve(size_t(n));
    for (unsigned y = 0; y < block_y; ++y)
      for (unsigned x = 0; x < block_x; ++x)
        threads.emplace_back([&, x, y] {
          threadIdx = {x, y, 0};
          blockIdx = {b, 0, 0};
          g_emulated_block_barrier = &block;
          kernel();
        });
    for (auto& t : threads) t.join();
  }
}

}  // namespace mpirl::emulation
