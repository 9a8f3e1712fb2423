// The replay's settings from the config, and their validation on rank 0 before anything starts.
#include "buffer/replay.h"
#include "buffer/replay_config.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "buffer/hdf5_dump.h"
#include "comm/wire.h"
#include "core/error.h"
#include "core/run_dir.h"
#include "envs/registry.h"
#include "models/state_size.h"

namespace mpirl::buffer {
namespace {

// The directory holding `p` ("." for a bare name, "/" for the root), by string: no
// std::filesystem here (LibTorch exports its own copies of some of it).
std::string parent_of(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const size_t k = p.rfind('/');
  if (k == std::string::npos) return ".";
  if (k == 0) return "/";
  return p.substr(0, k);
}

// Empty when `dir` is a writable directory, or does not exist yet and its nearest existing
// ancestor is one (dump_replay creates the missing ones); otherwise why not. Writability is
// tested by creating and removing a probe file: permission bits say nothing to root, a
// read-only mount or a full quota does.
std::string unwritable_dir_reason(const std::string& dir) {
  std::string cur = dir.empty() ? "." : dir;
  for (;;) {
    struct stat st {};
    if (::stat(cur.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode)) return fmt::format("'{}' exists and is not a directory", cur);
      break;
    }
    if (errno != ENOENT && errno != ENOTDIR) return fmt::format("cannot look at '{}': {}", cur, std::strerror(errno));
    const std::string up = parent_of(cur);
    if (up == cur) return fmt::format("'{}' does not exist", cur);
    cur = up;
  }
  const std::string probe = fmt::format("{}/.mpirl-write-probe.{}", cur, ::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return fmt::format("cannot create a file in '{}': {}", cur, std::strerror(errno));
  ::close(fd);
  if (::unlink(probe.c_str()) != 0) return fmt::format("cannot remove a file from '{}': {}", cur, std::strerror(errno));
  return "";
}

// Dumps must be writable where they go, known at start rather than at the end of a long run.
// Runs before create_run_dir (app/train_start.cpp): for the default <run dir>/replay.h5 the run
// directory does not exist yet, so its parent (run.out_dir) is what must take it; the run
// directory itself is left for create_run_dir to create.
void check_dump_path(const Config& cfg) {
  if (cfg.replay.dump != "end") return;  // "never": no dump of any kind is written
  if (!cfg.replay.dump_path.empty()) {
    const std::string& p = cfg.replay.dump_path;
    struct stat st {};
    std::string why = ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode) ? "it is a directory"
                                                                          : unwritable_dir_reason(parent_of(p));
    if (!why.empty())
      throw ConfigError(fmt::format("config key 'replay.dump_path' = \"{}\": replay dumps cannot be written there: {}",
                                    p, why));
    return;
  }
  const std::string parent = parent_of(run_dir_path(cfg));
  std::string why = unwritable_dir_reason(parent);
  if (!why.empty())
    throw ConfigError(fmt::format("config key 'replay.dump_path' = \"\" puts replay dumps in the run directory, but "
                                  "run.out_dir = \"{}\" cannot hold it: {}",
                                  cfg.run.out_dir, why));
}

}  // namespace

ReplayOptions replay_options(const Config& cfg) {
  ReplayOptions o;
  o.capacity = cfg.replay.capacity;
  o.selector = cfg.replay.selector;
  o.max_times_sampled = cfg.replay.max_times_sampled;
  o.min_size_to_sample = cfg.replay.min_size_to_sample > 0 ? cfg.replay.min_size_to_sample : cfg.learner.batch_size;
  o.samples_per_insert = cfg.replay.samples_per_insert;
  o.error_buffer = cfg.replay.error_buffer > 0
                       ? cfg.replay.error_buffer
                       : double(cfg.env.num_envs) * cfg.replay.samples_per_insert + double(cfg.learner.batch_size);
  o.priority_exponent = cfg.replay.priority_exponent;
  o.importance_exponent = cfg.replay.importance_exponent;
  o.importance_anneal_items = cfg.replay.importance_anneal_items;
  o.seed = cfg.run.seed * 7919 + 17;
  o.chunk_rows = cfg.env.num_envs;  // one rollout per chunk: received in place, no copy
  return o;
}

// A chunk holds one whole rollout frame as the actor sends it: the header region, E sequences and
// up to E*T episode statistics.
ReplayOptions server_options(const Config& cfg, const SeqLayout& layout, int shard) {
  auto o = replay_options(cfg);
  // Shards draw independent streams, and each anneals the importance exponent over its share of
  // the samples (about 1/K of them).
  o.seed += uint64_t(shard) * 0x9E3779B97F4A7C15ull;
  if (cfg.roles.replays > 1) o.importance_anneal_items = (o.importance_anneal_items + cfg.roles.replays - 1) / cfg.roles.replays;
  const int64_t E = cfg.env.num_envs;
  o.chunk_bytes = wire::kHeaderRegion + wire::payload_bytes(layout.arrays(E, true, E * layout.T()));
  return o;
}

std::string dump_path(const Config& cfg, const std::string& run_dir) {
  return cfg.replay.dump_path.empty() ? run_dir + "/replay.h5" : cfg.replay.dump_path;
}

std::string shard_dump_path(const Config& cfg, const std::string& run_dir, int shard) {
  const std::string p = dump_path(cfg, run_dir);
  if (cfg.roles.replays <= 1) return p;
  const size_t slash = p.rfind('/'), dot = p.rfind('.');
  const bool ext = dot != std::string::npos && (slash == std::string::npos || dot > slash);
  return fmt::format("{}.shard{}{}", ext ? p.substr(0, dot) : p, shard, ext ? p.substr(dot) : std::string());
}

void validate_replay_config(const Config& cfg) {
  auto o = replay_options(cfg);
  const int64_t B = cfg.learner.batch_size, E = cfg.env.num_envs;
  // fifo always returns the oldest item: with max_times_sampled = 0 or > 1 that is the same item
  // over and over.
  if (o.selector == "fifo" && o.max_times_sampled != 1)
    throw ConfigError(fmt::format("config key 'replay.max_times_sampled' = {}: replay.selector = \"fifo\" is a queue "
                                  "(every item sampled exactly once, oldest first) and needs max_times_sampled = 1; "
                                  "use \"uniform\" or \"prioritized\" to reuse items",
                                  o.max_times_sampled));
  if (o.min_size_to_sample > o.capacity)
    throw ConfigError(fmt::format("config key 'replay.min_size_to_sample' = {}: more than replay.capacity = {}",
                                  o.min_size_to_sample, o.capacity));
  // Queue mode: when no chunk is free, only the oldest may be part-consumed, so at least
  // capacity - E + 1 items are stored; that must allow a sample or inserts and samples deadlock.
  const int64_t rounded = (o.capacity + E - 1) / E * E;
  if (o.queue() && rounded - E + 1 < std::max(B, o.min_size_to_sample))
    throw ConfigError(fmt::format("config key 'replay.capacity' = {}: queue mode needs room for a rollout "
                                  "(env.num_envs = {}) on top of a batch (max(learner.batch_size, "
                                  "replay.min_size_to_sample) = {}), i.e. at least {}",
                                  o.capacity, E, std::max(B, o.min_size_to_sample), std::max(B, o.min_size_to_sample) + E - 1));
  // Removal (max_times_sampled > 0): a batch is drawn only with learner.batch_size items stored
  // (ReplayBuffer::can_sample); load_config already holds learner.batch_size <= replay.capacity.
  if (o.samples_per_insert > 0 && 2 * o.error_buffer < double(E) * o.samples_per_insert + double(B))
    throw ConfigError(fmt::format("config key 'replay.error_buffer' = {}: with samples_per_insert = {} it must be at "
                                  "least (env.num_envs * samples_per_insert + learner.batch_size) / 2 = {} or "
                                  "inserts and samples can block each other forever",
                                  o.error_buffer, o.samples_per_insert,
                                  (double(E) * o.samples_per_insert + double(B)) / 2));
  check_dump_path(cfg);
  if (!cfg.replay.restore.empty() && cfg.roles.replays > 1)
    throw ConfigError(fmt::format("config key 'replay.restore': a dump restores into one replay, and roles.replays = {} "
                                  "starts {} shards; restore with roles.replays = 1",
                                  cfg.roles.replays, cfg.roles.replays));
  if (!cfg.replay.restore.empty()) {
    try {
      auto spec = envs::env_spec(cfg);
      auto layout = SeqLayout(spec, cfg.actor.rollout_len, models::state_size(cfg, spec), seq_layout_priority(cfg));
      auto h = read_dump_header(cfg.replay.restore);
      check_dump_compatible(h, cfg.replay.restore, layout, cfg.env.id, rounded);
    } catch (const ConfigError&) {
      throw;
    } catch (const Error& e) {
      throw ConfigError(fmt::format("config key 'replay.restore': {}", e.what()));
    }
  }
}

}  // namespace mpirl::buffer
