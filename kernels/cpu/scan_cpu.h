#pragma once
// CPU linear scan: sequential over time, parallel (and vectorised) over channels.
#include "kernels/scan_params.h"

namespace mpirl::kernels::cpu {

void scan_forward(const ScanForwardParams& p);
void scan_backward(const ScanBackwardParams& p);

}  // namespace mpirl::kernels::cpu
