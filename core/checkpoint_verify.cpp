// Reading checkpoints back: verify() checks a directory against its COMPLETE marker, and latest()
// finds a run's newest checkpoint that verifies (core/checkpoint.h).
#include "core/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <exception>
#include <string>
#include <utility>

#include "core/checkpoint_files.h"
#include "core/error.h"

namespace mpirl::ckpt {
namespace {

using detail::is_dir;
using detail::kComplete;
using detail::kFormat;
using detail::list_dir;
using detail::size_and_crc;

// Files that carry their own checksum (verified when loaded): COMPLETE records their size only.
// (replay.h5, and replay.shard<k>.h5 of replay shards.)
bool self_checked(const std::string& name) {
  return name == "replay.h5" || (name.rfind("replay.shard", 0) == 0 && name.size() > 3 && name.substr(name.size() - 3) == ".h5");
}

}  // namespace

// The whole of a small file; false when it cannot be opened.
static bool read_small(const std::string& path, std::string* text) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) text->append(buf, size_t(n));
  ::close(fd);
  return n == 0;
}

// An integer field of COMPLETE within [lo, hi]; false when it is missing, not an integer (a float
// out of range would convert with undefined behaviour) or outside.
static bool int_field(const nlohmann::json& o, const char* key, int64_t lo, int64_t hi, int64_t* out) {
  const auto it = o.find(key);
  if (it == o.end() || !it->is_number_integer()) return false;
  if (it->is_number_unsigned() && it->get<uint64_t>() > uint64_t(INT64_MAX)) return false;
  const int64_t v = it->get<int64_t>();
  if (v < lo || v > hi) return false;
  *out = v;
  return true;
}

std::string verify(const std::string& dir, bool deep) {
  std::string text;
  if (!read_small(dir + "/" + kComplete, &text)) return fmt::format("no {} marker (a partial checkpoint)", kComplete);
  try {
    const nlohmann::json c = nlohmann::json::parse(text);
    int64_t format = 0;
    if (!c.is_object() || !int_field(c, "format", 0, INT64_MAX, &format) || format != kFormat || !c.contains("files") ||
        !c["files"].is_object())
      return fmt::format("{} has an unknown format", kComplete);
    for (const char* k : {"version", "env_steps"})
      if (int64_t v = 0; c.contains(k) && !int_field(c, k, 0, INT64_MAX, &v))
        return fmt::format("{} has a malformed {}", kComplete, k);
    for (const auto& name : required_files())
      if (!c["files"].contains(name) || !c["files"][name].is_object())
        return fmt::format("{} does not list {}", kComplete, name);
    for (const auto& [name, f] : c["files"].items()) {
      if (!f.is_object() || name.find('/') != std::string::npos || name == "." || name == "..")
        return fmt::format("{} lists '{}' malformed", kComplete, name);
      int64_t want_bytes = 0, want_crc = 0;
      if (!int_field(f, "bytes", 0, INT64_MAX, &want_bytes) ||
          (f.contains("crc32") && !int_field(f, "crc32", 0, UINT32_MAX, &want_crc)))
        return fmt::format("{} lists '{}' with a malformed size or CRC-32", kComplete, name);
      const std::string path = dir + "/" + name;
      // Checkpoints sealed before every file had a CRC list replay.h5 by its size (the dump
      // carries its own CRC of the items, checked when restored).
      if (!deep || !f.contains("crc32")) {
        struct stat st {};
        if (::stat(path.c_str(), &st) != 0) return fmt::format("{} is missing", name);
        if (st.st_size != want_bytes) return fmt::format("{} has {} bytes, {} says {}", name, st.st_size, kComplete, want_bytes);
        if (!f.contains("crc32") && !self_checked(name)) return fmt::format("{} lists {} without a CRC-32", kComplete, name);
        continue;
      }
      std::pair<int64_t, uint32_t> got;
      try {
        got = size_and_crc(path);
      } catch (const Error& e) {
        return e.what();
      }
      if (got.first != want_bytes) return fmt::format("{} has {} bytes, {} says {}", name, got.first, kComplete, want_bytes);
      if (got.second != uint32_t(want_crc))
        return fmt::format("{} has CRC-32 {:08x}, {} says {:08x} (corrupt)", name, got.second, kComplete,
                           uint32_t(want_crc));
    }
  } catch (const nlohmann::json::exception& e) {
    return fmt::format("{} is malformed: {}", kComplete, e.what());
  }
  return "";
}

Latest latest(const std::string& run_dir, const CheckpointCheck& check) {
  Latest out;
  const std::string parent = checkpoints_dir(run_dir);
  auto names = list_dir(parent);
  for (auto it = names.rbegin(); it != names.rend(); ++it) {
    if (it->rfind("ckpt-", 0) != 0 || !is_dir(parent + "/" + *it)) continue;
    const std::string dir = parent + "/" + *it;
    std::string why = verify(dir);
    bool definite = true;  // a finding about the checkpoint itself (not a failure to read it now)
    if (why.empty() && check) {
      try {
        why = check(dir);
      } catch (const std::exception& e) {
        why = e.what();
        definite = false;
      }
    }
    if (!why.empty()) {
      out.skipped.push_back(fmt::format("{}: {}", dir, why));
      if (definite) out.skipped_dirs.push_back(dir);
      continue;
    }
    out.dir = dir;
    std::string text;
    read_small(dir + "/" + kComplete, &text);
    out.info = nlohmann::json::parse(text);
    return out;
  }
  return out;
}

}  // namespace mpirl::ckpt
