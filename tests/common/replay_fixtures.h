#pragma once
// Replay test fixtures shared by tests/unit/test_replay_*.cpp: tagged payloads, the production
// chunk layout (rollouts received in place), a directory listing and the dump tests' temporary
// directory.
#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "buffer/replay_buffer.h"
#include "comm/seq_layout.h"
#include "comm/wire.h"
#include "envs/registry.h"

namespace mpirl::buffer::testing {

inline envs::EnvSpec spec() { return envs::make_env("CartPole-v1", 0, {})->spec(); }

// A payload of n sequences whose every byte encodes the sequence's tag.
inline std::vector<char> payload(const SeqLayout& l, int64_t n, int first_tag) {
  std::vector<char> p(l.field_offset(l.fields().size(), n));
  for (size_t f = 0; f < l.fields().size(); ++f)
    for (int64_t i = 0; i < n; ++i)
      std::memset(p.data() + l.field_offset(f, n) + size_t(i) * l.fields()[f].bytes, first_tag + int(i), l.fields()[f].bytes);
  return p;
}

// ---- Production chunk layout (chunk_rows = env.num_envs > 1) ----

// A layout like a run's: CartPole (time limit, so boot_obs/boot_state/boot_step are present) with
// a recurrent state (state0). Kept alive for the buffers that refer to it.
inline const SeqLayout& prod_layout() {
  static const SeqLayout l(spec(), 5, 6);
  return l;
}

// Item tags: every byte of every field is tag & 0xff, except `version`, which holds the tag.
inline void put_item(const SeqLayout& l, char* p, int64_t n, int64_t i, int64_t tag) {
  for (size_t f = 0; f < l.fields().size(); ++f)
    std::memset(p + l.field_offset(f, n) + size_t(i) * l.fields()[f].bytes, int(tag & 0xff), l.fields()[f].bytes);
  l.ptr<int64_t>(p, Seq::Version, n)[i] = tag;
}
inline std::vector<char> tagged(const SeqLayout& l, int64_t n, int64_t first_tag) {
  std::vector<char> p(l.field_offset(l.fields().size(), n));
  for (int64_t i = 0; i < n; ++i) put_item(l, p.data(), n, i, first_tag + i);
  return p;
}
// The tag of item i, or -1 when any byte of the item disagrees with it (a torn or overwritten item).
inline int64_t item_tag(const SeqLayout& l, const char* p, int64_t n, int64_t i) {
  const int64_t tag = l.ptr<int64_t>(p, Seq::Version, n)[i];
  for (size_t f = 0; f < l.fields().size(); ++f) {
    if (l.fields()[f].id == Seq::Version) continue;
    const auto* b = reinterpret_cast<const unsigned char*>(p + l.field_offset(f, n) + size_t(i) * l.fields()[f].bytes);
    for (size_t k = 0; k < l.fields()[f].bytes; ++k)
      if (b[k] != (tag & 0xff)) return -1;
  }
  return tag;
}
inline std::vector<char> batch_buffer(const SeqLayout& l, int64_t B) { return std::vector<char>(l.field_offset(l.fields().size(), B)); }

// A rollout received in place: the payload written into a reserved chunk after a header region.
inline constexpr size_t kPayloadAt = 2 * wire::kAlign;
inline ReplayOptions chunked_options(int64_t rows, int64_t capacity, const std::string& selector, int64_t max_times) {
  ReplayOptions o;
  o.capacity = capacity;
  o.chunk_rows = rows;
  o.chunk_bytes = kPayloadAt + prod_layout().field_offset(prod_layout().fields().size(), rows);
  o.selector = selector;
  o.max_times_sampled = max_times;
  o.min_size_to_sample = 1;
  return o;
}
// Commits tags [first, first + R) as one rollout; returns the chunk they went into.
inline int64_t commit_rollout(ReplayBuffer& rb, int64_t first) {
  const auto& l = rb.layout();
  const int64_t R = rb.chunk_rows();
  char* dst = rb.reserve_chunk();
  auto p = tagged(l, R, first);
  std::memcpy(dst + kPayloadAt, p.data(), p.size());
  rb.commit_chunk(kPayloadAt, R);
  return rb.slots_in_order().back() / R;
}

inline std::vector<std::string> list_dir(const std::string& dir) {  // POSIX: see DumpTest::TearDown
  std::vector<std::string> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* e = ::readdir(d))
      if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") out.push_back(e->d_name);
    ::closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace mpirl::buffer::testing

class DumpTest : public ::testing::Test {
 protected:
  std::filesystem::path dir = std::filesystem::temp_directory_path() / ("mpirl-dump-" + std::to_string(::getpid()));
  void SetUp() override { std::filesystem::create_directories(dir); }
  // (std::system, not std::filesystem::remove_all: the latter resolves into libtorch's copy and crashes)
  void TearDown() override { (void)std::system(("rm -rf '" + dir.string() + "'").c_str()); }
};
