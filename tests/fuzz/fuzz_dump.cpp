// libFuzzer target: mutated replay dumps through what reads one from a user's path -- `mpirl replay
// inspect FILE` and replay.restore = FILE (header, compatibility check, the checksum pass and the
// insert pass) -- into a buffer of a CartPole layout. Each may report the file as wrong (a non-zero
// exit, mpirl::Error); nothing may crash, read out of bounds or allocate what the file claims.
//
// The input is a program of edits applied through the HDF5 API to a real dump (6 CartPole
// sequences, T = 4): attributes set to any value, deleted or given a string or array of any
// length; datasets replaced by one of any dtype and any dims (chunked, nothing written: a file of a
// few KB can claim 2^40 rows), deleted, or their bytes flipped. So every file is valid HDF5 and the
// fuzzer spends its time on mpirl's checks of what the file says. Byte-level mutation of the file
// itself mostly finds libhdf5's own bugs, which mpirl cannot fix (the closing note of issue 33 names
// the two it found); a checkpoint's replay.h5 never reaches HDF5 damaged: COMPLETE holds its CRC and
// ckpt::verify checks it before a resume (fuzz_checkpoint).
#include <fcntl.h>
#include <hdf5.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "buffer/hdf5_dump.h"
#include "buffer/hdf5_io.h"
#include "buffer/replay.h"
#include "buffer/replay_buffer.h"
#include "comm/seq_layout.h"
#include "core/error.h"
#include "tests/fuzz/fuzz_specs.h"

using namespace mpirl;
using namespace mpirl::buffer;

namespace {

const char* const kIntAttrs[] = {"schema_version", "rollout_len", "state_size", "capacity",     "items",
                                 "checksum_crc32", "complete",    "inserted",   "evicted",      "consumed",
                                 "sampled",        "batches",     "priority_updates", "stale_priority_updates",
                                 "next_insert_seq"};
const char* const kStrAttrs[] = {"env_id", "obs_dtype", "selector", "config", "fields"};
const char* const kDatasets[] = {"obs",    "is_init", "action",   "reward",        "terminated", "truncated",
                                 "logp",   "boot_obs", "priority", "times_sampled", "insert_seq", "version",
                                 "actor",  "state"};
const wire::DType kDTypes[] = {wire::DType::F32, wire::DType::F64, wire::DType::I32, wire::DType::I64, wire::DType::U8};

struct Reader {  // the program's bytes, read past the end as zeros
  const uint8_t* p;
  size_t n, at = 0;
  bool done() const { return at >= n; }
  uint8_t u8() { return at < n ? p[at++] : 0; }
  int64_t i64() {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= uint64_t(u8()) << (8 * i);
    return int64_t(v);
  }
  template <size_t N>
  const char* pick(const char* const (&names)[N]) { return names[u8() % N]; }
};

void drop_attr(hid_t f, const char* name) {
  if (H5Aexists(f, name) > 0) H5Adelete(f, name);
}

void apply(hid_t f, Reader& r, const std::string& path) {
  const hid_t items = H5Gopen2(f, "items", H5P_DEFAULT);
  switch (r.u8() % 7) {
    case 0: {  // an integer attribute set to any value (possibly as a float64)
      const char* name = r.pick(kIntAttrs);
      const int64_t v = r.i64();
      drop_attr(f, name);
      if (r.u8() & 1) attr_f64(f, name, double(v), path);
      else attr_i64(f, name, v, path);
      break;
    }
    case 1: {  // a string attribute of any bytes
      const char* name = r.pick(kStrAttrs);
      std::string s(r.u8(), '\0');
      for (auto& c : s) c = char(r.u8());
      drop_attr(f, name);
      attr_str(f, name, s, path);
      break;
    }
    case 2: {  // obs_shape of any length and values
      std::vector<int64_t> shape(r.u8() % 8);
      for (auto& d : shape) d = r.i64() >> (r.u8() % 64);
      drop_attr(f, "obs_shape");
      if (!shape.empty()) attr_i64_array(f, "obs_shape", shape, path);
      break;
    }
    case 3: {  // an attribute gone
      const uint8_t which = r.u8();
      drop_attr(f, which & 1 ? kIntAttrs[which / 2 % std::size(kIntAttrs)] : kStrAttrs[which / 2 % std::size(kStrAttrs)]);
      break;
    }
    case 4: {  // a dataset replaced by one of any dtype and dims, chunked, nothing written
      const char* name = r.pick(kDatasets);
      const wire::DType d = kDTypes[r.u8() % std::size(kDTypes)];
      std::vector<hsize_t> dims(1 + r.u8() % 4), chunk(dims.size());
      for (size_t i = 0; i < dims.size(); ++i) {
        dims[i] = hsize_t(r.i64()) >> (16 + r.u8() % 48);  // up to 2^48 per dimension
        chunk[i] = dims[i] == 0 ? 1 : std::min<hsize_t>(dims[i], 4);
      }
      if (H5Lexists(items, name, H5P_DEFAULT) > 0) H5Ldelete(items, name, H5P_DEFAULT);
      std::vector<hsize_t> maxd(dims.size(), H5S_UNLIMITED);
      const hid_t space = H5Screate_simple(int(dims.size()), dims.data(), maxd.data());
      const hid_t plist = H5Pcreate(H5P_DATASET_CREATE);
      H5Pset_chunk(plist, int(chunk.size()), chunk.data());
      const hid_t ds = H5Dcreate2(items, name, file_type(d), space, H5P_DEFAULT, plist, H5P_DEFAULT);
      if (ds >= 0) H5Dclose(ds);
      H5Pclose(plist);
      H5Sclose(space);
      break;
    }
    case 5: {  // a dataset gone
      const char* name = r.pick(kDatasets);
      if (H5Lexists(items, name, H5P_DEFAULT) > 0) H5Ldelete(items, name, H5P_DEFAULT);
      break;
    }
    case 6: {  // bytes of a dataset flipped (the checksum's concern)
      const char* name = r.pick(kDatasets);
      if (H5Lexists(items, name, H5P_DEFAULT) <= 0) break;
      const hid_t ds = H5Dopen2(items, name, H5P_DEFAULT);
      const hid_t space = H5Dget_space(ds), type = H5Dget_type(ds);
      const hssize_t n = H5Sget_simple_extent_npoints(space);
      const size_t bytes = size_t(n) * H5Tget_size(type);
      if (n > 0 && bytes <= (size_t(1) << 20)) {
        std::vector<char> buf(bytes);
        if (H5Dread(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()) >= 0) {
          for (int k = 1 + r.u8() % 4; k > 0; --k) buf[size_t(uint32_t(r.i64())) % bytes] ^= char(1 + r.u8() % 255);
          H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data());
        }
      }
      H5Tclose(type);
      H5Sclose(space);
      H5Dclose(ds);
      break;
    }
  }
  if (items >= 0) H5Gclose(items);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const SeqLayout layout(fuzz::cartpole(), 4);
  static const std::string dir = "/tmp/mpirl-fuzz-dump-" + std::to_string(::getpid());
  static const std::string seed = [] {  // the real dump every program starts from, as bytes
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    const int null = ::open("/dev/null", O_WRONLY);  // inspect's report: not onto the fuzzer's terminal
    ::dup2(null, STDOUT_FILENO);
    std::system(("mkdir -p " + dir).c_str());
    ReplayOptions o;
    o.capacity = 16;
    o.selector = "prioritized";
    o.max_times_sampled = 0;
    ReplayBuffer rb(layout, o);
    std::vector<char> p(layout.field_offset(layout.fields().size(), 6));
    for (size_t i = 0; i < p.size(); ++i) p[i] = char(i * 13 + 1);
    for (int i = 0; i < 6; ++i) rb.insert(p.data(), 6, i, 0.5 + i);
    dump_replay(rb, dir + "/seed.h5", "CartPole-v1", "[run]\nseed = 1\n");
    std::ifstream in(dir + "/seed.h5", std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), {});
  }();
  const std::string path = dir + "/input.h5";
  std::ofstream(path, std::ios::binary | std::ios::trunc) << seed;
  {
    const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    if (f < 0) __builtin_trap();  // the seed itself must open
    Reader r{data, size};
    for (int ops = 0; !r.done() && ops < 16; ++ops) {
      try {
        apply(f, r, path);
      } catch (const Error&) {  // an edit HDF5 refused: the file is what the edits before made it
      }
    }
    H5Fclose(f);
  }
  replay_inspect_main(path);
  try {
    const auto h = read_dump_header(path);
    check_dump_compatible(h, path, layout, "CartPole-v1", 16);
    ReplayOptions o;
    o.capacity = 16;
    o.selector = "prioritized";
    o.max_times_sampled = 0;
    ReplayBuffer rb(layout, o);
    DumpOptions d;
    d.io_bytes = 512;  // several blocks per pass
    restore_replay(rb, path, "CartPole-v1", d);
  } catch (const Error&) {
  }
  return 0;
}
