#include "buffer/hdf5_dump.h"

#include <dirent.h>
#include <hdf5.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <thread>

#include <fmt/ranges.h>

#include "core/error.h"
#include "core/run_dir.h"

namespace mpirl::buffer {
namespace fs = std::filesystem;
namespace {

// Every HDF5 call is checked; errors name the file and the call site.
#define MPIRL_H5(expr, what)                                                                              \
  [&] {                                                                                                   \
    auto _r = (expr);                                                                                     \
    if (_r < 0) throw Error(fmt::format("HDF5 {} failed for '{}' ({}:{})", what, path, __FILE__, __LINE__)); \
    return _r;                                                                                            \
  }()

struct Handle {  // closes an HDF5 id with the right function
  hid_t id = -1;
  herr_t (*close)(hid_t) = nullptr;
  Handle(hid_t i, herr_t (*c)(hid_t)) : id(i), close(c) {}
  Handle(const Handle&) = delete;
  Handle(Handle&& o) noexcept : id(o.id), close(o.close) { o.id = -1; }
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      if (id >= 0 && close) close(id);
      id = o.id;
      close = o.close;
      o.id = -1;
    }
    return *this;
  }
  ~Handle() {
    if (id >= 0 && close) close(id);  // unwinding: an error is already on its way
  }
  operator hid_t() const { return id; }
  // Closes now; on the write path a failed close (the data may not have reached the file) is
  // an error naming the file.
  void close_checked(const std::string& what, const std::string& file) {
    hid_t i = id;
    id = -1;
    if (i >= 0 && close && close(i) < 0) throw Error(fmt::format("HDF5 {} failed for '{}'", what, file));
  }
};

void quiet_hdf5() {
  static const bool once = [] {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    return true;
  }();
  (void)once;
}

hid_t mem_type(wire::DType d) {
  switch (d) {
    case wire::DType::F32: return H5T_NATIVE_FLOAT;
    case wire::DType::F64: return H5T_NATIVE_DOUBLE;
    case wire::DType::I32: return H5T_NATIVE_INT32;
    case wire::DType::I64: return H5T_NATIVE_INT64;
    case wire::DType::U8: return H5T_NATIVE_UINT8;
  }
  return H5T_NATIVE_UINT8;
}

hid_t file_type(wire::DType d) {
  switch (d) {
    case wire::DType::F32: return H5T_IEEE_F32LE;
    case wire::DType::F64: return H5T_IEEE_F64LE;
    case wire::DType::I32: return H5T_STD_I32LE;
    case wire::DType::I64: return H5T_STD_I64LE;
    case wire::DType::U8: return H5T_STD_U8LE;
  }
  return H5T_STD_U8LE;
}

bool dtype_of(hid_t t, wire::DType* out) {
  auto cls = H5Tget_class(t);
  size_t size = H5Tget_size(t);
  if (cls == H5T_FLOAT) {
    if (size == 4) return *out = wire::DType::F32, true;
    if (size == 8) return *out = wire::DType::F64, true;
  } else if (cls == H5T_INTEGER) {
    bool sign = H5Tget_sign(t) == H5T_SGN_2;
    if (size == 1 && !sign) return *out = wire::DType::U8, true;
    if (size == 4 && sign) return *out = wire::DType::I32, true;
    if (size == 8 && sign) return *out = wire::DType::I64, true;
  }
  return false;
}

void attr_i64(hid_t loc, const char* name, int64_t v, const std::string& path) {
  Handle sp(MPIRL_H5(H5Screate(H5S_SCALAR), "H5Screate"), H5Sclose);
  Handle a(MPIRL_H5(H5Acreate2(loc, name, H5T_STD_I64LE, sp, H5P_DEFAULT, H5P_DEFAULT), std::string("create attribute ") + name), H5Aclose);
  MPIRL_H5(H5Awrite(a, H5T_NATIVE_INT64, &v), std::string("write attribute ") + name);
}

void attr_f64(hid_t loc, const char* name, double v, const std::string& path) {
  Handle sp(MPIRL_H5(H5Screate(H5S_SCALAR), "H5Screate"), H5Sclose);
  Handle a(MPIRL_H5(H5Acreate2(loc, name, H5T_IEEE_F64LE, sp, H5P_DEFAULT, H5P_DEFAULT), std::string("create attribute ") + name), H5Aclose);
  MPIRL_H5(H5Awrite(a, H5T_NATIVE_DOUBLE, &v), std::string("write attribute ") + name);
}

void attr_str(hid_t loc, const char* name, const std::string& v, const std::string& path) {
  Handle t(MPIRL_H5(H5Tcopy(H5T_C_S1), "H5Tcopy"), H5Tclose);
  MPIRL_H5(H5Tset_size(t, H5T_VARIABLE), "H5Tset_size");
  MPIRL_H5(H5Tset_cset(t, H5T_CSET_UTF8), "H5Tset_cset");
  Handle sp(MPIRL_H5(H5Screate(H5S_SCALAR), "H5Screate"), H5Sclose);
  Handle a(MPIRL_H5(H5Acreate2(loc, name, t, sp, H5P_DEFAULT, H5P_DEFAULT), std::string("create attribute ") + name), H5Aclose);
  const char* p = v.c_str();
  MPIRL_H5(H5Awrite(a, t, &p), std::string("write attribute ") + name);
}

void attr_i64_array(hid_t loc, const char* name, const std::vector<int64_t>& v, const std::string& path) {
  hsize_t n = v.size();
  Handle sp(MPIRL_H5(H5Screate_simple(1, &n, nullptr), "H5Screate_simple"), H5Sclose);
  Handle a(MPIRL_H5(H5Acreate2(loc, name, H5T_STD_I64LE, sp, H5P_DEFAULT, H5P_DEFAULT), std::string("create attribute ") + name), H5Aclose);
  MPIRL_H5(H5Awrite(a, H5T_NATIVE_INT64, v.data()), std::string("write attribute ") + name);
}

bool has_attr(hid_t loc, const char* name) { return H5Aexists(loc, name) > 0; }

int64_t read_i64(hid_t loc, const char* name, const std::string& path) {
  Handle a(MPIRL_H5(H5Aopen(loc, name, H5P_DEFAULT), std::string("open attribute ") + name), H5Aclose);
  int64_t v = 0;
  MPIRL_H5(H5Aread(a, H5T_NATIVE_INT64, &v), std::string("read attribute ") + name);
  return v;
}

double read_f64(hid_t loc, const char* name, const std::string& path) {
  Handle a(MPIRL_H5(H5Aopen(loc, name, H5P_DEFAULT), std::string("open attribute ") + name), H5Aclose);
  double v = 0;
  MPIRL_H5(H5Aread(a, H5T_NATIVE_DOUBLE, &v), std::string("read attribute ") + name);
  return v;
}

std::string read_str(hid_t loc, const char* name, const std::string& path) {
  Handle a(MPIRL_H5(H5Aopen(loc, name, H5P_DEFAULT), std::string("open attribute ") + name), H5Aclose);
  Handle t(MPIRL_H5(H5Tcopy(H5T_C_S1), "H5Tcopy"), H5Tclose);
  MPIRL_H5(H5Tset_size(t, H5T_VARIABLE), "H5Tset_size");
  MPIRL_H5(H5Tset_cset(t, H5T_CSET_UTF8), "H5Tset_cset");
  char* p = nullptr;
  MPIRL_H5(H5Aread(a, t, &p), std::string("read attribute ") + name);
  std::string s = p ? p : "";
  H5free_memory(p);
  return s;
}

std::vector<int64_t> read_i64_array(hid_t loc, const char* name, const std::string& path) {
  Handle a(MPIRL_H5(H5Aopen(loc, name, H5P_DEFAULT), std::string("open attribute ") + name), H5Aclose);
  Handle sp(MPIRL_H5(H5Aget_space(a), std::string("H5Aget_space ") + name), H5Sclose);
  hssize_t n = H5Sget_simple_extent_npoints(sp);
  std::vector<int64_t> v(size_t(std::max<hssize_t>(n, 0)));
  if (!v.empty()) MPIRL_H5(H5Aread(a, H5T_NATIVE_INT64, v.data()), std::string("read attribute ") + name);
  return v;
}

size_t item_bytes_of(wire::DType d, const std::vector<int64_t>& shape) {
  size_t b = wire::dtype_size(d);
  for (auto x : shape) b *= size_t(x);
  return b;
}

// Selects items [k0, k0 + rows) of a [n, shape...] dataspace; returns the matching memory space.
Handle select_rows(hid_t space, int64_t k0, int64_t rows, const std::vector<int64_t>& shape, const std::string& path) {
  std::vector<hsize_t> start(shape.size() + 1, 0), count{hsize_t(rows)};
  start[0] = hsize_t(k0);
  for (auto x : shape) count.push_back(hsize_t(x));
  MPIRL_H5(H5Sselect_hyperslab(space, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr), "select items");
  return Handle(MPIRL_H5(H5Screate_simple(int(count.size()), count.data(), nullptr), "H5Screate_simple"), H5Sclose);
}

// Writes one [n, shape...] dataset, chunked along items (about 1 MiB per chunk), in blocks of
// at most io_bytes of items (at least one): fill(k0, rows, dst) writes items [k0, k0 + rows) to
// dst. The blocks go into the checksum in order, so the CRC is that of the whole dataset.
template <class Fill>
void write_column(hid_t group, const std::string& name, wire::DType d, int64_t n, const std::vector<int64_t>& shape,
                  size_t io_bytes, Fill&& fill, uint32_t& crc, int64_t& bytes, const std::string& path) {
  std::vector<hsize_t> dims{hsize_t(n)}, maxdims{H5S_UNLIMITED}, chunk;
  const size_t item_bytes = std::max<size_t>(item_bytes_of(d, shape), 1);
  for (auto s : shape) {
    dims.push_back(hsize_t(s));
    maxdims.push_back(hsize_t(s));
  }
  chunk = dims;
  chunk[0] = hsize_t(std::clamp<int64_t>(int64_t((1 << 20) / item_bytes), 1, std::max<int64_t>(n, 1)));
  for (size_t i = 1; i < chunk.size(); ++i) chunk[i] = std::max<hsize_t>(chunk[i], 1);
  Handle sp(MPIRL_H5(H5Screate_simple(int(dims.size()), dims.data(), maxdims.data()), "H5Screate_simple"), H5Sclose);
  Handle plist(MPIRL_H5(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate"), H5Pclose);
  MPIRL_H5(H5Pset_chunk(plist, int(chunk.size()), chunk.data()), "H5Pset_chunk " + name);
  Handle ds(MPIRL_H5(H5Dcreate2(group, name.c_str(), file_type(d), sp, H5P_DEFAULT, plist, H5P_DEFAULT), "create dataset " + name),
            H5Dclose);
  const int64_t block = std::clamp<int64_t>(int64_t(io_bytes / item_bytes), 1, std::max<int64_t>(n, 1));
  std::vector<char> buf(size_t(std::min(block, n)) * item_bytes);
  for (int64_t k0 = 0; k0 < n; k0 += block) {
    const int64_t rows = std::min(block, n - k0);
    const size_t len = size_t(rows) * item_bytes;
    fill(k0, rows, buf.data());
    crc = crc32_update(crc, buf.data(), len);
    bytes += int64_t(len);
    Handle mem = select_rows(sp, k0, rows, shape, path);
    MPIRL_H5(H5Dwrite(ds, mem_type(d), mem, sp, H5P_DEFAULT, buf.data()), "write dataset " + name);
  }
  ds.close_checked("close of dataset /items/" + name, path);
}

// Reads items [k0, k0 + rows) of a [n, shape...] dataset into dst.
void read_rows(hid_t ds, wire::DType d, int64_t k0, int64_t rows, const std::vector<int64_t>& shape, void* dst,
               const std::string& name, const std::string& path) {
  Handle fsp(MPIRL_H5(H5Dget_space(ds), "H5Dget_space " + name), H5Sclose);
  Handle mem = select_rows(fsp, k0, rows, shape, path);
  MPIRL_H5(H5Dread(ds, mem_type(d), mem, fsp, H5P_DEFAULT, dst), "read /items/" + name);
}

// Removes PATH.tmp.<digits> files (dumps killed mid-write) next to `path`, except `keep`.
// Best effort: a leftover that cannot be removed does not fail the dump that just succeeded.
void remove_stale_temporaries(const std::string& path, const std::string& keep) {
  const fs::path p(path);
  const std::string dir = p.has_parent_path() ? p.parent_path().string() : ".";
  const std::string prefix = p.filename().string() + ".tmp.", own = fs::path(keep).filename().string();
  // POSIX, not std::filesystem::directory_iterator (LibTorch exports its own copy of it).
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  std::vector<std::string> stale;
  while (const dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0 || name == own) continue;
    if (name.find_first_not_of("0123456789", prefix.size()) != std::string::npos) continue;
    stale.push_back(name);
  }
  ::closedir(d);
  for (auto& name : stale) ::unlink((fs::path(dir) / name).c_str());
}

void test_delay() {
  static const int ms = [] {
    const char* e = std::getenv("MPIRL_TEST_DUMP_DELAY_MS");
    return e ? std::atoi(e) : 0;
  }();
  if (ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

}  // namespace

uint32_t crc32_update(uint32_t crc, const void* data, size_t n) {
  return uint32_t(::crc32_z(crc, static_cast<const Bytef*>(data), z_size_t(n)));
}

DumpInfo dump_replay(const ReplayBuffer& rb, const std::string& path, const std::string& env_id, const std::string& config,
                     const DumpOptions& opts) {
  quiet_hdf5();
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
  const auto slots = rb.slots_in_order();
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
    attr_i64(f, "capacity", rb.capacity(), path);
    attr_str(f, "selector", rb.options().selector, path);
    attr_str(f, "config", config, path);
    attr_f64(f, "created_unix",
             std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(), path);
    const auto& c = rb.counters();
    for (auto [k, v] : std::vector<std::pair<const char*, int64_t>>{
             {"inserted", c.inserted}, {"evicted", c.evicted}, {"consumed", c.consumed}, {"sampled", c.sampled},
             {"batches", c.batches}, {"priority_updates", c.priority_updates},
             {"stale_priority_updates", c.stale_priority_updates}, {"next_insert_seq", rb.next_insert_seq()}})
      attr_i64(f, k, v, path);
    attr_f64(f, "max_priority", rb.max_priority(), path);
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
          },
          crc, bytes, path);
      test_delay();
    }
    auto meta_column = [&](const char* name, wire::DType d, auto get) {
      write_column(
          g, name, d, n, {}, opts.io_bytes,
          [&](int64_t k0, int64_t rows, char* dst) {
            for (int64_t k = 0; k < rows; ++k) {
              auto v = get(rb.meta(slots[size_t(k0 + k)]));
              std::memcpy(dst + size_t(k) * sizeof(v), &v, sizeof(v));
            }
          },
          crc, bytes, path);
    };
    meta_column("priority", wire::DType::F64, [](const ItemMeta& m) { return double(m.priority); });
    meta_column("times_sampled", wire::DType::I64, [](const ItemMeta& m) { return int64_t(m.times_sampled); });
    meta_column("insert_seq", wire::DType::I64, [](const ItemMeta& m) { return int64_t(m.insert_seq); });
    attr_i64(f, "items", n, path);
    attr_i64(f, "checksum_crc32", int64_t(crc), path);
    attr_i64(f, "complete", 1, path);  // last: a file without it was never finished
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
  DumpInfo info;
  info.path = path;
  info.items = n;
  info.checksum = crc;
  info.bytes = bytes;
  write_json_atomic(path + ".complete", {{"items", n}, {"checksum_crc32", crc}, {"bytes", bytes}});
  remove_stale_temporaries(path, tmp);
  info.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return info;
}

namespace {

// Opens a dump for reading after the existence and format checks; errors name the file.
Handle open_dump(const std::string& path) {
  quiet_hdf5();
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw Error(fmt::format("replay dump '{}' does not exist", path));
  if (H5Fis_hdf5(path.c_str()) <= 0) throw Error(fmt::format("replay dump '{}' is not an HDF5 file", path));
  hid_t fid = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (fid < 0) throw Error(fmt::format("replay dump '{}' cannot be opened as HDF5 (truncated or corrupt file)", path));
  return Handle(fid, H5Fclose);
}

DumpHeader header_of(hid_t f, const std::string& path) {
  DumpHeader h;
  if (!has_attr(f, "schema_version"))
    throw Error(fmt::format("'{}' is not an mpirl replay dump (no schema_version attribute)", path));
  h.schema_version = read_i64(f, "schema_version", path);
  if (h.schema_version != kDumpSchemaVersion)
    throw Error(fmt::format("replay dump '{}' has schema version {}; this mpirl reads version {}", path,
                            h.schema_version, kDumpSchemaVersion));
  h.complete = has_attr(f, "complete") && read_i64(f, "complete", path) == 1;
  if (!h.complete)
    throw Error(fmt::format("replay dump '{}' is incomplete (no completion mark): its writer stopped mid-dump", path));
  h.env_id = read_str(f, "env_id", path);
  h.rollout_len = read_i64(f, "rollout_len", path);
  h.state_size = read_i64(f, "state_size", path);
  h.obs_shape = read_i64_array(f, "obs_shape", path);
  h.capacity = read_i64(f, "capacity", path);
  h.items = read_i64(f, "items", path);
  h.checksum = uint32_t(read_i64(f, "checksum_crc32", path));
  h.selector = read_str(f, "selector", path);
  h.config = read_str(f, "config", path);
  for (const char* k : {"inserted", "evicted", "consumed", "sampled", "batches", "priority_updates",
                        "stale_priority_updates", "next_insert_seq"})
    h.counters[k] = double(read_i64(f, k, path));
  h.counters["max_priority"] = read_f64(f, "max_priority", path);
  return h;
}

std::vector<std::string> split_names(const std::string& names) {
  std::vector<std::string> out;
  size_t p = 0;
  while (p <= names.size()) {
    size_t q = names.find(',', p);
    std::string name = names.substr(p, q == std::string::npos ? std::string::npos : q - p);
    p = q == std::string::npos ? names.size() + 1 : q + 1;
    if (!name.empty()) out.push_back(name);
  }
  return out;
}

}  // namespace

DumpHeader read_dump_header(const std::string& path) {
  Handle f = open_dump(path);
  return header_of(f, path);
}

void check_dump_compatible(const DumpHeader& h, const std::string& path, const SeqLayout& layout,
                           const std::string& env_id, int64_t capacity) {
  auto bad = [&](const std::string& what) {
    throw Error(fmt::format("replay dump '{}' does not fit this run: {}", path, what));
  };
  if (h.env_id != env_id) bad(fmt::format("it holds env '{}', the run uses '{}'", h.env_id, env_id));
  if (h.rollout_len != layout.T()) bad(fmt::format("rollout_len {} != actor.rollout_len {}", h.rollout_len, layout.T()));
  if (h.state_size != layout.state_size())
    bad(fmt::format("recurrent state size {} != the model's {}", h.state_size, layout.state_size()));
  const auto& os = layout.fields()[0].shape;
  if (h.obs_shape != std::vector<int64_t>(os.begin() + 1, os.end()))
    bad(fmt::format("observation shape [{}] != [{}]", fmt::join(h.obs_shape, ","), fmt::join(os.begin() + 1, os.end(), ",")));
  if (h.items > capacity) bad(fmt::format("{} items but replay.capacity = {}", h.items, capacity));
}

std::vector<DumpArray> read_dump_items(const std::string& path, uint32_t* checksum_out) {
  Handle f = open_dump(path);
  header_of(f, path);  // schema, completeness
  std::vector<DumpArray> out;
  uint32_t crc = uint32_t(::crc32(0L, Z_NULL, 0));
  for (const auto& name : split_names(read_str(f, "fields", path))) {
    std::string full = "items/" + name;
    hid_t did = H5Dopen2(f, full.c_str(), H5P_DEFAULT);
    if (did < 0) throw Error(fmt::format("replay dump '{}' lacks dataset /{}", path, full));
    Handle ds(did, H5Dclose);
    Handle t(MPIRL_H5(H5Dget_type(ds), "H5Dget_type /" + full), H5Tclose);
    DumpArray a;
    a.name = name;
    if (!dtype_of(t, &a.dtype)) throw Error(fmt::format("replay dump '{}': dataset /{} has an unsupported type", path, full));
    Handle sp(MPIRL_H5(H5Dget_space(ds), "H5Dget_space /" + full), H5Sclose);
    int rank = MPIRL_H5(H5Sget_simple_extent_ndims(sp), "dimensions of /" + full);
    std::vector<hsize_t> dims(static_cast<size_t>(rank));
    MPIRL_H5(H5Sget_simple_extent_dims(sp, dims.data(), nullptr), "dimensions of /" + full);
    size_t count = 1;
    for (auto d : dims) {
      a.shape.push_back(int64_t(d));
      count *= size_t(d);
    }
    a.data.resize(count * wire::dtype_size(a.dtype));
    if (count > 0) MPIRL_H5(H5Dread(ds, mem_type(a.dtype), H5S_ALL, H5S_ALL, H5P_DEFAULT, a.data.data()), "read /" + full);
    crc = crc32_update(crc, a.data.data(), a.data.size());
    out.push_back(std::move(a));
  }
  if (checksum_out) *checksum_out = crc;
  return out;
}

DumpHeader restore_replay(ReplayBuffer& rb, const std::string& path, const std::string& env_id, const DumpOptions& opts) {
  MPIRL_CHECK(rb.size() == 0, "restore into a non-empty replay");
  Handle f = open_dump(path);  // one open file for the header and both passes
  auto h = header_of(f, path);
  const auto& layout = rb.layout();
  check_dump_compatible(h, path, layout, env_id, rb.capacity());
  const int64_t n = h.items;
  if (n < 0) throw Error(fmt::format("replay dump '{}' says it holds {} items", path, n));
  const size_t nf = layout.fields().size();

  // The datasets this run's layout needs, in the checksum's order, each checked before any read.
  struct Column {
    std::string name;
    wire::DType dtype;
    std::vector<int64_t> shape;  // per item
    size_t item_bytes;
    Handle ds{-1, H5Dclose};
  };
  std::vector<Column> cols;
  for (const auto& fl : layout.fields()) cols.push_back({fl.name, fl.dtype, fl.shape, fl.bytes});
  cols.push_back({"priority", wire::DType::F64, {}, 8});
  cols.push_back({"times_sampled", wire::DType::I64, {}, 8});
  cols.push_back({"insert_seq", wire::DType::I64, {}, 8});
  std::vector<std::string> want_names;
  for (auto& c : cols) want_names.push_back(c.name);
  const auto names = split_names(read_str(f, "fields", path));
  if (names != want_names)
    throw Error(fmt::format("replay dump '{}' holds datasets [{}], this run's layout needs [{}]", path,
                            fmt::join(names, ","), fmt::join(want_names, ",")));
  for (size_t i = 0; i < cols.size(); ++i) {
    auto& c = cols[i];
    const std::string full = "items/" + c.name;
    hid_t did = H5Dopen2(f, full.c_str(), H5P_DEFAULT);
    if (did < 0) throw Error(fmt::format("replay dump '{}' lacks dataset /{}", path, full));
    c.ds = Handle(did, H5Dclose);
    Handle t(MPIRL_H5(H5Dget_type(c.ds), "H5Dget_type /" + full), H5Tclose);
    Handle sp(MPIRL_H5(H5Dget_space(c.ds), "H5Dget_space /" + full), H5Sclose);
    int rank = MPIRL_H5(H5Sget_simple_extent_ndims(sp), "dimensions of /" + full);
    std::vector<hsize_t> dims(static_cast<size_t>(rank));
    MPIRL_H5(H5Sget_simple_extent_dims(sp, dims.data(), nullptr), "dimensions of /" + full);
    std::vector<int64_t> got(dims.begin(), dims.end()), want{n};
    want.insert(want.end(), c.shape.begin(), c.shape.end());
    wire::DType d{};
    if (!dtype_of(t, &d) || d != c.dtype || got != want)
      throw Error(fmt::format("replay dump '{}': dataset {} '{}' is {} [{}], this run needs {} [{}]", path, i, c.name,
                              dtype_of(t, &d) ? wire::dtype_name(d) : "of an unsupported type", fmt::join(got, ","),
                              wire::dtype_name(c.dtype), fmt::join(want, ",")));
  }

  // Pass 1: the checksum over every dataset in order, block by block (no copy of the whole
  // file), and the bookkeeping's sanity. Nothing is inserted unless it all checks out.
  uint32_t crc = uint32_t(::crc32(0L, Z_NULL, 0));
  std::vector<char> buf;
  int64_t last_seq = -1;
  std::string invalid;  // the first bad bookkeeping value, reported after the checksum
  for (size_t i = 0; i < cols.size(); ++i) {
    const auto& c = cols[i];
    const int64_t block = std::clamp<int64_t>(int64_t(opts.io_bytes / std::max<size_t>(c.item_bytes, 1)), 1, std::max<int64_t>(n, 1));
    buf.resize(size_t(std::min(block, n)) * c.item_bytes);
    for (int64_t k0 = 0; k0 < n; k0 += block) {
      const int64_t rows = std::min(block, n - k0);
      read_rows(c.ds, c.dtype, k0, rows, c.shape, buf.data(), c.name, path);
      crc = crc32_update(crc, buf.data(), size_t(rows) * c.item_bytes);
      if (i < nf) continue;
      // The bookkeeping must be what a buffer can hold: priorities finite and >= 0, counts >= 0,
      // insertion numbers increasing (checked here, not halfway through the inserts).
      for (int64_t k = 0; k < rows && invalid.empty(); ++k) {
        double p;
        int64_t x;
        std::memcpy(&p, buf.data() + size_t(k) * 8, 8);
        std::memcpy(&x, buf.data() + size_t(k) * 8, 8);
        const bool ok = i == nf ? std::isfinite(p) && p >= 0 : i == nf + 1 ? x >= 0 : x > last_seq;
        if (!ok)
          invalid = fmt::format("replay dump '{}': item {} has an invalid {} ({})", path, k0 + k, c.name,
                                i == nf ? fmt::format("{}", p) : fmt::format("{}", x));
        if (i == nf + 2) last_seq = x;
      }
    }
  }
  if (crc != h.checksum)
    throw Error(fmt::format("replay dump '{}' is corrupt: its data gives CRC-32 {:08x}, the file says {:08x}", path, crc,
                            h.checksum));
  if (!invalid.empty()) throw Error(invalid);

  // Pass 2: blocks of items across all datasets, laid out as a payload of `rows` sequences, then
  // inserted one by one. Only the oldest chunk is left part-filled (begin_restore).
  size_t per_item = 24;
  for (const auto& fl : layout.fields()) per_item += fl.bytes;
  const int64_t block = std::clamp<int64_t>(int64_t(opts.io_bytes / per_item), 1, std::max<int64_t>(n, 1));
  std::vector<char> payload(layout.field_offset(nf, std::min(block, n)));
  std::vector<double> prio(size_t(std::min(block, n)));
  std::vector<int64_t> times(prio.size()), seqs(prio.size());
  rb.begin_restore(n);
  for (int64_t k0 = 0; k0 < n; k0 += block) {
    const int64_t rows = std::min(block, n - k0);
    for (size_t i = 0; i < nf; ++i)
      read_rows(cols[i].ds, cols[i].dtype, k0, rows, cols[i].shape, payload.data() + layout.field_offset(i, rows),
                cols[i].name, path);
    read_rows(cols[nf].ds, cols[nf].dtype, k0, rows, {}, prio.data(), cols[nf].name, path);
    read_rows(cols[nf + 1].ds, cols[nf + 1].dtype, k0, rows, {}, times.data(), cols[nf + 1].name, path);
    read_rows(cols[nf + 2].ds, cols[nf + 2].dtype, k0, rows, {}, seqs.data(), cols[nf + 2].name, path);
    for (int64_t k = 0; k < rows; ++k) {
      ItemMeta m;
      m.priority = prio[size_t(k)];
      m.times_sampled = times[size_t(k)];
      m.insert_seq = seqs[size_t(k)];
      rb.insert_restored(payload.data(), rows, k, m);
    }
  }
  return h;
}

}  // namespace mpirl::buffer
