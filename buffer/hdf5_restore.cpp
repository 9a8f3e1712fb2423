#include "buffer/hdf5_dump.h"
#include "buffer/hdf5_io.h"

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

// Reading dumps back: header, compatibility, inspect, restore.
namespace mpirl::buffer {
namespace fs = std::filesystem;

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
  // The view learner 0 writes over replay shards' dumps (buffer/hdf5_vds.h) is no dump of its own.
  if (has_attr(f, "shards") && !has_attr(f, "checksum_crc32"))
    throw Error(fmt::format("'{}' is a view over the dumps of {} replay shards (HDF5 virtual datasets that h5py reads "
                            "as one replay); inspect or restore the shard files, <name>.shard<k>.h5, one by one",
                            path, read_i64(f, "shards", path)));
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
  struct stat st {};
  ::stat(path.c_str(), &st);
  // Dumps are written uncompressed: no dataset holds more bytes than the file (a dataset whose
  // dimensions were raised in a damaged or hostile file would otherwise be allocated whole).
  const double file_bytes = double(st.st_size);
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
    double declared = double(wire::dtype_size(a.dtype));
    for (auto d : dims) {
      a.shape.push_back(int64_t(d));
      count *= size_t(d);
      declared *= double(d);
    }
    if (declared > file_bytes)
      throw Error(fmt::format("replay dump '{}': dataset /{} declares {:.0f} bytes, more than the {:.0f}-byte file holds "
                              "(a damaged file)",
                              path, full, declared, file_bytes));
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
      if (opts.on_block) opts.on_block();
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
    test_io_delay();
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
    if (opts.on_block) opts.on_block();
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
