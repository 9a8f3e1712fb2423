// The replay's I/O thread (buffer/io_job.h) and what runs on it: a dump of a DumpSnapshot while
// the buffer's owner samples and updates priorities (buffer/replay_server.h). Also built under
// ThreadSanitizer by the hardening job (tsan_io_job): the dump thread and the sampling thread
// must not race. Torch-free.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <random>
#include <stdexcept>
#include <thread>

#include "buffer/hdf5_dump.h"
#include "buffer/io_job.h"
#include "buffer/replay_buffer.h"
#include "comm/seq_layout.h"
#include "core/error.h"

using namespace mpirl;
using namespace mpirl::buffer;

namespace {

envs::EnvSpec cartpole_like() {
  envs::EnvSpec s;
  s.id = "CartPole-v1";
  s.obs_shape = {4};
  s.num_actions = 2;
  s.max_episode_steps = 500;
  return s;
}

std::vector<char> items(const SeqLayout& l, int64_t n) {
  std::vector<char> p(l.field_offset(l.fields().size(), n));
  std::mt19937 g(7);
  for (auto& c : p) c = char(g());
  return p;
}

// Column `name` of a dump as int64 values.
std::vector<int64_t> column_i64(const std::string& path, const std::string& name) {
  for (auto& a : read_dump_items(path, nullptr))
    if (a.name == name) {
      std::vector<int64_t> v(a.data.size() / 8);
      std::memcpy(v.data(), a.data.data(), a.data.size());
      return v;
    }
  return {};
}

struct TmpDir {
  std::filesystem::path p = std::filesystem::temp_directory_path() / ("mpirl-iojob-" + std::to_string(::getpid()));
  TmpDir() { std::filesystem::create_directories(p); }
  ~TmpDir() { (void)std::system(("rm -rf '" + p.string() + "'").c_str()); }
};

}  // namespace

TEST(IoJob, RunsCountsTicksAndHandsBackTheError) {
  IoJob job;
  EXPECT_FALSE(job.running());
  std::atomic<bool> go{false};
  job.start("ok", [&](const IoJob::Progress& p) {
    while (!go.load()) std::this_thread::yield();
    for (int i = 0; i < 5; ++i) p.tick();
  });
  EXPECT_TRUE(job.running());
  EXPECT_FALSE(job.finished());  // it waits for `go`: not finished, whatever the machine's speed
  EXPECT_THROW(job.start("second", [](const IoJob::Progress&) {}), Error);  // one at a time
  go = true;
  while (!job.finished()) std::this_thread::yield();
  EXPECT_EQ(job.ticks(), 5);
  EXPECT_EQ(job.collect(), nullptr);
  EXPECT_FALSE(job.running());

  job.start("fails", [](const IoJob::Progress&) { throw std::runtime_error("disk on fire"); });
  while (!job.finished()) std::this_thread::yield();
  auto e = job.collect();
  ASSERT_NE(e, nullptr);
  try {
    std::rethrow_exception(e);
  } catch (const std::runtime_error& x) {
    EXPECT_STREQ(x.what(), "disk on fire");
  }
}

TEST(IoJob, IdleSecondsRestartWithEachTick) {
  IoJob job;
  std::atomic<int> step{0};
  job.start("ticks on demand", [&](const IoJob::Progress& p) {
    while (step.load() < 1) std::this_thread::yield();
    p.tick();
    step = 2;
    while (step.load() < 3) std::this_thread::yield();
    p.flushing(true);
    step = 4;
    while (step.load() < 5) std::this_thread::yield();
    p.flushing(false);
  });
  const double before = job.idle_seconds();
  while (job.idle_seconds() <= before) std::this_thread::yield();  // time passes with no tick
  const double idle = job.idle_seconds();
  step = 1;
  while (step.load() < 2) std::this_thread::yield();
  EXPECT_LT(job.idle_seconds(), idle + 1e-9);  // the tick restarted the clock (monotone otherwise)
  EXPECT_FALSE(job.flushing());
  step = 3;
  while (step.load() < 4) std::this_thread::yield();
  EXPECT_TRUE(job.flushing());
  step = 5;
  while (!job.finished()) std::this_thread::yield();
  EXPECT_EQ(job.collect(), nullptr);
}

// A dump of a snapshot on the I/O thread while this thread samples (changing times_sampled and
// the selector) and updates priorities: the file holds the snapshot's bookkeeping, the same bytes
// as a dump of that snapshot written afterwards on this thread, and the live buffer has moved on.
TEST(IoJob, DumpOfASnapshotWhileTheOwnerSamples) {
  TmpDir tmp;
  const SeqLayout l(cartpole_like(), 4, 3);
  ReplayOptions o;
  o.capacity = 64;
  o.selector = "prioritized";
  o.max_times_sampled = 0;
  ReplayBuffer rb(l, o);
  const auto p = items(l, 64);
  for (int i = 0; i < 64; ++i) rb.insert(p.data(), 64, i, 0.5 + i);
  const DumpSnapshot snap = DumpSnapshot::of(rb);
  std::vector<int64_t> before;
  for (int64_t s : snap.slots) before.push_back(rb.meta(s).times_sampled);

  // The dump waits at its first block until this thread has sampled and updated 40 times: the
  // two overlap on any machine (counted, not timed).
  std::atomic<int> sampled{0};
  const std::string path = (tmp.p / "concurrent.h5").string();
  DumpInfo info;
  IoJob job;
  std::atomic<int> flushes{0};
  job.start("dump", [&](const IoJob::Progress& p) {
    DumpOptions d;
    d.io_bytes = 256;  // many blocks
    d.on_flush = [&](bool on) {
      p.flushing(on);
      flushes += on ? 1 : 10;
    };
    bool waited = false;
    d.on_block = [&] {
      p.tick();
      if (!waited)
        while (sampled.load() < 40) std::this_thread::yield();
      waited = true;
    };
    info = dump_replay(snap, path, "CartPole-v1", "x = 1", d);
  });
  std::vector<char> out(l.field_offset(l.fields().size(), 8));
  int n = 0;
  while (!job.finished()) {
    auto s = rb.sample(8, out.data());
    std::vector<float> pr(8, float(1 + n % 5));
    rb.update_priorities(s.slots.data(), s.generations.data(), pr.data(), 8);
    sampled = ++n;
  }
  ASSERT_EQ(job.collect(), nullptr);
  EXPECT_GE(n, 40);
  EXPECT_GT(job.ticks(), 10);
  EXPECT_EQ(flushes.load(), 11);  // the flush phase was announced, then ended
  EXPECT_FALSE(job.flushing());
  EXPECT_EQ(info.items, 64);

  // The file's bookkeeping is the snapshot's, not the live buffer's.
  EXPECT_EQ(column_i64(path, "times_sampled"), before);
  std::vector<int64_t> live;
  for (int64_t s : snap.slots) live.push_back(rb.meta(s).times_sampled);
  EXPECT_NE(live, before) << "sampling changed the live buffer meanwhile";
  // The same snapshot dumped again now, on this thread: the same bytes (sampling wrote no item).
  auto again = dump_replay(snap, (tmp.p / "after.h5").string(), "CartPole-v1", "x = 1");
  EXPECT_EQ(again.checksum, info.checksum);
  // And a dump of the live buffer differs (its times sampled and priorities moved on).
  auto now = dump_replay(rb, (tmp.p / "live.h5").string(), "CartPole-v1", "x = 1");
  EXPECT_NE(now.checksum, info.checksum);
}
