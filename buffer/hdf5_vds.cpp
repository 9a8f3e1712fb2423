#include "buffer/hdf5_vds.h"
#include "buffer/hdf5_io.h"

#include <hdf5.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <numeric>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "core/run_dir.h"

namespace mpirl::buffer {
namespace {

// One dataset of the first shard, "group/name", and what every shard must agree on.
struct Column {
  std::string name;
  Handle type{-1, H5Tclose};  // the first shard's file type
  std::vector<hsize_t> tail;  // trailing shape
  std::vector<hsize_t> rows;  // first dimension, per shard
};

// `p` with its directory resolved (symlinks, "..", the working directory) and its file name kept.
// POSIX, not std::filesystem: LibTorch exports its own, broken, copies of some of it.
std::string resolved(const std::string& p) {
  const size_t slash = p.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : p.substr(0, slash);
  char buf[PATH_MAX];
  if (!::realpath(dir.c_str(), buf))
    throw Error(fmt::format("cannot resolve the directory of '{}': {}", p, std::strerror(errno)));
  const std::string d = buf;
  return (d == "/" ? "" : d) + "/" + p.substr(slash == std::string::npos ? 0 : slash + 1);
}

// H5Pset_virtual reads file and dataset names as printf-like patterns: "%%" is a literal '%'.
std::string literal(const std::string& s) {
  std::string out;
  for (char c : s) out += c == '%' ? std::string("%%") : std::string(1, c);
  return out;
}

std::string shape_text(hid_t t, const std::vector<hsize_t>& tail) {
  wire::DType d{};
  std::string s = dtype_of(t, &d) ? wire::dtype_name(d) : "an unsupported type";
  s += " [n";
  for (auto x : tail) s += fmt::format(", {}", x);
  return s + "]";
}

// The hard links in `loc` to objects of `type` (H5I_GROUP, H5I_DATASET), by name.
std::vector<std::string> members(hid_t loc, H5I_type_t type, const std::string& path) {
  std::vector<std::string> links, out;
  H5L_iterate_t add = [](hid_t, const char* name, const H5L_info_t* info, void* op) -> herr_t {
    if (info->type == H5L_TYPE_HARD) static_cast<std::vector<std::string>*>(op)->push_back(name);
    return 0;
  };
  hsize_t idx = 0;
  MPIRL_H5(H5Literate(loc, H5_INDEX_NAME, H5_ITER_INC, &idx, add, &links), "list the members of a group");
  for (const auto& n : links) {
    Handle o(MPIRL_H5(H5Oopen(loc, n.c_str(), H5P_DEFAULT), "open " + n), H5Oclose);
    if (H5Iget_type(o) == type) out.push_back(n);
  }
  return out;
}

void attr_str_array(hid_t loc, const char* name, const std::vector<std::string>& v, const std::string& path) {
  Handle t(MPIRL_H5(H5Tcopy(H5T_C_S1), "H5Tcopy"), H5Tclose);
  MPIRL_H5(H5Tset_size(t, H5T_VARIABLE), "H5Tset_size");
  MPIRL_H5(H5Tset_cset(t, H5T_CSET_UTF8), "H5Tset_cset");
  hsize_t n = v.size();
  Handle sp(MPIRL_H5(H5Screate_simple(1, &n, nullptr), "H5Screate_simple"), H5Sclose);
  Handle a(MPIRL_H5(H5Acreate2(loc, name, t, sp, H5P_DEFAULT, H5P_DEFAULT), std::string("create attribute ") + name), H5Aclose);
  std::vector<const char*> p;
  for (const auto& s : v) p.push_back(s.c_str());
  MPIRL_H5(H5Awrite(a, t, p.data()), std::string("write attribute ") + name);
}

// Dataset `leaf` of `group`: the shards' rows one after the other, each mapped whole.
void write_virtual(hid_t group, const std::string& leaf, const Column& c, const std::vector<std::string>& files,
                   const std::string& path) {
  std::vector<hsize_t> dims{0};
  for (auto r : c.rows) dims[0] += r;
  dims.insert(dims.end(), c.tail.begin(), c.tail.end());
  const int rank = int(dims.size());
  Handle vsp(MPIRL_H5(H5Screate_simple(rank, dims.data(), nullptr), "H5Screate_simple"), H5Sclose);
  Handle dcpl(MPIRL_H5(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate"), H5Pclose);
  // A mapping cannot select nothing: a dataset with no elements is a plain empty one.
  const bool empty = std::count(dims.begin(), dims.end(), hsize_t(0)) > 0;
  std::vector<hsize_t> start(dims.size(), 0), count = dims;
  for (size_t k = 0; k < files.size() && !empty; ++k) {
    if (c.rows[k] > 0) {
      count[0] = c.rows[k];
      MPIRL_H5(H5Sselect_hyperslab(vsp, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr), "select rows of /" + c.name);
      // The source: all of the shard's dataset (H5Pset_virtual takes no H5S_ALL).
      Handle src(MPIRL_H5(H5Screate_simple(rank, count.data(), nullptr), "H5Screate_simple"), H5Sclose);
      MPIRL_H5(H5Pset_virtual(dcpl, vsp, literal(files[k]).c_str(), literal("/" + c.name).c_str(), src),
               fmt::format("H5Pset_virtual /{} <- '{}'", c.name, files[k]));
    }
    start[0] += c.rows[k];
  }
  if (!empty) MPIRL_H5(H5Sselect_all(vsp), "H5Sselect_all");
  Handle ds(MPIRL_H5(H5Dcreate2(group, leaf.c_str(), c.type, vsp, H5P_DEFAULT, dcpl, H5P_DEFAULT), "create dataset /" + c.name),
            H5Dclose);
  ds.close_checked("close of dataset /" + c.name, path);
}

}  // namespace

void write_replay_vds(const std::string& out_path, const std::vector<std::string>& shard_paths) {
  quiet_hdf5();
  if (shard_paths.empty()) throw Error(fmt::format("replay VDS '{}': no shard dumps given", out_path));
  const std::string out_abs = resolved(out_path);
  const std::string out_dir = out_abs.substr(0, std::max<size_t>(out_abs.rfind('/'), 1));
  std::vector<DumpHeader> heads;
  std::vector<std::string> files;  // as the mappings store them
  std::vector<Column> cols;
  std::string obs_dtype, fields;
  for (size_t k = 0; k < shard_paths.size(); ++k) {
    const std::string& path = shard_paths[k];
    try {
      heads.push_back(read_dump_header(path));  // exists, HDF5, this schema, complete
    } catch (const Error& e) {
      throw Error(fmt::format("replay VDS '{}': {}", out_path, e.what()));
    }
    const DumpHeader &h = heads.back(), &h0 = heads[0];
    if (h.env_id != h0.env_id || h.rollout_len != h0.rollout_len || h.state_size != h0.state_size || h.obs_shape != h0.obs_shape)
      throw Error(fmt::format("replay shard '{}' holds env {} rollout_len {} state_size {} obs_shape [{}], the first shard "
                              "'{}' env {} rollout_len {} state_size {} obs_shape [{}]",
                              path, h.env_id, h.rollout_len, h.state_size, fmt::join(h.obs_shape, ","), shard_paths[0],
                              h0.env_id, h0.rollout_len, h0.state_size, fmt::join(h0.obs_shape, ",")));
    const std::string abs = resolved(path);
    if (abs == out_abs) throw Error(fmt::format("replay VDS '{}' would replace its own shard '{}'", out_path, path));
    for (size_t j = 0; j < k; ++j)
      if (resolved(shard_paths[j]) == abs) throw Error(fmt::format("replay VDS '{}': shard '{}' is listed twice", out_path, path));
    // In the view's directory or below it: relative to it (HDF5 resolves it against that directory).
    const std::string below = out_dir == "/" ? "/" : out_dir + "/";
    files.push_back(abs.rfind(below, 0) == 0 ? abs.substr(below.size()) : abs);
    Handle f(MPIRL_H5(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), "open"), H5Fclose);
    if (k == 0) obs_dtype = read_str(f, "obs_dtype", path), fields = read_str(f, "fields", path);
    std::vector<std::string> found, want;
    for (const auto& g : members(f, H5I_GROUP, path)) {
      Handle gh(MPIRL_H5(H5Gopen2(f, g.c_str(), H5P_DEFAULT), "open group /" + g), H5Gclose);
      for (const auto& d : members(gh, H5I_DATASET, path)) found.push_back(g + "/" + d);
    }
    if (k == 0)
      for (const auto& n : found) cols.emplace_back().name = n;
    for (const auto& c : cols) want.push_back(c.name);
    if (found != want)
      throw Error(fmt::format("replay shard '{}' holds datasets [{}], the first shard '{}' [{}]", path,
                              fmt::join(found, ","), shard_paths[0], fmt::join(want, ",")));
    for (auto& c : cols) {
      Handle ds(MPIRL_H5(H5Dopen2(f, c.name.c_str(), H5P_DEFAULT), "open dataset /" + c.name), H5Dclose);
      Handle t(MPIRL_H5(H5Dget_type(ds), "H5Dget_type /" + c.name), H5Tclose);
      Handle sp(MPIRL_H5(H5Dget_space(ds), "H5Dget_space /" + c.name), H5Sclose);
      const int rank = MPIRL_H5(H5Sget_simple_extent_ndims(sp), "dimensions of /" + c.name);
      if (rank < 1) throw Error(fmt::format("replay shard '{}': dataset /{} is a scalar, not [count, ...]", path, c.name));
      std::vector<hsize_t> dims(static_cast<size_t>(rank));
      MPIRL_H5(H5Sget_simple_extent_dims(sp, dims.data(), nullptr), "dimensions of /" + c.name);
      const std::vector<hsize_t> tail(dims.begin() + 1, dims.end());
      if (k == 0) {
        c.type = Handle(MPIRL_H5(H5Tcopy(t), "H5Tcopy"), H5Tclose);
        c.tail = tail;
      } else if (MPIRL_H5(H5Tequal(t, c.type), "H5Tequal /" + c.name) <= 0 || tail != c.tail) {
        throw Error(fmt::format("replay shard '{}': dataset /{} is {}, the first shard '{}' has {}", path, c.name,
                                shape_text(t, tail), shard_paths[0], shape_text(c.type, c.tail)));
      }
      if (c.name.rfind("items/", 0) == 0 && int64_t(dims[0]) != h.items)
        throw Error(fmt::format("replay shard '{}': dataset /{} holds {} items, its header says {}", path, c.name, dims[0], h.items));
      c.rows.push_back(dims[0]);
    }
  }

  const std::string tmp = fmt::format("{}.tmp.{}", out_path, ::getpid());
  try {
    const std::string& path = out_path;
    Handle f(MPIRL_H5(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), "create " + tmp), H5Fclose);
    const DumpHeader& h0 = heads[0];
    attr_i64(f, "schema_version", h0.schema_version, path);
    attr_str(f, "env_id", h0.env_id, path);
    attr_i64(f, "rollout_len", h0.rollout_len, path);
    attr_i64(f, "state_size", h0.state_size, path);
    attr_i64_array(f, "obs_shape", h0.obs_shape, path);
    attr_str(f, "obs_dtype", obs_dtype, path);
    attr_str(f, "selector", h0.selector, path);
    attr_str(f, "config", h0.config, path);
    attr_str(f, "fields", fields, path);
    std::vector<int64_t> items, crcs;
    int64_t capacity = 0;
    for (const auto& h : heads) items.push_back(h.items), crcs.push_back(int64_t(h.checksum)), capacity += h.capacity;
    for (const auto& [name, v0] : h0.counters) {
      if (name == "next_insert_seq") continue;  // each shard numbers its own inserts
      double v = 0;
      for (const auto& h : heads) v = name == "max_priority" ? std::max(v, h.counters.at(name)) : v + h.counters.at(name);
      if (name == "max_priority") attr_f64(f, name.c_str(), v, path);
      else attr_i64(f, name.c_str(), int64_t(v), path);
    }
    attr_i64(f, "items", std::accumulate(items.begin(), items.end(), int64_t(0)), path);
    attr_i64(f, "capacity", capacity, path);
    attr_i64(f, "shards", int64_t(heads.size()), path);
    attr_str_array(f, "shard_files", files, path);
    attr_i64_array(f, "shard_items", items, path);
    attr_i64_array(f, "shard_checksums", crcs, path);
    attr_f64(f, "created_unix",
             std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(), path);
    std::map<std::string, Handle> groups;
    for (const auto& c : cols) {
      const size_t slash = c.name.find('/');
      const std::string g = c.name.substr(0, slash);
      if (!groups.count(g))
        groups.emplace(g, Handle(MPIRL_H5(H5Gcreate2(f, g.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "create group /" + g), H5Gclose));
      write_virtual(groups.at(g), c.name.substr(slash + 1), c, files, path);
    }
    attr_i64(f, "complete", 1, path);  // last
    MPIRL_H5(H5Fflush(f, H5F_SCOPE_GLOBAL), "flush " + tmp);
    for (auto& [g, h] : groups) h.close_checked("close of group /" + g, tmp);
    f.close_checked("close", tmp);
    fsync_path(tmp, false);
    if (std::rename(tmp.c_str(), out_path.c_str()) != 0)
      throw Error(fmt::format("cannot rename '{}' to '{}': {}", tmp, out_path, std::strerror(errno)));
  } catch (const std::exception& e) {
    ::unlink(tmp.c_str());  // the handles are closed by now (scope left)
    if (dynamic_cast<const Error*>(&e)) throw;
    throw Error(fmt::format("replay VDS '{}' failed: {}", out_path, e.what()));
  }
  fsync_path(out_dir, true);
}

}  // namespace mpirl::buffer
