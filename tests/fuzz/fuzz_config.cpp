// libFuzzer target: any text as a run's config.toml (what `mpirl eval`, `mpirl export` and the
// replay tools read back): parse_resolved_config must accept it or throw ConfigError naming what is
// wrong, never crash.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/config.h"
#include "core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    mpirl::Config c = mpirl::parse_resolved_config(text);
    (void)c;
  } catch (const mpirl::Error&) {
  }
  return 0;
}
