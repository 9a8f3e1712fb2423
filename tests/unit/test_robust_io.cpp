// Small pieces that keep a run's files whole and its announcements honest: UTF-8-safe cuts of
// status strings, metrics rows that are never left half-written on a full disk, a live run that
// a resume must not touch, test hooks announced on the rank that reads them, and a run's
// config.toml checked with the same types and ranges as `mpirl train`.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <tuple>

#include "core/config.h"
#include "core/error.h"
#include "core/run_dir.h"
#include "core/test_hooks.h"
#include "core/text.h"

using namespace mpirl;

TEST(RobustIo, Utf8CutsNeverSplitACharacter) {
  const std::string t = "ab\xc3\xa9\xe2\x82\xac";  // "ab", e-acute (2 bytes), euro sign (3 bytes)
  EXPECT_EQ(utf8_prefix(t, 3), "ab");          // not "ab\xc3"
  EXPECT_EQ(utf8_prefix(t, 4), "ab\xc3\xa9");
  EXPECT_EQ(utf8_prefix(t, 6), "ab\xc3\xa9");  // the euro sign does not fit whole
  EXPECT_EQ(utf8_prefix(t, 100), t);
  EXPECT_EQ(utf8_suffix(t, 4), "\xe2\x82\xac");  // starts on a boundary
  EXPECT_EQ(utf8_suffix(t, 5), "\xc3\xa9\xe2\x82\xac");
  // What made every later dump throw: a string cut mid-character, then dumped.
  EXPECT_THROW(nlohmann::json(t.substr(0, 3)).dump(), nlohmann::json::exception);
  EXPECT_NO_THROW(nlohmann::json(utf8_prefix(t, 3)).dump());
}

TEST(RobustIo, AMetricsRowThatDoesNotFitIsNamedAndNeverCounted) {
  MetricsLog full("/dev/full");  // every write: ENOSPC
  const int64_t before = full.bytes();
  try {
    full.write({{"env_steps", 1}});
    FAIL() << "a row went onto a full disk";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/dev/full"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("No space left"), std::string::npos) << e.what();
  }
  EXPECT_EQ(full.bytes(), before) << "a row that was not written moved the length a resume rewinds to";
}

TEST(RobustIo, ALiveRunOnThisHostIsRecognisedAndADeadOrRemoteOneIsNot) {
  const std::string dir = "/tmp/mpirl-live-" + std::to_string(::getpid());
  ASSERT_EQ(std::system(("rm -rf " + dir + " && mkdir -p " + dir).c_str()), 0);
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  auto put = [&](long pid, const std::string& h) {
    std::ofstream(dir + "/replay.pid") << pid << "\n";
    std::ofstream(dir + "/replay.host") << h << "\n";
  };
  EXPECT_EQ(live_run_here(dir), "");  // no replay.pid
  // A live process whose command line names mpirl (as a replay rank's does).
  const pid_t child = ::fork();
  if (child == 0) {
    ::execlp("bash", "bash", "-c", "exec -a mpirl-test-replay sleep 60", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ASSERT_GT(child, 0);
  auto cmdline = [&] {
    std::ifstream c("/proc/" + std::to_string(child) + "/cmdline", std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(c)), {});
  };
  // Until sleep runs under its new name (bash's own command line names mpirl too, and an exec in
  // progress reads as empty).
  for (int i = 0; i < 5000 && cmdline().rfind("mpirl-test-replay", 0) != 0; ++i) ::usleep(1000);
  put(child, host);
  EXPECT_NE(live_run_here(dir).find("replay.pid"), std::string::npos) << cmdline();
  put(child, "another-host");         // cannot be checked from here (a lost node leaves it behind)
  EXPECT_EQ(live_run_here(dir), "");
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  put(1, host);                       // alive, but not mpirl (pid 1 is init)
  EXPECT_EQ(live_run_here(dir), "");
  put(999999999, host);               // no such process
  EXPECT_EQ(live_run_here(dir), "");
  std::system(("rm -rf " + dir).c_str());
}

TEST(RobustIo, TestHooksAreListedAndReadThroughTheAnnouncer) {
  ::setenv("MPIRL_TEST_EXAMPLE_HOOK", "7", 1);
  EXPECT_STREQ(test_hook("MPIRL_TEST_EXAMPLE_HOOK"), "7");
  EXPECT_EQ(test_hook("MPIRL_TEST_NOT_SET_ANYWHERE"), nullptr);
  const auto set = test_hooks_set();
  EXPECT_NE(std::find(set.begin(), set.end(), "MPIRL_TEST_EXAMPLE_HOOK=7"), set.end());
  ::unsetenv("MPIRL_TEST_EXAMPLE_HOOK");
}

TEST(RobustIo, ARunsConfigIsCheckedLikeTrainsNamingTheKey) {
  const std::string good = default_config_toml();
  EXPECT_NO_THROW(parse_resolved_config(good));
  auto with = [&](const std::string& from, const std::string& to) {
    std::string t = good;
    const auto at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    t.replace(at, from.size(), to);
    return t;
  };
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"num_envs = 16", "num_envs = \"16\"", "env.num_envs"},  // a string: once an empty optional dereferenced
      {"num_envs = 16", "num_envs = -1", "env.num_envs"},
      {"rollout_len = 32", "rollout_len = 0", "actor.rollout_len"},
      {"selector = \"fifo\"", "selector = \"lifo\"", "replay.selector"}};
  for (const auto& [from, to, key] : cases) {
    try {
      parse_resolved_config(with(from, to));
      ADD_FAILURE() << to << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("'" + key + "'"), std::string::npos) << e.what();
    }
  }
}
