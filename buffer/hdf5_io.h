#pragma once
// HDF5 helpers of the replay dumps (buffer-internal): checked calls, handles that close
// themselves, attributes, and datasets of [items, ...] written and read in bounded blocks.
#include <hdf5.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "buffer/hdf5_dump.h"
#include "comm/wire.h"
#include "core/error.h"

namespace mpirl::buffer {

// ": <strerror(errno)>" when the failing call set errno (a full disk: "No space left on device").
inline std::string errno_suffix() { return errno ? std::string(": ") + std::strerror(errno) : std::string(); }

// Every HDF5 call is checked; errors name the file, errno's text when set, and the call site.
#define MPIRL_H5(expr, what)                                                                              \
  [&] {                                                                                                   \
    errno = 0;                                                                                            \
    auto _r = (expr);                                                                                     \
    if (_r < 0)                                                                                           \
      throw Error(fmt::format("HDF5 {} failed for '{}'{} ({}:{})", what, path, errno_suffix(), __FILE__,  \
                              __LINE__));                                                                 \
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
    errno = 0;
    if (i >= 0 && close && close(i) < 0)
      throw Error(fmt::format("HDF5 {} failed for '{}'{}", what, file, errno_suffix()));
  }
};

void quiet_hdf5();
// Test hook MPIRL_TEST_DUMP_DELAY_MS: a slow disk. Sleeps that long after each dataset a dump
// writes or a restore's first pass reads (0 = no delay).
void test_io_delay();
hid_t mem_type(wire::DType d);
hid_t file_type(wire::DType d);
bool dtype_of(hid_t t, wire::DType* out);
void attr_i64(hid_t loc, const char* name, int64_t v, const std::string& path);
void attr_f64(hid_t loc, const char* name, double v, const std::string& path);
void attr_str(hid_t loc, const char* name, const std::string& v, const std::string& path);
void attr_i64_array(hid_t loc, const char* name, const std::vector<int64_t>& v, const std::string& path);
bool has_attr(hid_t loc, const char* name);
int64_t read_i64(hid_t loc, const char* name, const std::string& path);
double read_f64(hid_t loc, const char* name, const std::string& path);
std::string read_str(hid_t loc, const char* name, const std::string& path);
std::vector<int64_t> read_i64_array(hid_t loc, const char* name, const std::string& path);
size_t item_bytes_of(wire::DType d, const std::vector<int64_t>& shape);
// Selects items [k0, k0 + rows) of a [n, shape...] dataspace; returns the matching memory space.
Handle select_rows(hid_t space, int64_t k0, int64_t rows, const std::vector<int64_t>& shape, const std::string& path);
// Reads items [k0, k0 + rows) of a [n, shape...] dataset into dst.
void read_rows(hid_t ds, wire::DType d, int64_t k0, int64_t rows, const std::vector<int64_t>& shape, void* dst,
               const std::string& name, const std::string& path);

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
  // Pixels (uint8 items of a KiB or more) compress several-fold and cheaply with zlib level 1;
  // floats barely compress and would only cost time.
  if (d == wire::DType::U8 && item_bytes >= 1024 && H5Zfilter_avail(H5Z_FILTER_DEFLATE) > 0)
    MPIRL_H5(H5Pset_deflate(plist, 1), "H5Pset_deflate " + name);
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

}  // namespace mpirl::buffer
