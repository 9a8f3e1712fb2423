// libFuzzer target: any bytes as a checkpoint's COMPLETE marker, beside real files: ckpt::verify
// (what latest() and prune() run on every checkpoint directory) returns "" or what is wrong, never
// crashes or touches a file outside the directory.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include "core/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = [] {
    std::string d = "/tmp/mpirl-fuzz-ckpt-" + std::to_string(::getpid());
    std::system(("mkdir -p " + d).c_str());
    for (const auto& f : mpirl::ckpt::required_files()) std::ofstream(d + "/" + f) << f;
    return d;
  }();
  std::ofstream(dir + "/COMPLETE", std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data),
                                                                             std::streamsize(size));
  mpirl::ckpt::verify(dir, true);
  mpirl::ckpt::verify(dir, false);
  return 0;
}
