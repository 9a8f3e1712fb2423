#include "buffer/hdf5_dump.h"

#include <fcntl.h>
#include <hdf5.h>
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "runtime/error.h"
#include "runtime/run_dir.h"

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
  ~Handle() {
    if (id >= 0 && close) close(id);
  }
  operator hid_t() const { return id; }
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
  Handle t(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(t, H5T_VARIABLE);
  H5Tset_cset(t, H5T_CSET_UTF8);
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
  Handle t(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(t, H5T_VARIABLE);
  H5Tset_cset(t, H5T_CSET_UTF8);
  char* p = nullptr;
  MPIRL_H5(H5Aread(a, t, &p), std::string("read attribute ") + name);
  std::string s = p ? p : "";
  H5free_memory(p);
  return s;
}

std::vector<int64_t> read_i64_array(hid_t loc, const char* name, const std::string& path) {
  Handle a(MPIRL_H5(H5Aopen(loc, name, H5P_DEFAULT), std::string("open attribute ") + name), H5Aclose);
  Handle sp(H5Aget_space(a), H5Sclose);
  hssize_t n = H5Sget_simple_extent_npoints(sp);
  std::vector<int64_t> v(size_t(std::max<hssize_t>(n, 0)));
  if (!v.empty()) MPIRL_H5(H5Aread(a, H5T_NATIVE_INT64, v.data()), std::string("read attribute ") + name);
  return v;
}

// Writes one [n, shape...] dataset, chunked along items (about 1 MiB per chunk).
void write_dataset(hid_t group, const std::string& name, wire::DType d, int64_t n, const std::vector<int64_t>& shape,
                   const void* data, const std::string& path) {
  std::vector<hsize_t> dims{hsize_t(n)}, maxdims{H5S_UNLIMITED}, chunk;
  size_t item_bytes = wire::dtype_size(d);
  for (auto s : shape) {
    dims.push_back(hsize_t(s));
    maxdims.push_back(hsize_t(s));
    item_bytes *= size_t(s);
  }
  chunk = dims;
  chunk[0] = hsize_t(std::clamp<int64_t>(int64_t((1 << 20) / std::max<size_t>(item_bytes, 1)), 1, std::max<int64_t>(n, 1)));
  for (size_t i = 1; i < chunk.size(); ++i) chunk[i] = std::max<hsize_t>(chunk[i], 1);
  Handle sp(MPIRL_H5(H5Screate_simple(int(dims.size()), dims.data(), maxdims.data()), "H5Screate_simple"), H5Sclose);
  Handle plist(MPIRL_H5(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate"), H5Pclose);
  MPIRL_H5(H5Pset_chunk(plist, int(chunk.size()), chunk.data()), "H5Pset_chunk " + name);
  Handle ds(MPIRL_H5(H5Dcreate2(group, name.c_str(), file_type(d), sp, H5P_DEFAULT, plist, H5P_DEFAULT), "create dataset " + name),
            H5Dclose);
  if (n > 0) MPIRL_H5(H5Dwrite(ds, mem_type(d), H5S_ALL, H5S_ALL, H5P_DEFAULT, data), "write dataset " + name);
}

void fsync_path(const std::string& p, bool dir) {
  int fd = ::open(p.c_str(), dir ? O_RDONLY | O_DIRECTORY : O_RDONLY);
  if (fd < 0) throw Error(fmt::format("cannot open '{}' to fsync: {}", p, std::strerror(errno)));
  int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) throw Error(fmt::format("fsync of '{}' failed: {}", p, std::strerror(errno)));
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
  const auto* p = static_cast<const Bytef*>(data);
  while (n > 0) {
    uInt chunk = uInt(std::min<size_t>(n, 1u << 30));
    crc = uint32_t(::crc32(crc, p, chunk));
    p += chunk;
    n -= chunk;
  }
  return crc;
}

DumpInfo dump_replay(const ReplayBuffer& rb, const std::string& path, const std::string& env_id, const std::string& config) {
  quiet_hdf5();
  auto t0 = std::chrono::steady_clock::now();
  const auto& layout = rb.layout();
  auto parent = fs::path(path).parent_path();
  if (!parent.empty()) fs::create_directories(parent);
  const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  const auto slots = rb.slots_in_order();
  const int64_t n = int64_t(slots.size());
  uint32_t crc = uint32_t(::crc32(0L, Z_NULL, 0));
  int64_t bytes = 0;
  {
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
    std::vector<char> buf;
    for (size_t fi = 0; fi < layout.fields().size(); ++fi) {
      const auto& fl = layout.fields()[fi];
      buf.resize(fl.bytes * size_t(n));
      for (int64_t k = 0; k < n; ++k)
        std::memcpy(buf.data() + size_t(k) * fl.bytes, rb.item_field(slots[size_t(k)], fi), fl.bytes);
      crc = crc32_update(crc, buf.data(), buf.size());
      bytes += int64_t(buf.size());
      write_dataset(g, fl.name, fl.dtype, n, fl.shape, buf.data(), path);
      test_delay();
    }
    std::vector<double> prio(static_cast<size_t>(n));
    std::vector<int64_t> times(static_cast<size_t>(n)), seqs(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) {
      const auto& m = rb.meta(slots[size_t(k)]);
      prio[size_t(k)] = m.priority;
      times[size_t(k)] = m.times_sampled;
      seqs[size_t(k)] = m.insert_seq;
    }
    crc = crc32_update(crc, prio.data(), prio.size() * 8);
    crc = crc32_update(crc, times.data(), times.size() * 8);
    crc = crc32_update(crc, seqs.data(), seqs.size() * 8);
    bytes += n * 24;
    write_dataset(g, "priority", wire::DType::F64, n, {}, prio.data(), path);
    write_dataset(g, "times_sampled", wire::DType::I64, n, {}, times.data(), path);
    write_dataset(g, "insert_seq", wire::DType::I64, n, {}, seqs.data(), path);
    attr_i64(f, "items", n, path);
    attr_i64(f, "checksum_crc32", int64_t(crc), path);
    attr_i64(f, "complete", 1, path);  // last: a file without it was never finished
    MPIRL_H5(H5Fflush(f, H5F_SCOPE_GLOBAL), "flush " + tmp);
  }
  fsync_path(tmp, false);
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    throw Error(fmt::format("cannot rename '{}' to '{}': {}", tmp, path, std::strerror(errno)));
  fsync_path(parent.empty() ? "." : parent.string(), true);
  DumpInfo info;
  info.path = path;
  info.items = n;
  info.checksum = crc;
  info.bytes = bytes;
  write_json_atomic(path + ".complete", {{"items", n}, {"checksum_crc32", crc}, {"bytes", bytes}});
  info.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return info;
}

DumpHeader read_dump_header(const std::string& path) {
  quiet_hdf5();
  if (!fs::exists(path)) throw Error(fmt::format("replay dump '{}' does not exist", path));
  if (H5Fis_hdf5(path.c_str()) <= 0) throw Error(fmt::format("replay dump '{}' is not an HDF5 file", path));
  hid_t fid = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (fid < 0) throw Error(fmt::format("replay dump '{}' cannot be opened as HDF5 (truncated or corrupt file)", path));
  Handle f(fid, H5Fclose);
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
  quiet_hdf5();
  read_dump_header(path);  // existence, format, schema, completeness
  Handle f(MPIRL_H5(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), "open"), H5Fclose);
  std::string names = read_str(f, "fields", path);
  std::vector<DumpArray> out;
  uint32_t crc = uint32_t(::crc32(0L, Z_NULL, 0));
  size_t p = 0;
  while (p <= names.size()) {
    size_t q = names.find(',', p);
    std::string name = names.substr(p, q == std::string::npos ? std::string::npos : q - p);
    p = q == std::string::npos ? names.size() + 1 : q + 1;
    if (name.empty()) continue;
    std::string full = "items/" + name;
    hid_t did = H5Dopen2(f, full.c_str(), H5P_DEFAULT);
    if (did < 0) throw Error(fmt::format("replay dump '{}' lacks dataset /{}", path, full));
    Handle ds(did, H5Dclose);
    Handle t(H5Dget_type(ds), H5Tclose);
    DumpArray a;
    a.name = name;
    if (!dtype_of(t, &a.dtype)) throw Error(fmt::format("replay dump '{}': dataset /{} has an unsupported type", path, full));
    Handle sp(H5Dget_space(ds), H5Sclose);
    int rank = H5Sget_simple_extent_ndims(sp);
    std::vector<hsize_t> dims(size_t(std::max(rank, 0)));
    H5Sget_simple_extent_dims(sp, dims.data(), nullptr);
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

DumpHeader restore_replay(ReplayBuffer& rb, const std::string& path, const std::string& env_id) {
  MPIRL_CHECK(rb.size() == 0, "restore into a non-empty replay");
  auto h = read_dump_header(path);
  const auto& layout = rb.layout();
  check_dump_compatible(h, path, layout, env_id, rb.capacity());
  uint32_t crc = 0;
  auto arrays = read_dump_items(path, &crc);
  if (crc != h.checksum)
    throw Error(fmt::format("replay dump '{}' is corrupt: its data gives CRC-32 {:08x}, the file says {:08x}", path, crc,
                            h.checksum));
  const int64_t n = h.items;
  const size_t nf = layout.fields().size();
  if (arrays.size() != nf + 3)
    throw Error(fmt::format("replay dump '{}' has {} datasets, this run's layout needs {}", path, arrays.size(), nf + 3));
  std::vector<char> payload(layout.field_offset(nf, n));
  for (size_t i = 0; i < nf; ++i) {
    const auto& fl = layout.fields()[i];
    std::vector<int64_t> want{n};
    want.insert(want.end(), fl.shape.begin(), fl.shape.end());
    if (arrays[i].name != fl.name || arrays[i].dtype != fl.dtype || arrays[i].shape != want)
      throw Error(fmt::format("replay dump '{}': dataset {} is '{}' {} [{}], this run needs '{}' {} [{}]", path, i,
                              arrays[i].name, wire::dtype_name(arrays[i].dtype), fmt::join(arrays[i].shape, ","),
                              fl.name, wire::dtype_name(fl.dtype), fmt::join(want, ",")));
    std::memcpy(payload.data() + layout.field_offset(i, n), arrays[i].data.data(), arrays[i].data.size());
  }
  auto col = [&](size_t i, const char* name, wire::DType d) {
    if (arrays[i].name != name || arrays[i].dtype != d || arrays[i].shape != std::vector<int64_t>{n})
      throw Error(fmt::format("replay dump '{}': dataset {} should be '{}' {} [{}]", path, i, name, wire::dtype_name(d), n));
    return arrays[i].data.data();
  };
  auto* prio = reinterpret_cast<const double*>(col(nf, "priority", wire::DType::F64));
  auto* times = reinterpret_cast<const int64_t*>(col(nf + 1, "times_sampled", wire::DType::I64));
  auto* seqs = reinterpret_cast<const int64_t*>(col(nf + 2, "insert_seq", wire::DType::I64));
  for (int64_t k = 0; k < n; ++k) {
    ItemMeta m;
    m.priority = prio[k];
    m.times_sampled = times[k];
    m.insert_seq = seqs[k];
    rb.insert_restored(payload.data(), n, k, m);
  }
  return h;
}

}  // namespace mpirl::buffer
