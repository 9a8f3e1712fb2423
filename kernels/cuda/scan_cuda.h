#pragma once
// CUDA linear scan launchers (no torch, no CUDA headers here). `stream` is a cudaStream_t.
// Return 0 on success, a cudaError_t value when the launch failed, or minus one when an earlier
// call or kernel had left an error pending before the launch; error_string() describes either.
#include "kernels/scan_params.h"

namespace mpirl::kernels::cuda {

int scan_forward(const ScanForwardParams& p, void* stream);
int scan_backward(const ScanBackwardParams& p, void* stream);
const char* error_string(int code);

}  // namespace mpirl::kernels::cuda
