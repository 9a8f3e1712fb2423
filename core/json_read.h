#pragma once
// Numbers out of JSON files that may be damaged or edited by hand (a checkpoint's state.json and
// replay_state.json): nlohmann converts a float to an integer with a plain cast, which is undefined
// behaviour when the value does not fit (a float of 1e300 read as int64). Readers call
// check_json_numbers on the whole document first; then every integer read of it is defined.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace mpirl {

// Throws Error naming `where` and the path of the first number that an integer read could not
// take: a float that is not finite or lies outside int64's range, and anything but an integer in
// [0, 2^32) under a key named "checksum", "checksum_crc32" or "crc32" (read as uint32).
void check_json_numbers(const nlohmann::json& j, const std::string& where);

}  // namespace mpirl
