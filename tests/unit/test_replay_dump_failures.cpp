// HDF5 replay dumps that go wrong: bad files give errors naming the file, a corrupt dump restores
// nothing, the next dump removes stale temporaries, a failed dump keeps the previous one, a dump
// into a vanishing directory fails.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "buffer/hdf5_dump.h"
#include "buffer/replay_buffer.h"
#include "comm/seq_layout.h"
#include "core/error.h"
#include "tests/common/replay_fixtures.h"

using namespace mpirl;
using namespace mpirl::buffer;
using namespace mpirl::buffer::testing;

TEST_F(DumpTest, BadFilesGiveErrorsNamingTheFile) {
  auto expect_error = [](const std::string& path, const std::string& what) {
    try {
      read_dump_header(path);
      ADD_FAILURE() << "no error for " << path;
    } catch (const Error& e) {
      std::string m = e.what();
      EXPECT_NE(m.find(path), std::string::npos) << m;
      EXPECT_NE(m.find(what), std::string::npos) << m;
    }
  };
  expect_error((dir / "missing.h5").string(), "does not exist");
  auto text = (dir / "text.h5").string();
  std::ofstream(text) << "not hdf5 at all";
  expect_error(text, "not an HDF5 file");
  // A real dump cut in half.
  SeqLayout l(spec(), 3);
  ReplayOptions o;
  o.capacity = 50;
  ReplayBuffer a(l, o);
  auto p = payload(l, 50, 0);
  for (int i = 0; i < 50; ++i) a.insert(p.data(), 50, i);
  auto full = (dir / "full.h5").string(), cut = (dir / "cut.h5").string();
  dump_replay(a, full, "CartPole-v1", "");
  std::filesystem::copy_file(full, cut);
  std::filesystem::resize_file(cut, std::filesystem::file_size(full) / 2);
  expect_error(cut, "truncated or corrupt");
}

// A checksum mismatch is found before anything is inserted.
TEST_F(DumpTest, CorruptDumpRestoresNothing) {
  const auto& l = prod_layout();
  ReplayBuffer a(l, chunked_options(4, 16, "uniform", 0));
  for (int r = 0; r < 3; ++r) commit_rollout(a, 1 + 4 * r);
  auto f = (dir / "a.h5").string();
  dump_replay(a, f, "CartPole-v1", "");
  {  // flip one reward of the last item: the last dataset block read in the first pass
    hid_t fid = H5Fopen(f.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(fid, 0);
    hid_t ds = H5Dopen2(fid, "items/reward", H5P_DEFAULT);
    ASSERT_GE(ds, 0);
    std::vector<float> r(size_t(12 * l.T()));
    ASSERT_GE(H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, r.data()), 0);
    r.back() += 1.f;
    ASSERT_GE(H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, r.data()), 0);
    H5Dclose(ds);
    H5Fclose(fid);
  }
  ReplayBuffer b(l, chunked_options(4, 16, "uniform", 0));
  DumpOptions io;
  io.io_bytes = 1;  // one item per block
  try {
    restore_replay(b, f, "CartPole-v1", io);
    ADD_FAILURE() << "corrupt dump restored";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("corrupt"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << e.what();
  }
  EXPECT_EQ(b.size(), 0);
  EXPECT_EQ(b.counters().inserted, 0);
  EXPECT_TRUE(b.can_insert_chunk());
  // Bookkeeping no buffer can hold (insertion numbers out of order) under a matching checksum:
  // refused before anything is inserted, too.
  auto g = (dir / "g.h5").string();
  dump_replay(a, g, "CartPole-v1", "");
  {
    hid_t fid = H5Fopen(g.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(fid, 0);
    hid_t ds = H5Dopen2(fid, "items/insert_seq", H5P_DEFAULT);
    std::vector<int64_t> seq(12);
    ASSERT_GE(H5Dread(ds, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, seq.data()), 0);
    std::swap(seq[10], seq[11]);
    ASSERT_GE(H5Dwrite(ds, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, seq.data()), 0);
    H5Dclose(ds);
    H5Fclose(fid);
    uint32_t crc = 0;
    read_dump_items(g, &crc);
    fid = H5Fopen(g.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t at = H5Aopen(fid, "checksum_crc32", H5P_DEFAULT);
    int64_t v = crc;
    ASSERT_GE(H5Awrite(at, H5T_NATIVE_INT64, &v), 0);
    H5Aclose(at);
    H5Fclose(fid);
  }
  try {
    restore_replay(b, g, "CartPole-v1", io);
    ADD_FAILURE() << "out-of-order insertion numbers restored";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("insert_seq"), std::string::npos) << e.what();
  }
  EXPECT_EQ(b.size(), 0);
  EXPECT_EQ(b.counters().inserted, 0);
}

// Defect: PATH.tmp.<pid> files of killed dumps stayed forever. The next successful dump removes
// exactly those (PATH + ".tmp." + digits), nothing else.
TEST_F(DumpTest, NextDumpRemovesStaleTemporaries) {
  const auto& l = prod_layout();
  ReplayBuffer a(l, chunked_options(4, 8, "uniform", 0));
  commit_rollout(a, 1);
  auto f = (dir / "replay.h5").string();
  std::vector<std::string> stale{"replay.h5.tmp.12345", "replay.h5.tmp.1"};
  std::vector<std::string> keep{"replay.h5.tmp.", "replay.h5.tmp.12x", "replay.h5.tmp.abc", "replay.h5.tmp.1.h5",
                                "other.h5.tmp.777", "xreplay.h5.tmp.42", "replay.h5.complete.tmp.9"};
  for (auto& s : stale) std::ofstream((dir / s).string()) << "half a dump";
  for (auto& s : keep) std::ofstream((dir / s).string()) << "not ours";
  dump_replay(a, f, "CartPole-v1", "");
  std::vector<std::string> want = keep;
  want.push_back("replay.h5");
  want.push_back("replay.h5.complete");
  std::sort(want.begin(), want.end());
  EXPECT_EQ(list_dir(dir.string()), want);
  EXPECT_EQ(read_dump_header(f).items, 4);
}

// A dump that fails after writing its data removes its temporary and leaves PATH (the previous
// dump) as it was.
TEST_F(DumpTest, FailedDumpRemovesItsTemporaryAndKeepsThePreviousDump) {
  const auto& l = prod_layout();
  ReplayBuffer a(l, chunked_options(4, 8, "uniform", 0));
  commit_rollout(a, 1);
  auto f = (dir / "replay.h5").string();
  auto first = dump_replay(a, f, "CartPole-v1", "");
  commit_rollout(a, 5);
  DumpOptions fail;
  std::string tmp_seen;
  fail.on_data_written = [&](const std::string& tmp) {
    tmp_seen = tmp;
    throw Error("injected write failure");
  };
  EXPECT_THROW(dump_replay(a, f, "CartPole-v1", "", fail), Error);
  EXPECT_EQ(tmp_seen.rfind(f + ".tmp.", 0), 0u) << tmp_seen;
  EXPECT_EQ(list_dir(dir.string()), (std::vector<std::string>{"replay.h5", "replay.h5.complete"}));
  auto h = read_dump_header(f);
  EXPECT_EQ(h.items, first.items);
  EXPECT_EQ(h.checksum, first.checksum);
}

// A dump whose directory disappears under it fails with an Error naming the file and leaves no
// PATH (also when the directory comes back empty).
TEST_F(DumpTest, DumpIntoAVanishingDirectoryFails) {
  const auto& l = prod_layout();
  ReplayBuffer a(l, chunked_options(4, 8, "uniform", 0));
  commit_rollout(a, 1);
  for (bool recreate : {false, true}) {
    SCOPED_TRACE(recreate ? "directory recreated" : "directory gone");
    auto sub = dir / (recreate ? "back" : "gone");
    auto f = (sub / "replay.h5").string();
    DumpOptions vanish;
    vanish.on_data_written = [&](const std::string&) {
      ASSERT_EQ(std::system(("rm -rf '" + sub.string() + "'").c_str()), 0);
      if (recreate) {
        ASSERT_EQ(::mkdir(sub.c_str(), 0755), 0);
      }
    };
    try {
      dump_replay(a, f, "CartPole-v1", "", vanish);
      ADD_FAILURE() << "dump into a removed directory succeeded";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << e.what();
    }
    struct stat st {};
    EXPECT_NE(::stat(f.c_str(), &st), 0);
    EXPECT_EQ(list_dir(sub.string()), std::vector<std::string>{});
  }
}
