#pragma once
// TFRecord framing, the container of TensorBoard event files. Each record is
//   uint64 length (little-endian) | uint32 masked CRC-32C of those 8 bytes | data | uint32 masked CRC-32C of data
// with mask(crc) = ((crc >> 15) | (crc << 17)) + 0xa282ead8 (TensorFlow's lib/hash/crc32c.h).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mpirl::tracking {

uint32_t crc32c(std::string_view data);  // CRC-32C (Castagnoli), as in iSCSI: crc32c("123456789") = 0xE3069283
uint32_t mask_crc(uint32_t crc);
inline uint32_t masked_crc32c(std::string_view data) { return mask_crc(crc32c(data)); }

// One framed record: 12 + data.size() + 4 bytes.
std::string frame_record(std::string_view data);

// The records of a whole file, in order. Throws mpirl::Error naming the file and the record on a
// short read or a CRC mismatch.
std::vector<std::string> read_records(const std::string& path);
// The same over bytes already read (`path` names them in errors).
std::vector<std::string> parse_records(std::string_view bytes, const std::string& path);

}  // namespace mpirl::tracking
