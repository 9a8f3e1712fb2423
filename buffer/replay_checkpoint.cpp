#include "buffer/replay_checkpoint.h"

#include <cstdint>
#include <fstream>
#include <sstream>

#include <spdlog/spdlog.h>

#include "core/text.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/json_read.h"
#include "core/fault.h"
#include "core/run_dir.h"

namespace mpirl {

// Field-by-field JSON of the status types (also what the summary's "replay" object shows).
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(DumpStatus, dumps, failures, items, checksum, seconds, path, last_error)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(CheckpointStatus, requests, completed, failures, items, checksum, seconds, last_ok,
                                   dir, last_error)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ReplayStatus, env_steps, actor_env_steps, rollouts, discarded_rollouts, episodes,
                                   inserted, restored, evicted, consumed, fill, capacity, restored_seq_end, sampled,
                                   batches, priority_updates, stale_priority_updates, max_priority, sampled_by_learner,
                                   dump, checkpoint)

namespace buffer {

DumpInfo write_replay_checkpoint(const ReplayBuffer& rb, const ReplayCheckpoint& st, const std::string& dir,
                                 const std::string& env_id, const std::string& config) {
  return write_replay_checkpoint(DumpSnapshot::of(rb), st, dir, env_id, config);
}

std::string part_name(int shard) { return shard == 0 ? "replay" : fmt::format("replay.shard{}", shard); }

DumpInfo write_replay_checkpoint(const DumpSnapshot& items, const ReplayCheckpoint& st, const std::string& dir,
                                 const std::string& env_id, const std::string& config, const DumpOptions& opts,
                                 const std::string& part) {
  const auto& b = st.buffer;
  nlohmann::json j = {{"status", nlohmann::json(st.status)},
                      {"pending_episode_returns", st.returns},
                      {"pending_episode_lengths", st.lengths},
                      {"dropped_episode_stats", st.dropped},
                      {"buffer",
                       {{"inserted", b.counters.inserted},
                        {"evicted", b.counters.evicted},
                        {"consumed", b.counters.consumed},
                        {"sampled", b.counters.sampled},
                        {"batches", b.counters.batches},
                        {"priority_updates", b.counters.priority_updates},
                        {"stale_priority_updates", b.counters.stale_priority_updates},
                        {"next_seq", b.next_seq},
                        {"limiter_inserts", b.limiter_inserts},
                        {"limiter_samples", b.limiter_samples},
                        {"max_priority", b.max_priority},
                        {"rng", b.rng}}}};
  auto info = dump_replay(items, dir + "/" + part + ".h5", env_id, config, opts);
  kill_point("replay_part");
  j["items"] = info.items;
  j["checksum_crc32"] = info.checksum;
  write_json_atomic(dir + "/" + part + "_state.json", j);
  return info;
}

DumpInfo write_checkpoint_part(const DumpSnapshot& items, const ReplayCheckpoint& st, const std::string& dir,
                               const Config& cfg, CheckpointStatus& k, const DumpOptions& opts,
                               const std::string& part) {
  ++k.requests;
  k.last_ok = false;
  k.dir = utf8_suffix(dir, kMaxStatusString);
  const double t0 = now_seconds();
  try {
    auto info = write_replay_checkpoint(items, st, dir, cfg.env.id, cfg.resolved_toml, opts, part);
    ++k.completed;
    k.last_ok = true;
    k.items = info.items;
    k.checksum = info.checksum;
    k.seconds = now_seconds() - t0;
    spdlog::info("replay: checkpoint part written: {} items, CRC-32 {:08x}, {:.2f} s -> {}", info.items, info.checksum,
                 k.seconds, dir);
    return info;
  } catch (const std::exception& e) {
    ++k.failures;
    k.last_error = utf8_prefix(e.what(), kMaxStatusString);
    spdlog::error("replay: checkpoint part failed: {}", e.what());
  }
  return {};
}

ReplayCheckpoint resume_from_checkpoint(ReplayBuffer& rb, const RunStart& start, const std::string& env_id,
                                        const DumpOptions& opts, const std::string& part) {
  auto st = read_replay_checkpoint(rb, start.resume_from, env_id, opts, part);
  st.status.dump = {};
  st.status.checkpoint = {};
  spdlog::info("replay: resumed {} items ({} env steps, {} pending episode statistics) from '{}'", rb.size(),
               st.status.env_steps, st.returns.size(), start.resume_from);
  append_json_line(start.run_dir + "/resumed.jsonl",
                   {{"role", "replay"}, {"part", part}, {"segment", start.segment}, {"checkpoint", start.resume_from},
                    {"replay_items", rb.size()}, {"replay_checksum_crc32", st.checksum},
                    {"env_steps", st.status.env_steps}, {"episodes", st.status.episodes},
                    {"rollouts", st.status.rollouts}, {"inserted", rb.counters().inserted},
                    {"pending_episode_stats", st.returns.size()}, {"dropped_episode_stats", st.dropped}});
  return st;
}

ReplayCheckpoint replay_state_from_json(const nlohmann::json& j, const std::string& path) {
  ReplayCheckpoint st;
  check_json_numbers(j, fmt::format("checkpoint file '{}'", path));
  try {
    st.status = j.at("status").get<ReplayStatus>();
    st.returns = j.at("pending_episode_returns").get<std::vector<float>>();
    for (int64_t v : j.at("pending_episode_lengths").get<std::vector<int64_t>>()) {
      if (v < 0 || v > INT32_MAX) throw Error(fmt::format("a pending episode length of {}", v));
      st.lengths.push_back(int32_t(v));
    }
    const auto& b = j.at("buffer");
    auto& r = st.buffer;
    r.counters.inserted = b.at("inserted");
    r.counters.evicted = b.at("evicted");
    r.counters.consumed = b.at("consumed");
    r.counters.sampled = b.at("sampled");
    r.counters.batches = b.at("batches");
    r.counters.priority_updates = b.at("priority_updates");
    r.counters.stale_priority_updates = b.at("stale_priority_updates");
    r.next_seq = b.at("next_seq");
    r.limiter_inserts = b.at("limiter_inserts");
    r.limiter_samples = b.at("limiter_samples");
    r.max_priority = b.at("max_priority");
    r.rng = b.at("rng");
    if (st.returns.size() != st.lengths.size()) throw Error("pending episode returns and lengths differ in number");
    // Absent from checkpoints written before it was counted: none dropped then, or not known.
    st.dropped = j.value("dropped_episode_stats", int64_t(0));
    if (st.dropped < 0) throw Error(fmt::format("dropped_episode_stats is {}", st.dropped));
    st.items = j.value("items", int64_t(-1));
    st.checksum = j.value("checksum_crc32", uint32_t(0));
  } catch (const std::exception& e) {
    throw Error(fmt::format("checkpoint file '{}' is malformed: {}", path, e.what()));
  }
  return st;
}

ReplayCheckpoint read_replay_checkpoint(ReplayBuffer& rb, const std::string& dir, const std::string& env_id,
                                        const DumpOptions& opts, const std::string& part) {
  const std::string path = dir + "/" + part + "_state.json";
  nlohmann::json j;
  try {
    std::ifstream in(path);
    if (!in) throw Error("cannot open it");
    j = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    throw Error(fmt::format("checkpoint file '{}': {}", path, e.what()));
  }
  ReplayCheckpoint st = replay_state_from_json(j, path);
  auto h = restore_replay(rb, dir + "/" + part + ".h5", env_id, opts);
  if (h.items != st.items || h.checksum != st.checksum)
    throw Error(fmt::format("checkpoint '{}': {}.h5 holds {} items with CRC-32 {:08x}, {}_state.json says {} "
                            "and {:08x}", dir, part, h.items, h.checksum, part, st.items, st.checksum));
  rb.resume(st.buffer);
  st.checksum = h.checksum;
  return st;
}

}  // namespace buffer
}  // namespace mpirl
