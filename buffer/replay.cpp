#include "buffer/replay.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <deque>
#include <fstream>

#include <spdlog/spdlog.h>

#include "buffer/hdf5_dump.h"
#include "buffer/replay_buffer.h"
#include "runtime/error.h"
#include "runtime/rollout.h"
#include "runtime/run_setup.h"
#include "runtime/transport.h"
#include "runtime/wire.h"

namespace mpirl::buffer {
namespace {

constexpr size_t kMaxPendingEpisodes = 100000;
std::atomic<bool> g_dump_requested{false};
extern "C" void on_sigusr1(int) { g_dump_requested = true; }

// The largest rollout frame an actor sends: its header region plus E sequences and up to E*T
// episode statistics (actor/actor.cpp).
constexpr size_t kActorHeaderRegion = 4096;

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

ReplayOptions server_options(const Config& cfg, const SeqLayout& layout) {
  auto o = replay_options(cfg);
  const int64_t E = cfg.env.num_envs;
  o.chunk_bytes = kActorHeaderRegion + wire::payload_bytes(layout.arrays(E, true, E * layout.T()));
  return o;
}

struct Counters {
  int64_t rollouts = 0, env_steps = 0, episodes = 0, discarded = 0, restored = 0, dumps = 0;
};

class ReplayServer {
 public:
  ReplayServer(const Config& cfg, const Comms& comms, const std::string& run_dir)
      : cfg_(cfg), comms_(comms), run_dir_(run_dir), spec_(env_spec(cfg)), layout_(seq_layout(cfg, spec_)),
        rb_(layout_, server_options(cfg, layout_)), sampled_by_(size_t(comms.layout.learners), 0),
        last_dump_(now_seconds()) {
    if (!cfg.replay.restore.empty()) {
      auto h = restore_replay(rb_, cfg.replay.restore, cfg.env.id);
      c_.restored = h.items;
      spdlog::info("replay: restored {} items from '{}'", h.items, cfg.replay.restore);
    }
    std::ofstream(run_dir_ + "/replay.pid") << ::getpid() << "\n";
    struct sigaction sa {};
    sa.sa_handler = on_sigusr1;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, nullptr);
  }

  void run() {
    const int L = comms_.layout.learners, A = comms_.layout.actors();
    Backoff backoff;
    while (!(actors_done_ == A && byes_.size() == size_t(L) && acked_)) {
      bool progress = false;
      progress |= handle_learners();
      progress |= handle_actors();
      progress |= serve();
      progress |= maybe_dump();
      if (!acked_ && byes_.size() == size_t(L)) finish_learners();
      sends_.progress();
      if (progress) backoff.reset(); else backoff.idle();
    }
    sends_.wait_all();
    spdlog::debug("replay: done, {} sequences inserted, {} sampled", rb_.counters().inserted, rb_.counters().sampled);
  }

 private:
  void send_small(wire::Kind kind, int dest, int tag, bool with_counters) {
    wire::Envelope env;
    env.kind = kind;
    env.sender = comms_.rank;
    env.seq = seq_++;
    if (with_counters) fill_meta(env);
    auto& buf = sends_.acquire();
    buf = wire::build_frame(env, nullptr, 0);
    sends_.send(buf, buf.size(), dest, tag, comms_.world);
  }

  void fill_meta(wire::Envelope& env) const {
    const auto& r = rb_.counters();
    env.meta = {{"env_steps", double(c_.env_steps)},
                {"rollouts", double(c_.rollouts)},
                {"episodes", double(c_.episodes)},
                {"discarded_rollouts", double(c_.discarded)},
                {"inserted", double(r.inserted)},
                {"restored", double(c_.restored)},
                {"evicted", double(r.evicted)},
                {"consumed", double(r.consumed)},
                {"removed", double(r.removed())},
                {"fill", double(rb_.size())},
                {"capacity", double(rb_.capacity())},
                {"sampled", double(r.sampled)},
                {"batches", double(r.batches)},
                {"priority_updates", double(r.priority_updates)},
                {"stale_priority_updates", double(r.stale_priority_updates)},
                {"max_priority", rb_.max_priority()},
                {"dumps", double(c_.dumps)}};
    for (size_t l = 0; l < sampled_by_.size(); ++l) env.meta[fmt::format("sampled_by_learner_{}", l)] = double(sampled_by_[l]);
    if (c_.dumps > 0) {
      env.meta["dump_items"] = double(last_dump_info_.items);
      env.meta["dump_checksum_crc32"] = double(last_dump_info_.checksum);
      env.meta["dump_seconds"] = last_dump_info_.seconds;
    }
  }

  bool handle_learners() {
    bool any = false;
    size_t n = 0;
    int src;
    while ((src = try_recv(comms_.world, MPI_ANY_SOURCE, kTagLearnerReq, rbuf_, &n)) >= 0) {
      any = true;
      auto msg = wire::decode(rbuf_.data(), n, src,
                              {wire::Kind::SampleRequest, wire::Kind::LearnerBye, wire::Kind::PriorityUpdate});
      if (comms_.layout.role_of(src) != Role::Learner)
        throw Error(fmt::format("replay: {} from rank {}, which is not a learner", wire::kind_name(msg.env.kind), src));
      switch (msg.env.kind) {
        case wire::Kind::SampleRequest:
          if (!stopping_) pending_.push_back(src);
          break;
        case wire::Kind::PriorityUpdate: apply_priorities(msg, src); break;
        default:  // LearnerBye: acknowledged once every learner has left and the final dump is done
          byes_.push_back(src);
          stopping_ = true;
          std::erase(pending_, src);
      }
    }
    return any;
  }

  void apply_priorities(const wire::Message& msg, int src) {
    const auto& a = msg.env.arrays;
    auto bad = [&](const std::string& what) {
      throw Error(fmt::format("PriorityUpdate from rank {} is malformed: {}", src, what));
    };
    if (a.size() != 3 || a[0].name != "slot" || a[1].name != "generation" || a[2].name != "priority") bad("expected arrays slot, generation, priority");
    if (a[0].dtype != wire::DType::I64 || a[1].dtype != wire::DType::I64 || a[2].dtype != wire::DType::F32) bad("expected i64, i64, f32");
    if (a[0].shape.size() != 1 || a[1].shape != a[0].shape || a[2].shape != a[0].shape) bad("arrays differ in shape");
    rb_.update_priorities(msg.array<int64_t>(0), msg.array<int64_t>(1), msg.array<float>(2), a[0].shape[0]);
  }

  // Receives the next message from `src` (probed, `count` bytes): a rollout goes straight into a
  // reserved replay chunk (no copy), anything else into rbuf_.
  bool handle_actors() {
    bool any = false;
    const int64_t E = cfg_.env.num_envs;
    // Actors are polled in turn (not MPI_ANY_SOURCE): when the limiter admits one rollout at a
    // time, any-source matching keeps serving the same actor and starves the others.
    const int A = comms_.layout.actors();
    for (int tried = 0; tried < A && (stopping_ || rb_.can_insert_chunk());) {
      int src = comms_.layout.first_actor() + next_actor_;
      next_actor_ = (next_actor_ + 1) % A;
      int flag = 0, count = 0;
      MPI_Status st;
      MPIRL_MPI(MPI_Iprobe(src, kTagRollout, comms_.world, &flag, &st));
      if (!flag) {
        ++tried;
        continue;
      }
      tried = 0;
      any = true;
      MPIRL_MPI(MPI_Get_count(&st, MPI_BYTE, &count));
      const bool into_chunk = !stopping_ && size_t(count) <= rb_.chunk_bytes();
      char* buf;
      if (into_chunk) {
        buf = rb_.reserve_chunk();
      } else {
        if (rbuf_.size() < size_t(count)) rbuf_.resize(size_t(count));
        buf = rbuf_.data();
      }
      MPIRL_MPI(MPI_Recv(buf, count, MPI_BYTE, src, kTagRollout, comms_.world, MPI_STATUS_IGNORE));
      wire::Message msg;
      try {
        msg = wire::decode(buf, size_t(count), src, {wire::Kind::Rollout, wire::Kind::ActorDone});
      } catch (...) {
        if (into_chunk) rb_.release_chunk();
        throw;
      }
      if (msg.env.kind == wire::Kind::ActorDone) {
        if (into_chunk) rb_.release_chunk();
        ++actors_done_;
        send_small(wire::Kind::ActorDoneAck, src, kTagActorCtl, false);
        continue;
      }
      int64_t rows = layout_.check(msg, src);
      if (rows != E) throw Error(fmt::format("rollout from rank {} holds {} envs, expected env.num_envs = {}", src, rows, E));
      int ir = msg.find("episode_return"), il = msg.find("episode_length");
      if (ir < 0 || il < 0 || msg.desc(size_t(ir)).elements() != msg.desc(size_t(il)).elements())
        throw Error(fmt::format("rollout from rank {} lacks consistent episode statistics", src));
      if (!into_chunk) {
        if (!stopping_)
          throw Error(fmt::format("rollout from rank {} is {} bytes, more than the {} a rollout can take", src, count,
                                  rb_.chunk_bytes()));
        ++c_.discarded;
      } else {
        size_t m = msg.desc(size_t(ir)).elements();
        const float* r = msg.array<float>(size_t(ir));
        const int32_t* l = msg.array<int32_t>(size_t(il));
        for (size_t k = 0; k < m; ++k) {
          ep_returns_.push_back(r[k]);
          ep_lengths_.push_back(l[k]);
        }
        while (ep_returns_.size() > kMaxPendingEpisodes) {
          ep_returns_.pop_front();
          ep_lengths_.pop_front();
        }
        rb_.commit_chunk(size_t(msg.payload - buf), rows);
        ++c_.rollouts;
        c_.env_steps += rows * layout_.T();
        c_.episodes += int64_t(m);
      }
      send_small(wire::Kind::RolloutAck, src, kTagActorCtl, false);
    }
    return any;
  }

  bool serve() {
    bool any = false;
    const int64_t B = cfg_.learner.batch_size;
    while (!stopping_ && !pending_.empty() && rb_.can_sample(B)) {
      any = true;
      int dest = pending_.front();
      pending_.pop_front();
      bool stats = dest == 0;
      int64_t m = stats ? int64_t(ep_returns_.size()) : 0;
      wire::Envelope env;
      env.kind = wire::Kind::SampleReply;
      env.sender = comms_.rank;
      env.seq = seq_++;
      env.arrays = layout_.arrays(B, true, m);
      env.arrays.push_back({"slot", wire::DType::I64, {B}});
      env.arrays.push_back({"generation", wire::DType::I64, {B}});
      env.arrays.push_back({"weight", wire::DType::F32, {B}});
      fill_meta(env);  // sized now (same keys after sampling, so the envelope keeps its size)
      size_t off = wire::natural_payload_offset(env);
      std::vector<size_t> offsets;
      size_t total = off + wire::payload_bytes(env.arrays, &offsets);
      auto& buf = sends_.acquire();
      buf.resize(total);
      char* payload = buf.data() + off;
      auto s = rb_.sample(B, payload);
      sampled_by_[size_t(dest)] += B;
      fill_meta(env);
      wire::write_header(buf.data(), off, env);
      const size_t nf = layout_.fields().size();
      for (int64_t k = 0; k < m; ++k) {
        reinterpret_cast<float*>(payload + offsets[nf])[k] = ep_returns_[size_t(k)];
        reinterpret_cast<int32_t*>(payload + offsets[nf + 1])[k] = ep_lengths_[size_t(k)];
      }
      std::memcpy(payload + offsets[nf + 2], s.slots.data(), size_t(B) * 8);
      std::memcpy(payload + offsets[nf + 3], s.generations.data(), size_t(B) * 8);
      std::memcpy(payload + offsets[nf + 4], s.weights.data(), size_t(B) * 4);
      if (stats) {
        ep_returns_.clear();
        ep_lengths_.clear();
      }
      sends_.send(buf, total, dest, kTagLearnerReply, comms_.world);
    }
    return any;
  }

  void dump(const char* why) {
    last_dump_info_ = dump_replay(rb_, dump_path(cfg_, run_dir_), cfg_.env.id, cfg_.resolved_toml);
    ++c_.dumps;
    last_dump_ = now_seconds();
    spdlog::info("replay dump ({}): {} items, CRC-32 {:08x}, {:.2f} s -> {}", why, last_dump_info_.items,
                 last_dump_info_.checksum, last_dump_info_.seconds, last_dump_info_.path);
  }

  bool maybe_dump() {
    if (cfg_.replay.dump == "never") return false;
    if (g_dump_requested.exchange(false)) {
      dump("SIGUSR1");
      return true;
    }
    if (cfg_.replay.dump_interval_s > 0 && !stopping_ && now_seconds() - last_dump_ >= cfg_.replay.dump_interval_s) {
      dump("interval");
      return true;
    }
    return false;
  }

  // Every learner has left: final dump, then the acks (with the counters and the dump's checksum).
  void finish_learners() {
    if (cfg_.replay.dump == "end") dump("end of run");
    for (int l : byes_) send_small(wire::Kind::LearnerByeAck, l, kTagLearnerReply, true);
    acked_ = true;
  }

  const Config& cfg_;
  const Comms& comms_;
  std::string run_dir_;
  envs::EnvSpec spec_;
  SeqLayout layout_;
  ReplayBuffer rb_;
  SendPool sends_;
  std::vector<char> rbuf_;
  std::deque<int> pending_;
  std::deque<float> ep_returns_;
  std::deque<int32_t> ep_lengths_;
  std::vector<int64_t> sampled_by_;
  std::vector<int> byes_;
  Counters c_;
  DumpInfo last_dump_info_;
  double last_dump_;
  uint64_t seq_ = 0;
  bool stopping_ = false, acked_ = false;
  int actors_done_ = 0, next_actor_ = 0;
};

}  // namespace

std::string dump_path(const Config& cfg, const std::string& run_dir) {
  return cfg.replay.dump_path.empty() ? run_dir + "/replay.h5" : cfg.replay.dump_path;
}

void validate_replay_config(const Config& cfg) {
  auto o = replay_options(cfg);
  const int64_t B = cfg.learner.batch_size, E = cfg.env.num_envs;
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
  if (o.samples_per_insert > 0 && 2 * o.error_buffer < double(E) * o.samples_per_insert + double(B))
    throw ConfigError(fmt::format("config key 'replay.error_buffer' = {}: with samples_per_insert = {} it must be at "
                                  "least (env.num_envs * samples_per_insert + learner.batch_size) / 2 = {} or "
                                  "inserts and samples can block each other forever",
                                  o.error_buffer, o.samples_per_insert,
                                  (double(E) * o.samples_per_insert + double(B)) / 2));
  if (!cfg.replay.restore.empty()) {
    try {
      auto spec = env_spec(cfg);
      auto layout = seq_layout(cfg, spec);
      auto h = read_dump_header(cfg.replay.restore);
      check_dump_compatible(h, cfg.replay.restore, layout, cfg.env.id, rounded);
    } catch (const ConfigError&) {
      throw;
    } catch (const Error& e) {
      throw ConfigError(fmt::format("config key 'replay.restore': {}", e.what()));
    }
  }
}

void run_replay(const Config& cfg, const Comms& comms, const std::string& run_dir) {
  ReplayServer(cfg, comms, run_dir).run();
}

}  // namespace mpirl::buffer
