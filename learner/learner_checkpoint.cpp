#include "learner/learner_checkpoint.h"

#include <unistd.h>

#include <array>
#include <fstream>
#include <sstream>

#include <spdlog/spdlog.h>

#include "core/checkpoint.h"
#include "core/clock.h"
#include "core/error.h"
#include "models/policy_file.h"

namespace mpirl::learner {
namespace {

constexpr int kCounts = kLearnerCountFields;

// Clean-up on a failure path: logged, never thrown (the run goes on; the previous checkpoint stays).
void discard(const std::string& dir) {
  try {
    ckpt::remove_tree(dir);
  } catch (const std::exception& e) {
    spdlog::warn("checkpoint clean-up: {}", e.what());
  }
}

}  // namespace

void read_learner_pt(const std::string& path, Trainer& trainer) {
  torch::serialize::InputArchive ar;
  try {
    ar.load_from(path, torch::Device(torch::kCPU));
    trainer.load(ar);
  } catch (const c10::Error& e) {
    throw Error(fmt::format("checkpoint file '{}' does not load: {}", path, e.what_without_backtrace()));
  }
}

LearnerState load_checkpoint(const std::string& dir, Trainer& trainer, const Comms& comms) {
  read_learner_pt(dir + "/learner.pt", trainer);
  const std::string path = dir + "/state.json";
  std::ifstream in(path);
  if (!in) throw Error(fmt::format("cannot open checkpoint file '{}'", path));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    throw Error(fmt::format("checkpoint file '{}' is not JSON: {}", path, e.what()));
  }
  LearnerState s = learner_state_from_json(j, "checkpoint file '" + path + "'");
  if (int(s.counts.size()) != comms.layout.learners)
    throw Error(fmt::format("checkpoint file '{}' has counts of {} learners; this run has {}", path, s.counts.size(),
                            comms.layout.learners));
  s.counts = {s.counts[size_t(comms.rank)]};  // learners are ranks 0..L-1
  return s;
}

double periodic_interval_s(double configured, int hosts) {
  if (configured >= 0) return configured;
  return hosts > 1 ? kClusterCheckpointIntervalS : 0;
}

Checkpointer::Checkpointer(const Config& cfg, const Comms& comms, const RunStart& start, Trainer& trainer,
                           RunController& run, BatchSource& source)
    : cfg_(cfg), comms_(comms), start_(start), trainer_(trainer), run_(run), source_(source), last_(now_seconds()),
      interval_(periodic_interval_s(cfg.run.checkpoint_interval_s, comms.num_hosts())) {
  if (comms_.rank == 0 && enabled() && cfg.run.checkpoint_interval_s < 0)
    spdlog::info("periodic checkpoints: {}", interval_ > 0 ? fmt::format("every {:.0f} s (run.checkpoint_interval_s = "
                                                                         "auto on {} hosts: a lost node costs at most "
                                                                         "that)", interval_, comms.num_hosts())
                                                           : std::string("off (auto on one host)"));
  if (comms_.rank == 0)
    source_.on_checkpoint_done = [this](const ReplayStatus& s) {
      if (!periodic_.tmp.empty()) replay_done(periodic_, s);
    };
}

bool Checkpointer::due(int64_t version) const {
  if (comms_.rank != 0 || !enabled() || !periodic_.tmp.empty()) return false;
  const int64_t every = cfg_.run.checkpoint_every_updates;
  return (interval_ > 0 && now_seconds() - last_ >= interval_) || (every > 0 && version - last_version_ >= every);
}

std::vector<LearnerCounts> Checkpointer::gather_counts() {
  LearnerCounts mine = run_.counts();
  mine.received += source_.items_received();
  auto v = to_array(mine);
  std::vector<int64_t> all(comms_.rank == 0 ? size_t(kCounts * comms_.layout.learners) : 0);
  MPIRL_MPI(MPI_Gather(v.data(), kCounts, MPI_INT64_T, all.data(), kCounts, MPI_INT64_T, 0, comms_.learners));
  std::vector<LearnerCounts> out;
  for (size_t l = 0; l < all.size() / kCounts; ++l) out.push_back(counts_from(all.data() + l * kCounts));
  return out;
}

void Checkpointer::begin(int64_t version, bool final) {
  // Every learner's priorities of the updates before the checkpoint are sent before learner 0
  // asks for it (gather_counts is collective).
  source_.send_pending_priorities();
  auto counts = gather_counts();
  if (comms_.rank != 0) return;
  last_ = now_seconds();
  last_version_ = version;
  InFlight& f = final ? final_ : periodic_;
  try {
    if (!trainer_.parameters_finite())
      throw Error("the parameters are not finite (NaN or inf): a checkpoint is never sealed from them");
    f.tmp = ckpt::begin(start_.run_dir, version, final ? "final" : "periodic");
    std::ostringstream os;
    torch::serialize::OutputArchive ar;
    trainer_.save(ar);
    ar.save_to(os);
    write_file_atomic(f.tmp + "/learner.pt", os.str());
    write_file_atomic(f.tmp + "/config.toml", cfg_.resolved_toml);
    // The policy alone (model.pt, policy.json), as in the run directory: `mpirl eval` and
    // python/mpirl_policy read any checkpoint.
    models::save_policy(f.tmp, trainer_.policy(), trainer_.policy()->spec(), models::model_options(cfg_));
  } catch (const std::exception& e) {
    spdlog::error("checkpoint at update {} failed, the run goes on: {}", version, e.what());
    if (!f.tmp.empty()) discard(f.tmp);
    f = {};
    return;
  }
  f.state = {};
  f.state.version = version;
  f.state.segment = start_.segment;
  f.state.elapsed_s = run_.elapsed();
  // A final checkpoint comes after every row of this run (the last one is written with the
  // summary): a resumed run keeps them all (-1).
  f.state.metrics_bytes = final ? -1 : run_.metrics_bytes();
  f.state.counts = std::move(counts);
  source_.send_checkpoint_request(f.tmp, final);
}

void Checkpointer::replay_done(InFlight& f, const ReplayStatus& s) {
  const auto& k = s.checkpoint;
  std::string tmp = f.tmp;
  f.tmp.clear();
  if (k.dir.empty() || tmp.size() < k.dir.size() || tmp.compare(tmp.size() - k.dir.size(), k.dir.size(), k.dir) != 0 ||
      !k.last_ok) {
    spdlog::error("checkpoint at update {} failed (the replay's part: {}); the previous one stays", f.state.version,
                  k.last_error.empty() ? "not written" : k.last_error);
    discard(tmp);
    return;
  }
  try {
    f.state.window = run_.window();  // the episodes the replay sent before its part: it holds the rest
    f.state.replay = s;
    // Sequences the replay sampled before its part but the learners had not received when theirs
    // was taken (replies in flight at a periodic checkpoint) count as received and not trained,
    // like those drained at a stop: a resumed run's counts still add up.
    for (size_t l = 0; l < f.state.counts.size() && l < s.sampled_by_learner.size(); ++l)
      f.state.counts[l].received = std::max(f.state.counts[l].received, s.sampled_by_learner[l]);
    write_json_atomic(tmp + "/state.json", to_json(f.state));
    last_sealed_ = ckpt::seal(tmp, f.state.version,
                              {{"env_steps", s.env_steps}, {"segment", f.state.segment},
                               {"replay_items", k.items}, {"replay_checksum_crc32", k.checksum}});
    spdlog::info("checkpoint: update {}, {} env steps, {} replay items (CRC-32 {:08x}) -> {}", f.state.version,
                 s.env_steps, k.items, k.checksum, last_sealed_);
    ckpt::prune(start_.run_dir, cfg_.run.keep_checkpoints, periodic_.tmp.empty() ? final_.tmp : periodic_.tmp);
  } catch (const std::exception& e) {
    spdlog::error("checkpoint at update {} failed; the previous one stays: {}", f.state.version, e.what());
    discard(tmp);
  }
}

std::string Checkpointer::finish_final(const ReplayStatus& final_status) {
  auto counts = gather_counts();
  if (comms_.rank != 0 || final_.tmp.empty()) return "";
  final_.state.counts = std::move(counts);
  const std::string before = last_sealed_;
  replay_done(final_, final_status);
  return last_sealed_ != before ? last_sealed_ : "";
}

}  // namespace mpirl::learner
