#include <cuda_runtime.h>

#include "kernels/cuda/scan_cuda.h"
#include "kernels/cuda/scan_kernel.cuh"

namespace mpirl::kernels::cuda {
namespace {

template <bool kBackward>
int launch(ScanDType dtype, const ScanKernelArgs& args, void* stream) {
  if (args.T == 0 || args.N == 0) return 0;
  // An error left by earlier work would be returned by the check after the launch and taken for
  // this kernel's: it is reported as what it is (negative), not as a failure of the scan.
  if (cudaError_t before = cudaGetLastError(); before != cudaSuccess) return -int(before);
  const LaunchShape shape = launch_shape(args.N);
  dim3 block(shape.block_x, shape.block_y);
  dim3 grid(shape.grid_x);
  auto s = static_cast<cudaStream_t>(stream);
  switch (dtype) {
    case ScanDType::F32: scan_kernel<float, kBackward><<<grid, block, 0, s>>>(args); break;
    case ScanDType::F64: scan_kernel<double, kBackward><<<grid, block, 0, s>>>(args); break;
    case ScanDType::C64: scan_kernel<Cx<float>, kBackward><<<grid, block, 0, s>>>(args); break;
    case ScanDType::C128: scan_kernel<Cx<double>, kBackward><<<grid, block, 0, s>>>(args); break;
  }
  return int(cudaGetLastError());
}

}  // namespace

int scan_forward(const ScanForwardParams& p, void* stream) { return launch<false>(p.dtype, forward_args(p), stream); }

int scan_backward(const ScanBackwardParams& p, void* stream) { return launch<true>(p.dtype, backward_args(p), stream); }

const char* error_string(int code) { return cudaGetErrorString(static_cast<cudaError_t>(code < 0 ? -code : code)); }

}  // namespace mpirl::kernels::cuda
