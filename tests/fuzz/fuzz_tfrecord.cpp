// libFuzzer target: any bytes as a TensorBoard event file (TFRecord framing): the reader returns
// the records or throws mpirl::Error naming the record, never reads past the bytes.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/error.h"
#include "tracking/record_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    mpirl::tracking::parse_records(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
  } catch (const mpirl::Error&) {
  }
  return 0;
}
