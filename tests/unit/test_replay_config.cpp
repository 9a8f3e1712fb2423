// The replay config refusals: settings that can deadlock, fifo that is not a queue, a dump path
// that cannot be written.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "buffer/replay.h"
#include "core/config.h"
#include "core/error.h"
#include "tests/common/replay_fixtures.h"

using namespace mpirl;
using namespace mpirl::buffer;
using namespace mpirl::buffer::testing;

TEST(ReplayConfig, RefusesSettingsThatCanDeadlock) {
  auto refused = [](std::vector<std::string> sets, const std::string& key) {
    try {
      buffer::validate_replay_config(load_config("", sets));
      ADD_FAILURE() << "accepted " << sets[0];
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  };
  // Queue mode: 48 slots of 16-item rollouts, batch 40: with no free chunk only 33 items may be left.
  refused({"replay.capacity=48", "env.num_envs=16", "learner.batch_size=40"}, "replay.capacity");
  refused({"replay.samples_per_insert=4.0", "replay.error_buffer=10.0"}, "replay.error_buffer");
  refused({"replay.min_size_to_sample=300"}, "replay.min_size_to_sample");
  EXPECT_NO_THROW(buffer::validate_replay_config(load_config("", {})));
  EXPECT_NO_THROW(buffer::validate_replay_config(load_config("", {"replay.capacity=56", "learner.batch_size=40"})));
}

// Defect: fifo always returns the oldest item, so with max_times_sampled != 1 it returned the
// same item over and over.
TEST(ReplayConfig, RefusesFifoThatIsNotAQueue) {
  for (std::string m : {"0", "2"}) {
    try {
      buffer::validate_replay_config(load_config("", {"replay.max_times_sampled=" + m}));
      ADD_FAILURE() << "accepted fifo with max_times_sampled = " << m;
    } catch (const ConfigError& e) {
      std::string w = e.what();
      EXPECT_NE(w.find("'replay.max_times_sampled'"), std::string::npos) << w;
      EXPECT_NE(w.find("queue"), std::string::npos) << w;
      EXPECT_NE(w.find("uniform"), std::string::npos) << w;
    }
  }
  EXPECT_NO_THROW(buffer::validate_replay_config(
      load_config("", {"replay.selector=\"uniform\"", "replay.max_times_sampled=0"})));
  EXPECT_NO_THROW(buffer::validate_replay_config(
      load_config("", {"replay.selector=\"prioritized\"", "replay.max_times_sampled=3"})));
}

// Defect: a dump path that cannot be written was found at the end of the run. Now it is a config
// error at start, found by creating (and removing) a probe file, and without creating anything.
TEST(ReplayConfig, RefusesAnUnwritableDumpPath) {
  const std::string d = (std::filesystem::temp_directory_path() / ("mpirl-cfg-" + std::to_string(::getpid()))).string();
  ASSERT_EQ(::mkdir(d.c_str(), 0755), 0);
  const std::string file = d + "/file";
  std::ofstream(file) << "a regular file";
  auto q = [](const std::string& s) { return "\"" + s + "\""; };
  auto refused = [&](std::vector<std::string> sets, std::vector<std::string> words) {
    try {
      buffer::validate_replay_config(load_config("", sets));
      ADD_FAILURE() << "accepted " << sets[0];
    } catch (const ConfigError& e) {
      for (auto& w : words) EXPECT_NE(std::string(e.what()).find(w), std::string::npos) << e.what();
    }
  };
  refused({"replay.dump_path=" + q(file + "/replay.h5")}, {"'replay.dump_path'", file, "not a directory"});
  refused({"replay.dump_path=" + q(file + "/sub/replay.h5")}, {"'replay.dump_path'", "not a directory"});
  refused({"replay.dump_path=" + q(d)}, {"'replay.dump_path'", "is a directory"});
  // The default <run dir>/replay.h5: validation runs before the run directory is created, so
  // run.out_dir is what must take it.
  refused({"run.out_dir=" + q(file + "/runs")}, {"'replay.dump_path'", "run.out_dir", "not a directory"});
  // No dumps of any kind ("never" also turns off periodic and SIGUSR2 dumps): not checked.
  EXPECT_NO_THROW(buffer::validate_replay_config(
      load_config("", {"replay.dump=\"never\"", "replay.dump_path=" + q(file + "/replay.h5")})));
  EXPECT_NO_THROW(buffer::validate_replay_config(load_config(
      "", {"replay.dump=\"never\"", "replay.dump_interval_s=5.0", "replay.dump_path=" + q(file + "/r.h5")})));
  // Missing directories under a writable one are fine (dump_replay creates them) and are not
  // created here; nor is the run directory or run.out_dir.
  EXPECT_NO_THROW(buffer::validate_replay_config(load_config("", {"replay.dump_path=" + q(d + "/new/deeper/replay.h5")})));
  EXPECT_NO_THROW(buffer::validate_replay_config(load_config("", {"run.out_dir=" + q(d + "/runs")})));
  EXPECT_NO_THROW(buffer::validate_replay_config(load_config("", {"run.out_dir=" + q(d), "run.name=\"r1\""})));
  EXPECT_EQ(list_dir(d), std::vector<std::string>{"file"});  // no probe file, nothing created
  (void)std::system(("rm -rf '" + d + "'").c_str());
}
