#include "buffer/replay.h"

#include <deque>

#include <spdlog/spdlog.h>

#include "buffer/sequence_queue.h"
#include "runtime/error.h"
#include "runtime/rollout.h"
#include "runtime/run_setup.h"
#include "runtime/transport.h"
#include "runtime/wire.h"

namespace mpirl::buffer {
namespace {

constexpr size_t kMaxPendingEpisodes = 100000;

struct Counters {
  int64_t rollouts = 0, inserted = 0, env_steps = 0, batches = 0, sampled = 0, episodes = 0, discarded = 0;
};

class ReplayServer {
 public:
  ReplayServer(const Config& cfg, const Comms& comms)
      : cfg_(cfg), comms_(comms), spec_(env_spec(cfg)), layout_(seq_layout(cfg, spec_)),
        queue_(layout_, cfg.replay.capacity) {}

  void run() {
    const int L = comms_.layout.learners, A = comms_.layout.actors();
    Backoff backoff;
    while (!(stopping_ && actors_done_ == A && learners_bye_ == L)) {
      bool progress = false;
      progress |= handle_learners();
      progress |= handle_actors();
      progress |= serve();
      sends_.progress();
      if (progress) backoff.reset(); else backoff.idle();
    }
    sends_.wait_all();
    spdlog::debug("replay: done, {} sequences inserted, {} sampled", c_.inserted, c_.sampled);
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
    env.meta = {{"env_steps", double(c_.env_steps)},     {"inserted", double(c_.inserted)},
                {"rollouts", double(c_.rollouts)},       {"batches", double(c_.batches)},
                {"sampled", double(c_.sampled)},         {"episodes", double(c_.episodes)},
                {"discarded_rollouts", double(c_.discarded)}, {"fill", double(queue_.size())},
                {"capacity", double(queue_.capacity())}};
  }

  bool handle_learners() {
    bool any = false;
    size_t n = 0;
    int src;
    while ((src = try_recv(comms_.world, MPI_ANY_SOURCE, kTagLearnerReq, rbuf_, &n)) >= 0) {
      any = true;
      auto msg = wire::decode(rbuf_.data(), n, src, {wire::Kind::SampleRequest, wire::Kind::LearnerBye});
      if (comms_.layout.role_of(src) != Role::Learner)
        throw Error(fmt::format("replay: {} from rank {}, which is not a learner", wire::kind_name(msg.env.kind), src));
      if (msg.env.kind == wire::Kind::SampleRequest) {
        if (!stopping_) pending_.push_back(src);
      } else {
        ++learners_bye_;
        if (src == 0) stopping_ = true;
        std::erase(pending_, src);
        send_small(wire::Kind::LearnerByeAck, src, kTagLearnerReply, true);
      }
    }
    return any;
  }

  bool handle_actors() {
    bool any = false;
    size_t n = 0;
    int src;
    const int64_t E = cfg_.env.num_envs;
    while ((stopping_ || queue_.free() >= E) &&
           (src = try_recv(comms_.world, MPI_ANY_SOURCE, kTagRollout, rbuf_, &n)) >= 0) {
      any = true;
      auto msg = wire::decode(rbuf_.data(), n, src, {wire::Kind::Rollout, wire::Kind::ActorDone});
      if (comms_.layout.role_of(src) != Role::Actor)
        throw Error(fmt::format("replay: {} from rank {}, which is not an actor", wire::kind_name(msg.env.kind), src));
      if (msg.env.kind == wire::Kind::ActorDone) {
        ++actors_done_;
        send_small(wire::Kind::ActorDoneAck, src, kTagActorCtl, false);
        continue;
      }
      int64_t rows = layout_.check(msg, src);
      if (rows != E) throw Error(fmt::format("rollout from rank {} holds {} envs, expected env.num_envs = {}", src, rows, E));
      int ir = msg.find("episode_return"), il = msg.find("episode_length");
      if (ir < 0 || il < 0 || msg.desc(size_t(ir)).elements() != msg.desc(size_t(il)).elements())
        throw Error(fmt::format("rollout from rank {} lacks consistent episode statistics", src));
      if (stopping_) {
        ++c_.discarded;
      } else {
        for (int64_t i = 0; i < rows; ++i) queue_.push(msg.payload, rows, i);
        ++c_.rollouts;
        c_.inserted += rows;
        c_.env_steps += rows * layout_.T();
        size_t m = msg.desc(size_t(ir)).elements();
        c_.episodes += int64_t(m);
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
      }
      send_small(wire::Kind::RolloutAck, src, kTagActorCtl, false);
    }
    return any;
  }

  bool serve() {
    bool any = false;
    const int64_t B = cfg_.learner.batch_size;
    while (!stopping_ && !pending_.empty() && queue_.size() >= B) {
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
      c_.batches += 1;
      c_.sampled += B;
      fill_meta(env);
      env.meta["fill"] = double(queue_.size() - B);
      size_t off = wire::natural_payload_offset(env);
      std::vector<size_t> offsets;
      size_t total = off + wire::payload_bytes(env.arrays, &offsets);
      auto& buf = sends_.acquire();
      buf.resize(total);
      wire::write_header(buf.data(), off, env);
      char* payload = buf.data() + off;
      queue_.pop_into(payload, B);
      const size_t nf = layout_.fields().size();
      for (int64_t k = 0; k < m; ++k) {
        reinterpret_cast<float*>(payload + offsets[nf])[k] = ep_returns_[size_t(k)];
        reinterpret_cast<int32_t*>(payload + offsets[nf + 1])[k] = ep_lengths_[size_t(k)];
      }
      if (stats) {
        ep_returns_.clear();
        ep_lengths_.clear();
      }
      sends_.send(buf, total, dest, kTagLearnerReply, comms_.world);
    }
    return any;
  }

  const Config& cfg_;
  const Comms& comms_;
  envs::EnvSpec spec_;
  SeqLayout layout_;
  SequenceQueue queue_;
  SendPool sends_;
  std::vector<char> rbuf_;
  std::deque<int> pending_;
  std::deque<float> ep_returns_;
  std::deque<int32_t> ep_lengths_;
  Counters c_;
  uint64_t seq_ = 0;
  bool stopping_ = false;
  int actors_done_ = 0, learners_bye_ = 0;
};

}  // namespace

void run_replay(const Config& cfg, const Comms& comms) { ReplayServer(cfg, comms).run(); }

}  // namespace mpirl::buffer
