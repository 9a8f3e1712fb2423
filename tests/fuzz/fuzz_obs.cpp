// libFuzzer target: any bytes as one sequence's compressed observations (comm/obs_codec.h),
// decoded the way a receiver of a rollout decodes them, into a buffer of exactly the expected
// shape. Each decode returns or throws mpirl::Error; it never reads or writes out of bounds (ASan)
// and never allocates more than the shape's stream can hold.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "comm/obs_codec.h"
#include "core/error.h"
#include "tests/fuzz/fuzz_specs.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mpirl;
  static ObsCodec codec;
  std::vector<uint8_t> out(size_t(fuzz::kObsFrames * fuzz::kObsPlanes * fuzz::kObsPlaneBytes));
  try {
    codec.decode(reinterpret_cast<const char*>(data), size, out.data(), fuzz::kObsFrames, fuzz::kObsPlanes,
                 fuzz::kObsPlaneBytes, "fuzz input");
  } catch (const Error&) {
  }
  return 0;
}
