#include "tracking/record_io.h"

#include <fstream>
#include <iterator>

#include <boost/crc.hpp>

#include "core/error.h"

namespace mpirl::tracking {
namespace {

void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(char((v >> (8 * i)) & 0xff));
}

uint64_t get_le(std::string_view in, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t(uint8_t(in[at + i])) << (8 * i);
  return v;
}

}  // namespace

uint32_t crc32c(std::string_view data) {
  // Castagnoli polynomial, reflected in and out, initial value and final xor all ones.
  boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true> crc;
  crc.process_bytes(data.data(), data.size());
  return crc.checksum();
}

uint32_t mask_crc(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

std::string frame_record(std::string_view data) {
  std::string out;
  out.reserve(data.size() + 16);
  put_le(out, data.size(), 8);
  put_le(out, masked_crc32c(std::string_view(out).substr(0, 8)), 4);
  out.append(data);
  put_le(out, masked_crc32c(data), 4);
  return out;
}

std::vector<std::string> read_records(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("cannot open event file '{}'", path));
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parse_records(all, path);
}

std::vector<std::string> parse_records(std::string_view v, const std::string& path) {
  std::vector<std::string> records;
  size_t at = 0;
  while (at < v.size()) {
    auto bad = [&](const char* what) {
      return Error(fmt::format("event file '{}': record {} at byte {}: {}", path, records.size(), at, what));
    };
    if (v.size() - at < 12) throw bad("truncated header");
    if (uint32_t(get_le(v, at + 8, 4)) != masked_crc32c(v.substr(at, 8))) throw bad("length CRC mismatch");
    const uint64_t n = get_le(v, at, 8);
    // Compared without adding to n: a length near 2^64 (its CRC forged) must not wrap around.
    if (n > v.size() - at - 12 || v.size() - at - 12 - n < 4) throw bad("truncated data");
    const std::string_view data = v.substr(at + 12, n);
    if (uint32_t(get_le(v, at + 12 + n, 4)) != masked_crc32c(data)) throw bad("data CRC mismatch");
    records.emplace_back(data);
    at += 12 + n + 4;
  }
  return records;
}

}  // namespace mpirl::tracking
