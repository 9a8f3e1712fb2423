// Run checkpoints: the learner's part round-trips bit for bit (parameters, optimizer moments and
// step counts, so the next update is the same), the directory protocol (sealed, verified, a
// partial or corrupt checkpoint skipped for the previous complete one, pruning), the counters in
// state.json, and the config keys a resume may change.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "core/checkpoint.h"
#include "core/config.h"
#include "tests/common/config_text.h"
#include "core/error.h"
#include "core/run_dir.h"
#include "envs/registry.h"
#include "learner/learner_checkpoint.h"
#include "learner/trainer.h"
#include "tests/common/train_batches.h"

using namespace mpirl;
using namespace mpirl::learner;
using mpirl::testing::params_of;
using mpirl::testing::random_batch;

namespace {

bool bit_equal(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!torch::equal(a[i], b[i])) return false;
  return true;
}

std::string save(Trainer& t) {
  torch::serialize::OutputArchive ar;
  t.save(ar);
  std::ostringstream os;
  ar.save_to(os);
  return os.str();
}

void load(Trainer& t, const std::string& bytes) {
  std::istringstream is(bytes);
  torch::serialize::InputArchive ar;
  ar.load_from(is);
  t.load(ar);
}

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/mpirl-ckpt-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() { (void)std::system(("rm -rf '" + path + "'").c_str()); }
};

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// A checkpoint directory with every required file, sealed at `version`.
std::string make_checkpoint(const std::string& run, int64_t version, const std::string& content) {
  auto tmp = ckpt::begin(run, version);
  for (const auto& f : ckpt::required_files()) write(tmp + "/" + f, content + f);
  return ckpt::seal(tmp, version, {{"env_steps", version * 10}});
}

}  // namespace

TEST(Checkpoint, TrainerRoundTripIsBitExactAndTheNextUpdateToo) {
  for (const char* opt : {"adam", "rmsprop"})
    for (const char* core : {"none", "lru"}) {
      SCOPED_TRACE(std::string(opt) + " " + core);
      Config cfg = load_config("", {std::string("learner.optimizer=\"") + opt + "\"",
                                    std::string("model.core=\"") + core + "\"", "model.core_state=4",
                                    "model.core_size=8", "learner.rmsprop_momentum=0.9"});
      auto spec = envs::env_spec(cfg);
      NoReducer none;
      const int64_t T = 5, B = 4, D = spec.obs_size(), A = spec.num_actions, S = models::state_size(cfg, spec);
      torch::manual_seed(1);
      Trainer a(cfg, spec, torch::kCPU, none);
      for (uint64_t k = 0; k < 3; ++k) {
        auto b = random_batch(T, B, D, A, S, 100 + k);
        a.update(b, {});
      }
      const std::string bytes = save(a);
      torch::manual_seed(2);  // different initial parameters: the load must replace them
      Trainer b(cfg, spec, torch::kCPU, none);
      ASSERT_FALSE(bit_equal(params_of(a), params_of(b)));
      load(b, bytes);
      EXPECT_TRUE(bit_equal(params_of(a), params_of(b)));
      // The next update is the same on both.
      auto n1 = random_batch(T, B, D, A, S, 7), n2 = random_batch(T, B, D, A, S, 7);
      a.update(n1, {});
      b.update(n2, {});
      EXPECT_TRUE(bit_equal(params_of(a), params_of(b)));
      // Control: parameters alone, without the optimizer state, give a different next update.
      torch::manual_seed(3);
      Trainer c(cfg, spec, torch::kCPU, none);
      {
        torch::NoGradGuard g;
        auto pa = params_of(a), pc = c.policy()->parameters();
        for (size_t i = 0; i < pa.size(); ++i) pc[i].copy_(pa[i]);
      }
      auto n3 = random_batch(T, B, D, A, S, 8), n4 = random_batch(T, B, D, A, S, 8);
      a.update(n3, {});
      c.update(n4, {});
      EXPECT_FALSE(bit_equal(params_of(a), params_of(c)));
    }
}

// learner.pt is read onto the CPU whatever the learner's device. Read onto the trainer's device
// (the code before, on every GPU resume), the RNG states arrive as device tensors and set_state
// refuses them ("RNG state must be a torch.ByteTensor"). No GPU here: the meta device stands in
// for one to show that mechanism; read_learner_pt itself is checked on a CPU trainer (bit-exact).
TEST(Checkpoint, LearnerPtIsReadOntoTheCpu) {
  Config cfg = load_config("", {});
  auto spec = envs::env_spec(cfg);
  NoReducer none;
  torch::manual_seed(1);
  Trainer a(cfg, spec, torch::kCPU, none);
  auto batch = random_batch(5, 4, spec.obs_size(), spec.num_actions, 0, 3);
  a.update(batch, {});
  TempDir dir;
  const std::string path = dir.path + "/learner.pt";
  {
    torch::serialize::OutputArchive ar;
    a.save(ar);
    ar.save_to(path);
  }
  // The mechanism of the GPU failure: RNG states read onto another device cannot be set.
  torch::serialize::InputArchive on_device, on_cpu;
  on_device.load_from(path, torch::Device(torch::kMeta));
  on_cpu.load_from(path, torch::Device(torch::kCPU));
  torch::Tensor rng_device, rng_cpu;
  on_device.read("rng_cpu", rng_device);
  on_cpu.read("rng_cpu", rng_cpu);
  at::Generator g = at::detail::createCPUGenerator();
  EXPECT_THROW(g.set_state(rng_device), c10::Error);
  EXPECT_NO_THROW(g.set_state(rng_cpu));
  // read_learner_pt restores a trainer bit for bit.
  torch::manual_seed(2);
  Trainer b(cfg, spec, torch::kCPU, none);
  ASSERT_FALSE(bit_equal(params_of(a), params_of(b)));
  read_learner_pt(path, b);
  EXPECT_TRUE(bit_equal(params_of(a), params_of(b)));
  // A file that is not an archive is named.
  write(dir.path + "/bad.pt", "not a zip archive");
  try {
    read_learner_pt(dir.path + "/bad.pt", b);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.pt"), std::string::npos) << e.what();
  }
}

TEST(Checkpoint, SealedIsLoadedPartialAndCorruptAreSkipped) {
  TempDir run;
  EXPECT_TRUE(ckpt::latest(run.path).dir.empty());
  const auto first = make_checkpoint(run.path, 10, "one");
  EXPECT_EQ(ckpt::verify(first), "");
  auto l = ckpt::latest(run.path);
  EXPECT_EQ(l.dir, first);
  EXPECT_EQ(l.info["version"], 10);
  EXPECT_EQ(l.info["env_steps"], 100);

  // A newer one whose learner.pt changed after sealing (same size): corrupt, skipped.
  const auto second = make_checkpoint(run.path, 20, "two");
  write(second + "/learner.pt", "twX" + std::string("learner.pt"));
  // A newer one still without COMPLETE (a killed writer's rename cannot happen, but a copy can).
  const auto third = ckpt::begin(run.path, 30);
  for (const auto& f : ckpt::required_files()) write(third + "/" + f, "three");
  ASSERT_EQ(::mkdir((ckpt::checkpoints_dir(run.path) + "/ckpt-000000000040-0000000000000").c_str(), 0755), 0);
  l = ckpt::latest(run.path);
  EXPECT_EQ(l.dir, first);
  ASSERT_EQ(l.skipped.size(), 2u);  // the ckpt-…40 without COMPLETE, the corrupt …20 (tmp dirs are not candidates)
  EXPECT_NE(l.skipped[0].find("no COMPLETE marker"), std::string::npos) << l.skipped[0];
  EXPECT_NE(l.skipped[1].find("learner.pt has CRC-32"), std::string::npos) << l.skipped[1];
  // A file missing or of another size.
  ::unlink((first + "/replay.h5").c_str());
  EXPECT_NE(ckpt::verify(first).find("replay.h5"), std::string::npos);
  write(first + "/replay.h5", "onereplay.h5 and more");
  EXPECT_NE(ckpt::verify(first).find("bytes"), std::string::npos);
  EXPECT_TRUE(ckpt::latest(run.path).dir.empty());
}

TEST(Checkpoint, EveryFileHasACrcAndAFlippedReplayByteFallsBackToThePreviousOne) {
  TempDir run;
  const auto first = make_checkpoint(run.path, 10, "one");
  const auto second = make_checkpoint(run.path, 20, "two");
  std::ifstream in(second + "/COMPLETE");
  const auto c = nlohmann::json::parse(in);
  for (const auto& f : ckpt::required_files())
    EXPECT_TRUE(c["files"][f].contains("crc32")) << f << " has no CRC in COMPLETE";
  // One byte of replay.h5 flipped, same size: the sizes-only check passes, the CRC does not.
  std::string bytes;
  {
    std::ifstream r(second + "/replay.h5", std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(r), {});
  }
  bytes[1] ^= 0x01;
  write(second + "/replay.h5", bytes);
  EXPECT_EQ(ckpt::verify(second, /*deep=*/false), "");
  EXPECT_NE(ckpt::verify(second).find("replay.h5 has CRC-32"), std::string::npos) << ckpt::verify(second);
  const auto l = ckpt::latest(run.path);
  EXPECT_EQ(l.dir, first);
  ASSERT_EQ(l.skipped.size(), 1u);
  EXPECT_NE(l.skipped[0].find(second), std::string::npos);
  // A checkpoint sealed before replay.h5 had a CRC (size only in COMPLETE) still verifies.
  nlohmann::json old = c;
  old["files"]["replay.h5"].erase("crc32");
  old["files"]["replay.h5"]["bytes"] = int64_t(bytes.size());
  write(second + "/COMPLETE", old.dump());
  EXPECT_EQ(ckpt::verify(second), "");
}

TEST(Checkpoint, PruneRemovesAFailedCheckpointOnceANewerOneVerifies) {
  TempDir run;
  const auto a = make_checkpoint(run.path, 1, "a");
  const auto b = make_checkpoint(run.path, 2, "b");
  ::unlink((b + "/COMPLETE").c_str());  // b failed: it never counts, and stays while it is the newest
  ckpt::prune(run.path, 2);
  struct stat st {};
  EXPECT_EQ(::stat(a.c_str(), &st), 0);
  EXPECT_EQ(::stat(b.c_str(), &st), 0);
  const auto c = make_checkpoint(run.path, 3, "c");  // a newer one seals: the failed one goes
  ckpt::prune(run.path, 2);
  EXPECT_NE(::stat(b.c_str(), &st), 0);
  EXPECT_EQ(::stat(a.c_str(), &st), 0);
  EXPECT_EQ(::stat(c.c_str(), &st), 0);
}

TEST(Checkpoint, PruneKeepsTheNewestAndRemovesStaleTemporaries) {
  TempDir run;
  std::vector<std::string> made;
  for (int v = 1; v <= 4; ++v) made.push_back(make_checkpoint(run.path, v, "x"));
  const auto stale = ckpt::begin(run.path, 5), in_flight = ckpt::begin(run.path, 6);
  ckpt::prune(run.path, 2, in_flight);
  struct stat st {};
  EXPECT_NE(::stat(made[0].c_str(), &st), 0);
  EXPECT_NE(::stat(made[1].c_str(), &st), 0);
  EXPECT_EQ(::stat(made[2].c_str(), &st), 0);
  EXPECT_EQ(::stat(made[3].c_str(), &st), 0);
  EXPECT_NE(::stat(stale.c_str(), &st), 0);
  EXPECT_EQ(::stat(in_flight.c_str(), &st), 0);
}

TEST(Checkpoint, ResumeRefusesUnsafeConfigChangesNamingTheKey) {
  const auto before = load_config("", {}).resolved_toml;
  // Stop conditions, intervals and the device may change; run.name/out_dir are not compared.
  EXPECT_NO_THROW(ckpt::check_resume_config(
      before,
      load_config("", {"run.total_env_steps=99", "run.max_wall_seconds=5", "run.log_interval_s=1",
                       "learner.device=\"cpu\"", "run.name=\"other\"", "run.checkpoint_interval_s=30"})
          .resolved_toml,
      "runs/x"));
  for (const char* change : {"learner.lr=0.1", "model.hidden=[32]", "env.num_envs=4", "roles.learners=2",
                             "replay.capacity=512", "run.seed=7"}) {
    const std::string key = std::string(change).substr(0, std::string(change).find('='));
    try {
      ckpt::check_resume_config(before, load_config("", {change}).resolved_toml, "runs/x");
      ADD_FAILURE() << change << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("'" + key + "' changed"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("runs/x"), std::string::npos) << e.what();
    }
  }
  auto ch = config_changes(before, load_config("", {"learner.lr=0.0001"}).resolved_toml);
  ASSERT_EQ(ch.size(), 1u);
  EXPECT_EQ(ch[0].key, "learner.lr");
  EXPECT_EQ(ch[0].after, "0.0001");
}

TEST(Checkpoint, AKeyNewerThanTheCheckpointResumesOnlyWhenItMayChange) {
  // A checkpoint written before actor.param_tests existed resumes: the key may change on resume.
  using mpirl::testing::without_key;
  const auto now = load_config("", {}).resolved_toml;
  EXPECT_NO_THROW(ckpt::check_resume_config(without_key(now, "actor.param_tests"), now, "runs/x"));
  // One written before learner.eps existed is refused even at today's default: the default need
  // not be what the code did before (learner.pg_rho_bar came as 1, the old behaviour, then became 10).
  try {
    ckpt::check_resume_config(without_key(now, "learner.eps"), now, "runs/x");
    ADD_FAILURE() << "a newer key that may not change on resume was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'learner.eps' changed from (absent)"), std::string::npos) << e.what();
  }
}

TEST(Checkpoint, LearnerStateRoundTripsAndMalformedIsNamed) {
  LearnerState s;
  s.version = 1234;
  s.segment = 2;
  s.elapsed_s = 56.5;
  s.metrics_bytes = 789;
  s.counts = {{1, 2, 3, 4, 5, 6, 7, 8, 9}, {10, 20, 30, 40, 50, 60, 70, 80, 90}};
  s.window = {{1.5, 2.5}, {10, 20}, 42};
  s.replay.env_steps = 99999;
  auto j = to_json(s);
  auto r = learner_state_from_json(j, "state.json");
  EXPECT_EQ(r.version, 1234);
  EXPECT_EQ(r.segment, 2);
  EXPECT_EQ(r.elapsed_s, 56.5);
  EXPECT_EQ(r.metrics_bytes, 789);
  ASSERT_EQ(r.counts.size(), 2u);
  EXPECT_EQ(r.counts[1].received, 10);
  EXPECT_EQ(r.counts[1].bootstraps, 90);
  EXPECT_EQ(r.counts[0].updates, 6);
  EXPECT_EQ(r.window.returns, s.window.returns);
  EXPECT_EQ(r.window.lengths, s.window.lengths);
  EXPECT_EQ(r.window.episodes, 42);
  EXPECT_EQ(r.replay.env_steps, 99999);
  j.erase("elapsed_s");
  try {
    learner_state_from_json(j, "checkpoint file 'x/state.json'");
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("x/state.json"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("elapsed_s"), std::string::npos) << e.what();
  }
}
