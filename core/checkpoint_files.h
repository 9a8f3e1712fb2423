#pragma once
// What writing and reading checkpoints share: the COMPLETE marker's name and format, a sorted
// directory listing, a file's size and CRC-32. Private to core/ (checkpoint.cpp, checkpoint_verify.cpp).
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <zlib.h>

#include "core/error.h"

namespace mpirl::ckpt::detail {

constexpr char kComplete[] = "COMPLETE";
constexpr int kFormat = 1;

inline std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return names;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

inline bool is_dir(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Size and CRC-32 of a file, read in 4 MiB blocks. Throws Error naming it.
inline std::pair<int64_t, uint32_t> size_and_crc(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(fmt::format("cannot open '{}': {}", path, std::strerror(errno)));
  std::vector<char> buf(size_t(4) << 20);
  uLong crc = ::crc32(0L, Z_NULL, 0);
  int64_t bytes = 0;
  for (;;) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      throw Error(fmt::format("cannot read '{}': {}", path, std::strerror(err)));
    }
    if (n == 0) break;
    crc = ::crc32(crc, reinterpret_cast<const Bytef*>(buf.data()), uInt(n));
    bytes += n;
  }
  ::close(fd);
  return {bytes, uint32_t(crc)};
}

}  // namespace mpirl::ckpt::detail
