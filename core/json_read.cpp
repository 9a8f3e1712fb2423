#include "core/json_read.h"

#include <cmath>

#include <fmt/format.h>

#include "core/error.h"

namespace mpirl {
namespace {

bool is_checksum_key(const std::string& k) { return k == "checksum" || k == "checksum_crc32" || k == "crc32"; }

void walk(const nlohmann::json& j, const std::string& path, bool checksum, const std::string& where, int depth) {
  if (depth > 64) throw Error(fmt::format("{}: nested more than 64 levels deep at {}", where, path));
  if (checksum) {
    const bool ok = (j.is_number_unsigned() && j.get<uint64_t>() <= 0xFFFFFFFFull) ||
                    (j.is_number_integer() && j.get<int64_t>() >= 0 && j.get<int64_t>() <= 0xFFFFFFFFll);
    if (!ok) throw Error(fmt::format("{}: {} must be a CRC-32, an integer in [0, 2^32), not {}", where, path,
                                     j.dump().substr(0, 40)));
    return;
  }
  if (j.is_number_float()) {
    const double v = j.get<double>();
    if (!std::isfinite(v) || v <= -9.2e18 || v >= 9.2e18)
      throw Error(fmt::format("{}: {} is {}, outside the range of a counter", where, path, v));
  } else if (j.is_object()) {
    for (const auto& [k, v] : j.items()) walk(v, path + "." + k, is_checksum_key(k), where, depth + 1);
  } else if (j.is_array()) {
    size_t i = 0;
    for (const auto& v : j) walk(v, fmt::format("{}[{}]", path, i++), false, where, depth + 1);
  }
}

}  // namespace

void check_json_numbers(const nlohmann::json& j, const std::string& where) { walk(j, "$", false, where, 0); }

}  // namespace mpirl
