// The default configuration text (configs/default.toml), embedded at build time. Loading a config:
// core/config_load.cpp; checking its values: core/config_check.cpp.
#include "core/config.h"

namespace mpirl {
namespace {

const char kDefaultToml[] =
#include "default_config.inc"
    ;

}  // namespace

const std::string& default_config_toml() {
  static const std::string s(kDefaultToml);
  return s;
}

}  // namespace mpirl
