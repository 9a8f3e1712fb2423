#include <gtest/gtest.h>

#include <dirent.h>
#include <algorithm>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <cmath>
#include <fstream>

#include "core/config.h"
#include "tests/common/config_text.h"
#include "core/run_dir.h"
#include "core/error.h"
#include "comm/ranks.h"

using namespace mpirl;

namespace {
std::string config_error(const std::string& file, const std::vector<std::string>& sets) {
  try {
    load_config(file, sets);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}
std::string write_tmp(const std::string& name, const std::string& text) {
  std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}
}  // namespace

TEST(Config, DefaultsAndOverrides) {
  auto c = load_config("", {"learner.lr=0.001", "env.id=Synthetic", "run.max_wall_seconds=5"});
  EXPECT_EQ(c.env.id, "Synthetic");
  EXPECT_DOUBLE_EQ(c.learner.lr, 0.001);
  EXPECT_DOUBLE_EQ(c.run.max_wall_seconds, 5.0);
  EXPECT_TRUE(std::isnan(c.run.stop_mean_return));
  EXPECT_EQ(c.model.hidden, (std::vector<int64_t>{64, 64}));
  // The resolved TOML parses back to the same values.
  auto again = parse_resolved_config(c.resolved_toml);
  EXPECT_EQ(again.env.id, "Synthetic");
  EXPECT_DOUBLE_EQ(again.learner.lr, 0.001);
  EXPECT_TRUE(std::isnan(again.run.stop_mean_return));
}

TEST(Config, FileIsMergedOverDefaults) {
  auto f = write_tmp("ok.toml", "[learner]\nalgo = \"appo\"\n[model]\nhidden = [32]\n");
  auto c = load_config(f, {"learner.batch_size=16"});
  EXPECT_EQ(c.learner.algo, "appo");
  EXPECT_EQ(c.model.hidden, (std::vector<int64_t>{32}));
  EXPECT_EQ(c.learner.batch_size, 16);
}

TEST(Config, EveryErrorClassNamesTheKey) {
  // unknown key (from a file and from --set), unknown section
  auto f = write_tmp("bad.toml", "[learner]\nlrr = 0.1\n");
  auto m = config_error(f, {});
  EXPECT_NE(m.find("'learner.lrr'"), std::string::npos) << m;
  EXPECT_NE(m.find(f), std::string::npos) << m;
  EXPECT_NE(config_error("", {"learner.lrr=1"}).find("'learner.lrr'"), std::string::npos);
  EXPECT_NE(config_error(write_tmp("sec.toml", "[nope]\na = 1\n"), {}).find("[nope]"), std::string::npos);
  // wrong type
  m = config_error("", {"learner.batch_size=\"big\""});
  EXPECT_NE(m.find("'learner.batch_size'"), std::string::npos) << m;
  EXPECT_NE(m.find("expected an integer"), std::string::npos) << m;
  m = config_error("", {"learner.lr=fast"});
  EXPECT_NE(m.find("'learner.lr'"), std::string::npos) << m;
  EXPECT_NE(m.find("expected a number"), std::string::npos) << m;
  // out of range
  m = config_error("", {"learner.gamma=1.5"});
  EXPECT_NE(m.find("'learner.gamma'"), std::string::npos) << m;
  EXPECT_NE(m.find("[0, 1]"), std::string::npos) << m;
  EXPECT_NE(config_error("", {"env.num_envs=0"}).find("'env.num_envs'"), std::string::npos);
  // not one of the choices
  m = config_error("", {"learner.algo=dqn"});
  EXPECT_NE(m.find("'learner.algo'"), std::string::npos) << m;
  EXPECT_NE(m.find("impala"), std::string::npos) << m;
  // cross-field constraint
  m = config_error("", {"learner.algo=appo", "learner.batch_size=30", "learner.appo_minibatches=4"});
  EXPECT_NE(m.find("'learner.appo_minibatches'"), std::string::npos) << m;
  EXPECT_NE(config_error("", {"replay.capacity=8"}).find("'learner.batch_size'"), std::string::npos);
  // malformed --set, TOML syntax errors, missing file
  EXPECT_NE(config_error("", {"learner.lr"}).find("section.key=value"), std::string::npos);
  EXPECT_NE(config_error("", {"lr=1"}).find("section.key"), std::string::npos);
  m = config_error(write_tmp("syntax.toml", "[learner\nlr = 1\n"), {});
  EXPECT_NE(m.find("syntax.toml:1"), std::string::npos) << m;
  m = config_error("/nonexistent/mpirl.toml", {});
  EXPECT_NE(m.find("/nonexistent/mpirl.toml"), std::string::npos) << m;
  // list of the wrong element type
  EXPECT_NE(config_error("", {"model.hidden=[1.5]"}).find("'model.hidden'"), std::string::npos);
}

TEST(Config, WorldSizeTooSmallNamesTheRankCount) {
  auto c = load_config("", {"roles.learners=2"});
  try {
    make_layout(c, 3);
    FAIL();
  } catch (const ConfigError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("world size 3"), std::string::npos) << m;
    EXPECT_NE(m.find("4 ranks"), std::string::npos) << m;
  }
  auto l = make_layout(c, 6);
  EXPECT_EQ(l.replay_rank(), 2);
  EXPECT_EQ(l.actors(), 3);
  EXPECT_EQ(l.role_of(0), Role::Learner);
  EXPECT_EQ(l.role_of(2), Role::Replay);
  EXPECT_EQ(l.role_of(5), Role::Actor);
}

// actor.synchronous: refused where a learner could wait for sequences that waiting actors never
// send, and where the actors cannot share a batch in whole rollouts (the layout knows the actors).
TEST(Config, SynchronousActorsNeedAQueueAndWholeShares) {
  const std::vector<std::string> base = {"learner.algo=appo", "learner.batch_size=32", "env.num_envs=8",
                                         "replay.capacity=64", "actor.synchronous=true"};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), base.begin(), base.end());
    return config_error("", more);
  };
  EXPECT_EQ(with({}), "");
  for (const auto& [set, names] : std::vector<std::pair<std::string, std::string>>{
           {"replay.selector=\"uniform\"", "replay.selector"},
           {"replay.max_times_sampled=2", "replay.max_times_sampled"},
           {"replay.samples_per_insert=1.0", "replay.samples_per_insert"},
           {"replay.min_size_to_sample=40", "replay.min_size_to_sample = 40"},
           {"learner.publish_interval=2", "learner.publish_interval = 1 (it is 2)"},
           {"learner.frozen=true", "learner.frozen"},
           {"actor.inference=\"central\"", "actor.inference"},
           {"roles.replays=2", "roles.replays = 1 (it is 2)"},
           {"roles.learners=2", "roles.learners = 1 (it is 2)"},
           {"replay.restore=\"old.h5\"", "replay.restore"}}) {
    const std::string m = with({set});
    EXPECT_NE(m.find("'actor.synchronous' = true"), std::string::npos) << set << ": " << m;
    EXPECT_NE(m.find(names), std::string::npos) << set << ": " << m;
  }
  EXPECT_NE(with({"learner.algo=r2d2", "learner.value_norm=\"none\"", "model.core=\"lru\"", "actor.rollout_len=80"})
                .find("'actor.synchronous' = true: expected learner.algo"),
            std::string::npos);
  // 32 sequences per update: 2 actors x 8 envs share it (2 rollouts each), 3 actors cannot.
  const auto c = load_config("", base);
  EXPECT_EQ(make_layout(c, 4).actors(), 2);
  try {
    make_layout(c, 5);
    FAIL() << "3 actors x 8 envs accepted for 32 sequences";
  } catch (const ConfigError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("actor.synchronous = true"), std::string::npos) << m;
    EXPECT_NE(m.find("multiple of 24"), std::string::npos) << m;
  }
  EXPECT_EQ(make_layout(load_config("", {"learner.algo=appo", "learner.batch_size=32", "env.num_envs=8",
                                         "replay.capacity=64"}),
                        5)
                .actors(),
            3);  // (without it, any split)
}

TEST(RunFiles, AtomicWritesReplaceWholeFilesAndNameTheFailure) {
  // POSIX calls only: LibTorch exports its own std::filesystem::remove_all/directory_iterator.
  const std::string dir = "/tmp/mpirl-atomic-" + std::to_string(::getpid());
  ASSERT_EQ(std::system(("rm -rf '" + dir + "' && mkdir -p '" + dir + "'").c_str()), 0);
  const std::string path = dir + "/summary.json";
  mpirl::write_file_atomic(path, "first\n");
  mpirl::write_file_atomic(path, "second, longer\n");
  std::stringstream ss;
  ss << std::ifstream(path).rdbuf();
  EXPECT_EQ(ss.str(), "second, longer\n");
  std::vector<std::string> names;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d))
      if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") names.push_back(e->d_name);
    ::closedir(d);
  }
  EXPECT_EQ(names, std::vector<std::string>{"summary.json"});  // no temporary left behind
  // A parent that is a regular file: the error names the path, nothing is created.
  const std::string blocked = path + "/model.pt";
  try {
    mpirl::write_file_atomic(blocked, "x");
    FAIL() << "expected an error";
  } catch (const mpirl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.pt"), std::string::npos) << e.what();
  }
  (void)std::system(("rm -rf '" + dir + "'").c_str());
}

// Defect (CI, storage.kill_replay_part): learner 0, killed by mpirun while it wrote summary.json
// or model.pt, left NAME.tmp.<pid> in the run directory, and the resumed run kept it for ever. The
// resume removes exactly those files (NAME.tmp.<digits>), or those of one NAME, never `keep`.
TEST(RunFiles, StaleTemporariesAreRemovedAndNothingElse) {
  const std::string dir = "/tmp/mpirl-stale-" + std::to_string(::getpid());
  ASSERT_EQ(std::system(("rm -rf '" + dir + "' && mkdir -p '" + dir + "'").c_str()), 0);
  const std::vector<std::string> stale{"summary.json.tmp.4242", "model.pt.tmp.7", "replay.h5.tmp.123"};
  const std::vector<std::string> kept{"summary.json", "summary.json.tmp.", "model.pt.tmp.12x", ".tmp.5",
                                      "metrics.jsonl", "replay.h5.tmp.1.h5", "notes.tmp.txt"};
  for (const auto& n : stale) std::ofstream(dir + "/" + n) << "half a file";
  for (const auto& n : kept) std::ofstream(dir + "/" + n) << "not a temporary";
  auto list = [&] {
    std::set<std::string> names;
    if (DIR* d = ::opendir(dir.c_str())) {
      while (dirent* e = ::readdir(d))
        if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") names.insert(e->d_name);
      ::closedir(d);
    }
    return names;
  };
  // One name, and its own temporary kept.
  auto removed = remove_stale_temporaries(dir, "replay.h5", "replay.h5.tmp.123");
  EXPECT_TRUE(removed.empty());
  removed = remove_stale_temporaries(dir, "model.pt");
  EXPECT_EQ(removed, std::vector<std::string>{"model.pt.tmp.7"});
  // Every name.
  removed = remove_stale_temporaries(dir);
  std::sort(removed.begin(), removed.end());
  EXPECT_EQ(removed, (std::vector<std::string>{"replay.h5.tmp.123", "summary.json.tmp.4242"}));
  EXPECT_EQ(list(), std::set<std::string>(kept.begin(), kept.end()));
  EXPECT_TRUE(remove_stale_temporaries(dir + "/missing").empty());
  (void)std::system(("rm -rf '" + dir + "'").c_str());
}

TEST(Config, ExactFloatsAreAcceptedForIntegers) {
  auto c = load_config("", {"run.total_env_steps=1e6", "env.num_envs=16.0", "model.hidden=[32.0, 1e2]"});
  EXPECT_EQ(c.run.total_env_steps, 1000000);
  EXPECT_EQ(c.env.num_envs, 16);
  EXPECT_EQ(c.model.hidden, (std::vector<int64_t>{32, 100}));
  // Stored as integers: the resolved TOML says 1000000, not 1e6 or 1000000.0.
  const auto at = c.resolved_toml.find("total_env_steps = 1000000");
  ASSERT_NE(at, std::string::npos) << c.resolved_toml;
  const char after = c.resolved_toml[at + std::string("total_env_steps = 1000000").size()];
  EXPECT_TRUE(after == '\n' || after == '\0') << c.resolved_toml;
  // A fraction, or a float beyond exact integers, is still refused, naming the key.
  for (const char* bad : {"run.total_env_steps=2.5", "run.total_env_steps=1e300", "env.num_envs=nan"}) {
    auto e = config_error("", {bad});
    EXPECT_NE(e.find("expected an integer"), std::string::npos) << bad << ": " << e;
  }
}

TEST(Config, UnknownKeysSuggestTheClosest) {
  auto e = config_error("", {"learner.lrr=0.1"});
  EXPECT_NE(e.find("did you mean 'learner.lr'?"), std::string::npos) << e;
  e = config_error("", {"learner.num_envs=8"});  // the right key in the wrong section
  EXPECT_NE(e.find("did you mean 'env.num_envs'?"), std::string::npos) << e;
  e = config_error("", {"leaner.lr=0.1"});
  EXPECT_NE(e.find("did you mean 'learner'?"), std::string::npos) << e;
  auto f = write_tmp("typo.toml", "[run]\ntotal_env_step = 10\n");
  e = config_error(f, {});
  EXPECT_NE(e.find("did you mean 'run.total_env_steps'?"), std::string::npos) << e;
  // Nothing close: no suggestion.
  e = config_error("", {"learner.zzzzzzzzzzzzzz=1"});
  EXPECT_EQ(e.find("did you mean"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown config key 'learner.zzzzzzzzzzzzzz'"), std::string::npos) << e;
}

TEST(RunDir, GeneratedNamesAreSafeAndUnique) {
  namespace fs = std::filesystem;
  const std::string out = ::testing::TempDir() + "runs_generated_" + std::to_string(::getpid());
  (void)std::system(("rm -rf '" + out + "'").c_str());  // not fs::remove_all: libtorch exports a broken one
  auto cfg = load_config("", {"env.id=py:my_pkg.envs:Maze", "run.out_dir=\"" + out + "\""});
  // Two runs started in the same second (the name has one-second resolution) get two directories.
  std::vector<std::string> dirs;
  for (int i = 0; i < 3; ++i) dirs.push_back(create_run_dir(cfg));
  std::set<std::string> unique(dirs.begin(), dirs.end());
  EXPECT_EQ(unique.size(), 3u);
  for (const auto& d : dirs) {
    const std::string name = fs::path(d).filename().string();
    EXPECT_EQ(name.find(':'), std::string::npos) << name;
    EXPECT_EQ(name.rfind("py_my_pkg.envs_Maze-impala-", 0), 0u) << name;
    EXPECT_TRUE(fs::exists(d + "/config.toml")) << d;
  }
  (void)std::system(("rm -rf '" + out + "'").c_str());  // not fs::remove_all: libtorch exports a broken one
}

TEST(RunDir, AFailedStartIsMovedAsideAndAFinishedRunIsKept) {
  namespace fs = std::filesystem;
  const std::string out = ::testing::TempDir() + "runs_named_" + std::to_string(::getpid());
  (void)std::system(("rm -rf '" + out + "'").c_str());  // not fs::remove_all: libtorch exports a broken one
  auto cfg = load_config("", {"run.name=exp1", "run.out_dir=\"" + out + "\""});
  const std::string dir = create_run_dir(cfg);
  EXPECT_EQ(dir, out + "/exp1");
  // What a run that failed after start leaves: its config, a log, a replay.pid of a dead process.
  std::ofstream(dir + "/metrics.jsonl") << "{\"time_s\": 1}\n";
  std::ofstream(dir + "/replay.pid") << "999999999\n";
  EXPECT_EQ(create_run_dir(cfg), dir);  // the name is free again
  std::vector<std::string> aside;
  for (auto& e : fs::directory_iterator(out))
    if (e.path().filename().string().rfind("exp1.failed-", 0) == 0) aside.push_back(e.path().string());
  ASSERT_EQ(aside.size(), 1u);
  EXPECT_TRUE(fs::exists(aside[0] + "/metrics.jsonl"));  // nothing lost
  // A live run (its replay.pid is alive: this process) is refused.
  std::ofstream(dir + "/replay.pid") << ::getpid() << "\n";
  try {
    create_run_dir(cfg);
    FAIL() << "a live run's directory was reused";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("still be going on"), std::string::npos) << e.what();
  }
  // A replay on another host cannot be checked from here: refused, naming the host.
  std::ofstream(dir + "/replay.pid") << "999999999\n";
  std::ofstream(dir + "/replay.host") << "some-other-node\n";
  try {
    create_run_dir(cfg);
    FAIL() << "a run whose replay is on another host was moved aside";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("some-other-node"), std::string::npos) << e.what();
  }
  fs::remove(dir + "/replay.pid");
  fs::remove(dir + "/replay.host");
  // A run that saved a model is never touched.
  std::ofstream(dir + "/model.pt") << "x";
  try {
    create_run_dir(cfg);
    FAIL() << "a finished run's directory was reused";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("--resume"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::exists(dir + "/model.pt"));
  (void)std::system(("rm -rf '" + out + "'").c_str());  // not fs::remove_all: libtorch exports a broken one
}

TEST(Config, EveryShippedConfigLoads) {
  // configs/*.toml: a renamed or mistyped key in any of them is an error here, not in a user's run.
  const auto dir = std::filesystem::path(MPIRL_TEST_PY_DIR) / ".." / ".." / "configs";
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".toml") continue;
    ++files;
    EXPECT_EQ(config_error(e.path().string(), {}), "") << e.path();
  }
  EXPECT_GE(files, 7) << "configs/ holds default.toml and at least 6 shipped configs";
  EXPECT_EQ(load_config((dir / "atari_breakout.toml").string(), {}).env.id, "ale:breakout");
}

TEST(Config, AnOlderRunsResolvedConfigLoadsWithNewerKeysAtTheirDefaults) {
  using mpirl::testing::without_key;
  const auto full = load_config("", {"learner.lr=0.0002"}).resolved_toml;
  std::vector<std::string> defaulted;
  const Config c = parse_resolved_config(without_key(without_key(full, "learner.eps"), "actor.param_tests"), &defaulted);
  EXPECT_DOUBLE_EQ(c.learner.eps, load_config("", {}).learner.eps);  // absent: the default
  EXPECT_EQ(c.actor.param_tests, 0);
  EXPECT_DOUBLE_EQ(c.learner.lr, 0.0002);  // present: the run's own value
  EXPECT_EQ(defaulted, (std::vector<std::string>{"actor.param_tests", "learner.eps"}));
  // A key this version does not know (removed since) is ignored, as before.
  std::string newer = full;
  newer.insert(newer.find("[learner]\n") + 10, "no_such_key = 1\n");
  EXPECT_DOUBLE_EQ(parse_resolved_config(newer).learner.lr, 0.0002);
  // Text that lacks a whole section, or env.id, is not a run's config: refused, naming what.
  auto without_section = [&](const std::string& name) {
    const size_t at = full.find("[" + name + "]"), after = full.find("\n[", at + 1);
    return full.substr(0, at) + (after == std::string::npos ? "" : full.substr(after + 1));
  };
  // A run from before [eval] existed: the whole section at its defaults, each key named.
  std::vector<std::string> no_eval;
  EXPECT_DOUBLE_EQ(parse_resolved_config(without_section("eval"), &no_eval).learner.lr, 0.0002);
  EXPECT_EQ(no_eval.size(), 4u);
  EXPECT_EQ(no_eval.front().rfind("eval.", 0), 0u);
  const std::string no_model = without_section("model");
  for (const auto& [text, what] : std::vector<std::pair<std::string, std::string>>{
           {"", "no ["}, {no_model, "no [model] section"}, {without_key(full, "env.id"), "no env.id"}}) {
    try {
      parse_resolved_config(text);
      ADD_FAILURE() << "accepted a text without " << what;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  }
}
