#pragma once
// Byte-bounded cuts of UTF-8 text that never split a character (a path or an error message cut
// at a byte count mid-character would make every later JSON dump of it throw).
#include <string>

namespace mpirl {

// The longest prefix of s of at most max_bytes bytes that ends on a character boundary.
inline std::string utf8_prefix(const std::string& s, size_t max_bytes) {
  if (s.size() <= max_bytes) return s;
  size_t n = max_bytes;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;  // s[n] continues a character
  return s.substr(0, n);
}

// The longest suffix of s of at most max_bytes bytes that starts on a character boundary.
inline std::string utf8_suffix(const std::string& s, size_t max_bytes) {
  if (s.size() <= max_bytes) return s;
  size_t start = s.size() - max_bytes;
  while (start < s.size() && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) ++start;
  return s.substr(start);
}

}  // namespace mpirl
