#include "buffer/hdf5_io.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "core/test_hooks.h"

namespace mpirl::buffer {

void quiet_hdf5() {
  static const bool once = [] {
    // No clean-up at exit: a dump that failed on a full disk leaves a file HDF5 could not flush,
    // and libhdf5 1.10's exit handler closes it again and crashes (SIGSEGV in H5F__close_cb): a
    // replay that stopped cleanly then ended the job with a signal. Must precede every other call.
    H5dont_atexit();
    return true;
  }();
  (void)once;
  // Every call, not once: a thread-safe libhdf5 keeps this per thread, and dumps run on the
  // replay's I/O thread (buffer/io_job.h).
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

void test_io_delay() {
  static const int ms = [] {
    const char* e = test_hook("MPIRL_TEST_DUMP_DELAY_MS");
    return e ? std::atoi(e) : 0;
  }();
  if (ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
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

Handle select_rows(hid_t space, int64_t k0, int64_t rows, const std::vector<int64_t>& shape, const std::string& path) {
  std::vector<hsize_t> start(shape.size() + 1, 0), count{hsize_t(rows)};
  start[0] = hsize_t(k0);
  for (auto x : shape) count.push_back(hsize_t(x));
  MPIRL_H5(H5Sselect_hyperslab(space, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr), "select items");
  return Handle(MPIRL_H5(H5Screate_simple(int(count.size()), count.data(), nullptr), "H5Screate_simple"), H5Sclose);
}

void read_rows(hid_t ds, wire::DType d, int64_t k0, int64_t rows, const std::vector<int64_t>& shape, void* dst,
               const std::string& name, const std::string& path) {
  Handle fsp(MPIRL_H5(H5Dget_space(ds), "H5Dget_space " + name), H5Sclose);
  Handle mem = select_rows(fsp, k0, rows, shape, path);
  MPIRL_H5(H5Dread(ds, mem_type(d), mem, fsp, H5P_DEFAULT, dst), "read /items/" + name);
}

}  // namespace mpirl::buffer
