// buffer/hdf5_vds.h: the dumps of two replay shards of different sizes, read back through the
// view's virtual datasets with the plain HDF5 C API, element by element, also after the run
// directory moved; a missing or disagreeing shard is an error naming it. Torch-free.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "buffer/hdf5_dump.h"
#include "buffer/hdf5_vds.h"
#include "buffer/replay_buffer.h"
#include "comm/seq_layout.h"
#include "core/error.h"
#include "tests/fuzz/fuzz_specs.h"

using namespace mpirl;
using namespace mpirl::buffer;

namespace {

// A buffer of n items whose every byte is non-zero (a source HDF5 cannot find reads as 0) and
// depends on the shard, the item, the field and the byte's position.
void fill(ReplayBuffer& rb, int64_t n, int shard) {
  const auto& l = rb.layout();
  std::vector<char> p(l.field_offset(l.fields().size(), n));
  for (size_t f = 0; f < l.fields().size(); ++f)
    for (int64_t i = 0; i < n; ++i)
      for (size_t b = 0; b < l.fields()[f].bytes; ++b)
        p[l.field_offset(f, n) + size_t(i) * l.fields()[f].bytes + b] = char(1 + (shard * 97 + i * 13 + f * 7 + b) % 251);
  for (int64_t i = 0; i < n; ++i) rb.insert(p.data(), n, i, 0.25 + double(shard * 10 + i));
}

struct Raw {  // a dataset read whole in its file type's native form
  std::vector<hsize_t> dims;
  size_t elem = 0;
  std::vector<char> bytes;
};

Raw read_raw(const std::string& file, const std::string& name) {
  Raw r;
  hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  EXPECT_GE(f, 0) << file;
  hid_t ds = H5Dopen2(f, name.c_str(), H5P_DEFAULT);
  EXPECT_GE(ds, 0) << file << " " << name;
  hid_t ft = H5Dget_type(ds), mt = H5Tget_native_type(ft, H5T_DIR_ASCEND), sp = H5Dget_space(ds);
  r.dims.resize(size_t(H5Sget_simple_extent_ndims(sp)));
  H5Sget_simple_extent_dims(sp, r.dims.data(), nullptr);
  r.elem = H5Tget_size(mt);
  r.bytes.resize(size_t(H5Sget_simple_extent_npoints(sp)) * r.elem);
  if (!r.bytes.empty()) {
    EXPECT_GE(H5Dread(ds, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, r.bytes.data()), 0) << name;
  }
  H5Sclose(sp), H5Tclose(mt), H5Tclose(ft), H5Dclose(ds), H5Fclose(f);
  return r;
}

std::vector<int64_t> root_i64(const std::string& file, const char* name) {
  hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t a = H5Aopen(f, name, H5P_DEFAULT), sp = H5Aget_space(a);
  std::vector<int64_t> v(size_t(H5Sget_simple_extent_npoints(sp)));
  EXPECT_GE(H5Aread(a, H5T_NATIVE_INT64, v.data()), 0) << name;
  H5Sclose(sp), H5Aclose(a), H5Fclose(f);
  return v;
}

// The source file name of mapping `index` of dataset `name` in the view.
std::string source_file(const std::string& file, const std::string& name, size_t index) {
  hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), ds = H5Dopen2(f, name.c_str(), H5P_DEFAULT);
  hid_t dcpl = H5Dget_create_plist(ds);
  size_t count = 0;
  H5Pget_virtual_count(dcpl, &count);
  std::string out = "<no mapping>";
  if (index < count) {
    char buf[4096] = {};
    H5Pget_virtual_filename(dcpl, index, buf, sizeof buf);
    out = buf;
  }
  H5Pclose(dcpl), H5Dclose(ds), H5Fclose(f);
  return out;
}

class VdsTest : public ::testing::Test {
 protected:
  std::string base = (std::filesystem::temp_directory_path() / ("mpirl-vds-" + std::to_string(::getpid()))).string();
  std::string dir = base + "/run";
  void SetUp() override { std::filesystem::create_directories(dir); }
  // (std::system, not std::filesystem::remove_all: LibTorch exports a broken one)
  void TearDown() override { (void)std::system(("rm -rf '" + base + "'").c_str()); }
};

}  // namespace

TEST_F(VdsTest, VirtualDatasetsConcatenateTheShardsElementByElement) {
  SeqLayout l(fuzz::cartpole(), 3, 2);  // with boot fields and a recurrent state
  ReplayOptions o;
  o.capacity = 8;
  o.selector = "uniform";
  o.max_times_sampled = 0;
  ReplayBuffer a(l, o), b(l, o);
  fill(a, 5, 0);
  fill(b, 3, 1);
  const std::string s0 = dir + "/replay_shard0.h5", s1 = dir + "/replay_shard1.h5", vds = dir + "/replay.h5";
  dump_replay(a, s0, "CartPole-v1", "x = 1");
  dump_replay(b, s1, "CartPole-v1", "x = 1");
  write_replay_vds(vds, {s0, s1});
  EXPECT_FALSE(std::filesystem::exists(vds + ".complete"));  // not a dump

  std::vector<std::string> names;
  for (const auto& arr : read_dump_items(s0, nullptr)) names.push_back("items/" + arr.name);
  ASSERT_EQ(names.size(), l.fields().size() + 3);
  auto check = [&](const std::string& run) {
    for (const auto& name : names) {
      const Raw r0 = read_raw(run + "/replay_shard0.h5", name), r1 = read_raw(run + "/replay_shard1.h5", name),
                v = read_raw(run + "/replay.h5", name);
      ASSERT_EQ(r0.dims[0], 5u) << name;
      ASSERT_EQ(r1.dims[0], 3u) << name;
      std::vector<hsize_t> want = r0.dims;
      want[0] = 8;
      ASSERT_EQ(v.dims, want) << name;
      ASSERT_EQ(v.elem, r0.elem) << name;
      std::vector<char> cat = r0.bytes;
      cat.insert(cat.end(), r1.bytes.begin(), r1.bytes.end());
      ASSERT_EQ(v.bytes.size(), cat.size()) << name;
      for (size_t e = 0; e < cat.size() / v.elem; ++e)
        ASSERT_EQ(std::memcmp(v.bytes.data() + e * v.elem, cat.data() + e * v.elem, v.elem), 0)
            << name << " in " << run << ": element " << e << " of " << cat.size() / v.elem;
    }
  };
  check(dir);
  EXPECT_EQ(root_i64(vds, "items"), std::vector<int64_t>{8});
  EXPECT_EQ(root_i64(vds, "shards"), std::vector<int64_t>{2});
  EXPECT_EQ(root_i64(vds, "shard_items"), (std::vector<int64_t>{5, 3}));
  EXPECT_EQ(root_i64(vds, "rollout_len"), std::vector<int64_t>{3});
  // Stored relative to the view's directory, so the run directory can move.
  EXPECT_EQ(source_file(vds, "items/obs", 0), "replay_shard0.h5");
  EXPECT_EQ(source_file(vds, "items/obs", 1), "replay_shard1.h5");
  // The dump readers (inspect, restore) refuse the view by name instead of a missing attribute.
  try {
    read_dump_header(vds);
    ADD_FAILURE() << "the view was read as a dump";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a view over the dumps of 2 replay shards"), std::string::npos) << e.what();
  }
  const std::string moved = base + "/moved";
  ASSERT_EQ(std::rename(dir.c_str(), moved.c_str()), 0);
  check(moved);
}

TEST_F(VdsTest, MissingOrDisagreeingShardIsAnErrorNamingIt) {
  SeqLayout l(fuzz::cartpole(), 3, 2);
  ReplayOptions o;
  o.capacity = 4;
  ReplayBuffer a(l, o);
  fill(a, 2, 0);
  const std::string s0 = dir + "/s0.h5", missing = dir + "/s1.h5", vds = dir + "/replay.h5";
  dump_replay(a, s0, "CartPole-v1", "");
  auto expect_error = [&](const std::vector<std::string>& shards, const std::string& named) {
    try {
      write_replay_vds(vds, shards);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(named), std::string::npos) << e.what();
    }
    EXPECT_FALSE(std::filesystem::exists(vds));
    EXPECT_FALSE(std::filesystem::exists(vds + ".tmp." + std::to_string(::getpid())));
  };
  expect_error({s0, missing}, missing);
  expect_error({s0, s0}, s0);  // twice
  // Another rollout length (the header disagrees), then uint8 observations of the same shape
  // (only the datasets' dtypes disagree).
  SeqLayout longer(fuzz::cartpole(), 4, 2);
  ReplayBuffer c(longer, o);
  fill(c, 2, 1);
  const std::string s2 = dir + "/s2.h5";
  dump_replay(c, s2, "CartPole-v1", "");
  expect_error({s0, s2}, s2);
  envs::EnvSpec pixels = fuzz::cartpole();
  pixels.obs_uint8 = true;
  SeqLayout bytes(pixels, 3, 2);
  ReplayBuffer d(bytes, o);
  fill(d, 2, 1);
  const std::string s3 = dir + "/s3.h5";
  dump_replay(d, s3, "CartPole-v1", "");
  expect_error({s0, s3}, s3);
}

TEST_F(VdsTest, EmptyShardsAddNoRows) {
  SeqLayout l(fuzz::cartpole(), 3, 2);
  ReplayOptions o;
  o.capacity = 4;
  ReplayBuffer empty(l, o), a(l, o);
  fill(a, 2, 0);
  const std::string e = dir + "/e.h5", s = dir + "/a.h5", vds = dir + "/replay.h5";
  dump_replay(empty, e, "CartPole-v1", "");
  dump_replay(a, s, "CartPole-v1", "");
  write_replay_vds(vds, {e, s});
  const Raw v = read_raw(vds, "items/version"), r = read_raw(s, "items/version");
  EXPECT_EQ(v.dims, r.dims);
  EXPECT_TRUE(v.bytes == r.bytes);
  EXPECT_EQ(root_i64(vds, "shard_items"), (std::vector<int64_t>{0, 2}));
  write_replay_vds(vds, {e});  // nothing at all: plain empty datasets
  EXPECT_EQ(read_raw(vds, "items/obs").dims, (std::vector<hsize_t>{0, 4, 4}));
}
