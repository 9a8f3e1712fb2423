#include "buffer/hdf5_dump.h"
#include "buffer/hdf5_io.h"

#include <hdf5.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>

#include <fmt/ranges.h>

#include "core/error.h"
#include "core/run_dir.h"

namespace mpirl::buffer {
namespace fs = std::filesystem;

uint32_t crc32_update(uint32_t crc, const void* data, size_t n) {
  return uint32_t(::crc32_z(crc, static_cast<const Bytef*>(data), z_size_t(n)));
}

DumpSnapshot DumpSnapshot::of(const ReplayBuffer& rb) {
  DumpSnapshot s;
  s.rb = &rb;
  s.slots = rb.slots_in_order();
  s.meta.reserve(s.slots.size());
  for (int64_t slot : s.slots) s.meta.push_back(rb.meta(slot));
  s.counters = rb.counters();
  s.next_seq = rb.next_insert_seq();
  s.max_priority = rb.max_priority();
  return s;
}

DumpInfo dump_replay(const ReplayBuffer& rb, const std::string& path, const std::string& env_id, const std::string& config,
                     const DumpOptions& opts) {
  return dump_replay(DumpSnapshot::of(rb), path, env_id, config, opts);
}

DumpInfo dump_replay(const DumpSnapshot& snap, const std::string& path, const std::string& env_id,
                     const std::string& config, const DumpOptions& opts) {
  quiet_hdf5();
  const ReplayBuffer& rb = *snap.rb;
  auto t0 = std::chrono::steady_clock::now();
  const auto& layout = rb.layout();
  const auto parent = fs::path(path).parent_path();
  const std::string dir = parent.empty() ? "." : parent.string();
  if (!parent.empty()) {
    std::error_code ec;
    fs::create_directories(parent, ec);
    if (ec) throw Error(fmt::format("cannot create the directory of replay dump '{}': {}", path, ec.message()));
  }
  const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  const auto& slots = snap.slots;
  const int64_t n = int64_t(slots.size());
  uint32_t crc = uint32_t(::crc32(0L, Z_NULL, 0));
  int64_t bytes = 0;
  try {
    Handle f(MPIRL_H5(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), "create " + tmp), H5Fclose);
    attr_i64(f, "schema_version", kDumpSchemaVersion, path);
    attr_str(f, "env_id", env_id, path);
    attr_i64(f, "rollout_len", layout.T(), path);
    attr_i64(f, "state_size", layout.state_size(), path);
    const auto& obs_shape = layout.fields()[0].shape;
    attr_i64_array(f, "obs_shape", std::vector<int64_t>(obs_shape.begin() + 1, obs_shape.end()), path);
    attr_str(f, "obs_dtype", layout.fields()[0].dtype == wire::DType::U8 ? "uint8" : "float32", path);
    attr_i64(f, "capacity", rb.capacity(), path);
    attr_str(f, "selector", rb.options().selector, path);
    attr_str(f, "config", config, path);
    attr_f64(f, "created_unix",
             std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(), path);
    const auto& c = snap.counters;
    for (auto [k, v] : std::vector<std::pair<const char*, int64_t>>{
             {"inserted", c.inserted}, {"evicted", c.evicted}, {"consumed", c.consumed}, {"sampled", c.sampled},
             {"batches", c.batches}, {"priority_updates", c.priority_updates},
             {"stale_priority_updates", c.stale_priority_updates}, {"next_insert_seq", snap.next_seq}})
      attr_i64(f, k, v, path);
    attr_f64(f, "max_priority", snap.max_priority, path);
    std::string names;
    for (auto& fl : layout.fields()) names += std::string(fl.name) + ",";
    names += "priority,times_sampled,insert_seq";
    attr_str(f, "fields", names, path);
    Handle g(MPIRL_H5(H5Gcreate2(f, "items", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "create group items"), H5Gclose);
    // Field by field, in bounded blocks of items copied out of the buffer: the checksum's order.
    for (size_t fi = 0; fi < layout.fields().size(); ++fi) {
      const auto& fl = layout.fields()[fi];
      write_column(
          g, fl.name, fl.dtype, n, fl.shape, opts.io_bytes,
          [&](int64_t k0, int64_t rows, char* dst) {
            for (int64_t k = 0; k < rows; ++k)
              std::memcpy(dst + size_t(k) * fl.bytes, rb.item_field(slots[size_t(k0 + k)], fi), fl.bytes);
            if (opts.on_block) opts.on_block();
          },
          crc, bytes, path);
      test_io_delay();
    }
    auto meta_column = [&](const char* name, wire::DType d, auto get) {
      write_column(
          g, name, d, n, {}, opts.io_bytes,
          [&](int64_t k0, int64_t rows, char* dst) {
            for (int64_t k = 0; k < rows; ++k) {
              auto v = get(snap.meta[size_t(k0 + k)]);
              std::memcpy(dst + size_t(k) * sizeof(v), &v, sizeof(v));
            }
            if (opts.on_block) opts.on_block();
          },
          crc, bytes, path);
    };
    meta_column("priority", wire::DType::F64, [](const ItemMeta& m) { return double(m.priority); });
    meta_column("times_sampled", wire::DType::I64, [](const ItemMeta& m) { return int64_t(m.times_sampled); });
    meta_column("insert_seq", wire::DType::I64, [](const ItemMeta& m) { return int64_t(m.insert_seq); });
    attr_i64(f, "items", n, path);
    attr_i64(f, "checksum_crc32", int64_t(crc), path);
    attr_i64(f, "complete", 1, path);  // last: a file without it was never finished
    if (opts.on_flush) opts.on_flush(true);
    MPIRL_H5(H5Fflush(f, H5F_SCOPE_GLOBAL), "flush " + tmp);
    if (opts.on_data_written) opts.on_data_written(tmp);
    g.close_checked("close of group /items", tmp);
    f.close_checked("close", tmp);
    fsync_path(tmp, false);
    // The old marker describes the file about to be replaced: never leave it beside the new one.
    if (::unlink((path + ".complete").c_str()) != 0 && errno != ENOENT)
      throw Error(fmt::format("cannot remove the old completion marker '{}.complete': {}", path, std::strerror(errno)));
    if (std::rename(tmp.c_str(), path.c_str()) != 0)
      throw Error(fmt::format("cannot rename '{}' to '{}': {}", tmp, path, std::strerror(errno)));
  } catch (const std::exception& e) {
    // The handles are closed by now (scope left). PATH is as it was, but for its marker when
    // only the rename failed.
    ::unlink(tmp.c_str());
    if (dynamic_cast<const Error*>(&e)) throw;
    throw Error(fmt::format("replay dump to '{}' failed: {}", path, e.what()));
  }
  fsync_path(dir, true);
  if (opts.on_flush) opts.on_flush(false);
  DumpInfo info;
  info.path = path;
  info.items = n;
  info.checksum = crc;
  info.bytes = bytes;
  write_json_atomic(path + ".complete", {{"items", n}, {"checksum_crc32", crc}, {"bytes", bytes}});
  // Dumps killed mid-write leave PATH.tmp.<pid>: removed after a successful one (best effort).
  const fs::path pp(path);
  remove_stale_temporaries(pp.has_parent_path() ? pp.parent_path().string() : ".", pp.filename().string(),
                           fs::path(tmp).filename().string());
  info.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return info;
}

DumpInfo link_dump(const std::string& src, const DumpInfo& src_info, const std::string& path) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  const std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/'));
  ::unlink(tmp.c_str());
  if (::link(src.c_str(), tmp.c_str()) != 0)
    throw Error(fmt::format("cannot link '{}' to '{}': {}", src, tmp, std::strerror(errno)));
  if (::unlink((path + ".complete").c_str()) != 0 && errno != ENOENT) {
    ::unlink(tmp.c_str());
    throw Error(fmt::format("cannot remove the old completion marker '{}.complete': {}", path, std::strerror(errno)));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    throw Error(fmt::format("cannot rename '{}' to '{}': {}", tmp, path, std::strerror(errno)));
  }
  fsync_path(dir, true);
  DumpInfo info = src_info;
  info.path = path;
  write_json_atomic(path + ".complete",
                    {{"items", info.items}, {"checksum_crc32", info.checksum}, {"bytes", info.bytes}});
  info.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return info;
}

}  // namespace mpirl::buffer
