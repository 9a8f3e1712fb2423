#include "buffer/replay.h"

#include <sys/prctl.h>

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <memory>

#include <spdlog/spdlog.h>

#include "buffer/messages.h"
#include "buffer/replay_config.h"
#include "buffer/replay_server.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/fault.h"
#include "core/run_dir.h"
#include "envs/registry.h"
#include "models/state_size.h"

namespace mpirl::buffer {

ReplayServer::ReplayServer(const Config& cfg, const Comms& comms, const RunStart& start)
    : pid_file_(start.run_dir, comms.layout.shard_index(comms.rank)), cfg_(cfg), comms_(comms), start_(start),
      shard_(comms.layout.shard_index(comms.rank)), actors_(comms.layout.actors_of_shard(shard_)),
      part_(part_name(shard_)), spec_(envs::env_spec(cfg)),
      layout_(spec_, cfg.actor.rollout_len, models::state_size(cfg, spec_)),
      rb_(layout_, server_options(cfg, layout_, shard_)), dumps_(cfg, start.run_dir, shard_), stalls_(comms, cfg.run.stall_timeout_s),
      reply_capacity_(sample_reply_capacity(layout_, cfg.learner.batch_size, comms.layout.learners)) {
  c_.sampled_by_learner.assign(size_t(comms.layout.learners), 0);
}

int ReplayServer::run() {
  const int L = comms_.layout.learners, A = int(actors_.size());
  Backoff backoff, receiving(20);
  if (!start_.resume_from.empty() || !cfg_.replay.restore.empty()) start_restore();
  while (!(actors_done_ == A && byes_.size() == size_t(L) && acked_ && rx_.src < 0)) {
    fault_point();
    bool progress = false;
    if (io_.running()) progress |= poll_job();
    if (!restoring()) {
      if (!dump_why_ && !io_.running()) dump_why_ = dumps_.due(stopping_);
      progress |= handle_learners();
      progress |= handle_actors();
      progress |= serve();
      progress |= start_due_work();
      stalls_.check();
      // The goodbyes carry the final counters: only once every actor has said it is done too,
      // and no file work is running or waiting.
      if (!acked_ && byes_.size() == size_t(L) && actors_done_ == A && !io_.running() && !work_pending())
        finish_learners();
    }
    sends_.progress();
    if (progress) {
      backoff.reset();
      receiving.reset();
    } else if (rx_.src >= 0) {
      receiving.idle();  // a rollout is arriving: it moves only while this rank calls MPI
    } else {
      backoff.idle();
    }
  }
  sends_.wait_all();
  // Learner 0 gives the job its exit code (3 when this final dump failed, unless a signal
  // stopped the run: a preempted job is requeued whatever its dump did).
  return 0;
}

// The replay's own counters (c_) and the buffer's, as the learners receive them.
ReplayStatus ReplayServer::status() const {
  const auto& r = rb_.counters();
  ReplayStatus s = c_;
  s.inserted = r.inserted;
  s.evicted = r.evicted;
  s.consumed = r.consumed;
  s.fill = rb_.size();
  s.capacity = rb_.capacity();
  s.sampled = r.sampled;
  s.batches = r.batches;
  s.priority_updates = r.priority_updates;
  s.stale_priority_updates = r.stale_priority_updates;
  s.max_priority = rb_.max_priority();
  s.shard = shard_;
  s.priority_mass = rb_.mass();
  s.importance_exponent = rb_.importance_exponent();
  s.dump = dumps_.status();
  return s;
}

void ReplayServer::send_small(wire::Kind kind, int dest, int tag, bool with_status) {
  if (with_status) return send_status(kind, dest, tag, status());
  wire::Envelope env;
  env.kind = kind;
  send_envelope(env, dest, tag);
}

void ReplayServer::send_status(wire::Kind kind, int dest, int tag, const ReplayStatus& s) {
  wire::Envelope env;
  env.kind = kind;
  env.has_status = true;
  env.status = s;
  send_envelope(env, dest, tag);
}

void ReplayServer::send_envelope(wire::Envelope& env, int dest, int tag) {
  env.sender = comms_.rank;
  env.seq = seq_++;
  auto& buf = sends_.acquire();
  buf = wire::build_frame(env, nullptr, 0);
  sends_.send(buf, buf.size(), dest, tag, comms_.world);
}

bool ReplayServer::handle_learners() {
  bool any = false;
  size_t n = 0;
  int src;
  while ((src = try_recv(comms_.world, MPI_ANY_SOURCE, kTagLearnerReq, rbuf_, &n)) >= 0) {
    any = true;
    auto msg = wire::decode(rbuf_.data(), n, src,
                            {wire::Kind::SampleRequest, wire::Kind::LearnerBye, wire::Kind::PriorityUpdate,
                             wire::Kind::CheckpointRequest});
    if (comms_.layout.role_of(src) != Role::Learner)
      throw Error(fmt::format("replay: {} from rank {}, which is not a learner", wire::kind_name(msg.env.kind), src));
    switch (msg.env.kind) {
      case wire::Kind::SampleRequest: {
        const int64_t n = read_sample_request(msg, src, cfg_.learner.batch_size);
        if (!stopping_) pending_.emplace_back(src, n);
        break;
      }
      case wire::Kind::PriorityUpdate: {
        auto u = read_priority_update(msg, src);
        rb_.update_priorities(u.slots, u.generations, u.priorities, u.n);
        break;
      }
      case wire::Kind::CheckpointRequest: checkpoint_request(msg, src); break;
      default:  // LearnerBye: acknowledged once every learner has left and the final dump is done
        byes_.push_back(src);
        stopping_ = true;
        std::erase_if(pending_, [src](const auto& p) { return p.first == src; });
    }
  }
  return any;
}

void ReplayServer::checkpoint_request(const wire::Message& msg, int src) {
  auto r = read_checkpoint_request(msg, src);
  if (r.final) return void(final_checkpoint_ = r.dir);  // written after the last ActorDone (finish_learners)
  if (!ckpt_.dir.empty())
    throw Error(fmt::format("replay: a checkpoint request from rank {} for '{}' while the one for '{}' is not done",
                            src, r.dir, ckpt_.dir));
  // The snapshot now, whatever runs: the part is the state this request saw (the learners' is
  // learner.pt's). Its items stay in place: no rollout goes into the buffer until the part is
  // written (a rollout arriving now is in a chunk the snapshot does not hold).
  ckpt_.dir = r.dir;
  ckpt_.src = src;
  ckpt_.st = checkpoint_state();
  ckpt_.at = status();
  ckpt_.items = DumpSnapshot::of(rb_);
  ckpt_.k = c_.checkpoint;
}

// A rollout goes straight into a reserved replay chunk (no copy); anything else into discard_.
// The receive never blocks (MPI_Improbe + MPI_Imrecv, one rollout in flight): a transport without
// single-copy moves a large rollout in fragments during the sender's MPI calls, and an actor
// stepping its envs makes none for milliseconds; meanwhile the learners are served.
bool ReplayServer::handle_actors() {
  bool any = false;
  // Into the buffer only while no file work runs or waits to start (it reads the items in
  // place); after the stop rollouts go to discard_, which no job reads.
  const bool into_buffer = !io_.running() && !work_pending();
  const int A = int(actors_.size());
  // One rollout per call: the next receive is posted, then the learners are served. Taking every
  // rollout that waits starved the learners while actors sent faster than the replay ingests
  // (bench_replay_load with unlimited actors: one batch in 6 s).
  bool took = false;
  for (;;) {
    if (rx_.src >= 0) {
      if (took) return any;
      // Tested back to back for up to kReceiveSpinS: a transport without single-copy moves the
      // rollout only while both ranks call MPI, and the actor that sent it usually is (it waits
      // for its actions, or for a send credit). Past that the actor is stepping its envs: serve
      // the learners meanwhile and test again on the next pass.
      constexpr double kReceiveSpinS = 2e-3;
      int done = 0;
      for (const double t0 = now_seconds(); !done && now_seconds() - t0 < kReceiveSpinS;)
        MPIRL_MPI(MPI_Test(&rx_.req, &done, MPI_STATUS_IGNORE));
      if (!done) return any;
      const Incoming in = rx_;
      rx_ = Incoming{};
      any = took = true;
      received(in);
      continue;
    }
    // Actors are polled in turn (not MPI_ANY_SOURCE): when the limiter admits one rollout at a
    // time, any-source matching keeps serving the same actor and starves the others.
    bool matched = false;
    for (int tried = 0; tried < A && !matched && (stopping_ || (into_buffer && rb_.can_insert_chunk())); ++tried) {
      const int src = actors_[size_t(next_actor_)];
      next_actor_ = (next_actor_ + 1) % A;
      int flag = 0, count = 0;
      MPI_Message m;
      MPI_Status st;
      MPIRL_MPI(MPI_Improbe(src, kTagRollout, comms_.world, &flag, &m, &st));
      if (!flag) continue;
      matched = true;
      stalls_.heard(src);
      MPIRL_MPI(MPI_Get_count(&st, MPI_BYTE, &count));
      Incoming in;
      in.src = src;
      in.count = count;
      in.into_chunk = !stopping_ && size_t(count) <= rb_.chunk_bytes();
      if (in.into_chunk) {
        in.buf = rb_.reserve_chunk();
      } else {
        if (discard_.buf.size() < size_t(count)) discard_.buf.resize(size_t(count));
        in.buf = discard_.buf.data();
      }
      MPIRL_MPI(MPI_Imrecv(in.buf, count, MPI_BYTE, &m, &in.req));
      rx_ = in;
    }
    if (!matched) return any;
  }
}

void ReplayServer::received(const Incoming& in) {
  const int64_t E = cfg_.env.num_envs;
  const int src = in.src, count = in.count;
  char* buf = in.buf;
  const bool into_chunk = in.into_chunk;
  wire::Message msg;
  try {
    msg = wire::decode(buf, size_t(count), src, {wire::Kind::Rollout, wire::Kind::ActorDone});
  } catch (...) {
    if (into_chunk) rb_.release_chunk();
    throw;
  }
  if (msg.env.kind == wire::Kind::ActorDone) {
    if (into_chunk) rb_.release_chunk();
    c_.actor_env_steps += read_actor_done(msg, src);
    stalls_.done(src);
    ++actors_done_;
    send_small(wire::Kind::ActorDoneAck, src, kTagActorCtl, false);
    return;
  }
  size_t payload_offset = size_t(msg.payload - buf);
  size_t stats_at = layout_.fields().size();  // the statistics follow the sequences
  int64_t rows = 0;
  if (is_compressed_rollout(msg)) {
    // Decoded where a plain rollout's payload would be, from a copy of the frame (it is in the
    // same chunk). A malformed one throws naming the actor, like a plain one.
    packed_.assign(buf, buf + count);
    msg = wire::decode(packed_.data(), packed_.size(), src, {wire::Kind::Rollout});
    char* dst = buf + wire::kHeaderRegion;
    if (!into_chunk) {
      plain_.resize(wire::kHeaderRegion + layout_.field_offset(layout_.fields().size(), E));
      dst = plain_.data() + wire::kHeaderRegion;
    }
    rows = decode_rollout(codec_, layout_, msg, src, dst, E);
    ++compressed_.rollouts;
    for (const auto& a : msg.env.arrays)
      if (a.name == "obs_z" || a.name == "boot_obs_z") compressed_.wire_bytes += a.shape[0];
    for (Seq f : {Seq::Obs, Seq::BootObs})
      if (layout_.has(f)) compressed_.raw_bytes += int64_t(layout_.field(f).bytes) * rows;
    payload_offset = wire::kHeaderRegion;
    stats_at = msg.env.arrays.size() - 2;  // (read_episode_stats checks their names)
  } else {
    rows = layout_.check(msg, src);
  }
  if (rows != E) throw Error(fmt::format("rollout from rank {} holds {} envs, expected env.num_envs = {}", src, rows, E));
  const auto stats = read_episode_stats(msg, stats_at, src);
  if (!into_chunk) {
    if (!stopping_)
      throw Error(fmt::format("rollout from rank {} is {} bytes, more than the {} a rollout can take", src, count,
                              rb_.chunk_bytes()));
    ++c_.discarded_rollouts;
  } else {  // matched before the stop (or after, into a chunk): stored and counted as such
    episodes_.add(stats.returns, stats.lengths, stats.n);
    rb_.commit_chunk(payload_offset, rows);
    ++c_.rollouts;
    c_.env_steps += rows * layout_.T();
    c_.episodes += int64_t(stats.n);
  }
  send_small(wire::Kind::RolloutAck, src, kTagActorCtl, false);
}

bool ReplayServer::serve() {
  bool any = false;
  const size_t nf = layout_.fields().size();
  // A request for 0 sequences (a shard the learner's split gave none) is answered at once: it
  // carries this shard's status, its mass for the next split and learner 0's episode statistics.
  while (!stopping_ && !pending_.empty() && (pending_.front().second == 0 || rb_.can_sample(pending_.front().second))) {
    any = true;
    const auto [dest, B] = pending_.front();
    pending_.pop_front();
    // Learner 0 keeps the run's episode statistics: it gets them (at most
    // kMaxEpisodeStatsPerReply per reply; the rest wait for the next one).
    // None from a checkpoint's snapshot until its part is written: the part holds them.
    const int64_t m = dest == 0 && ckpt_.dir.empty()
                          ? std::min<int64_t>(int64_t(episodes_.size()), kMaxEpisodeStatsPerReply)
                          : 0;
    wire::Envelope env;
    env.kind = wire::Kind::SampleReply;
    env.sender = comms_.rank;
    env.seq = seq_++;
    env.arrays = sample_reply_arrays(layout_, B, m);
    std::vector<size_t> offsets;
    const size_t payload_len = wire::payload_bytes(env.arrays, &offsets);
    auto& buf = sends_.acquire();
    // The envelope is written after sampling (the counters change), in the room reserved for it.
    const size_t off = sample_reply_payload_offset(comms_.layout.learners);
    buf.resize(off + payload_len);
    char* payload = buf.data() + off;
    auto s = B > 0 ? rb_.sample(B, payload) : ReplayBuffer::Sampled{};
    c_.sampled_by_learner[size_t(dest)] += B;
    episodes_.take(size_t(m), reinterpret_cast<float*>(payload + offsets[nf]),
                   reinterpret_cast<int32_t*>(payload + offsets[nf + 1]));
    std::memcpy(payload + offsets[nf + 2], s.slots.data(), size_t(B) * 8);
    std::memcpy(payload + offsets[nf + 3], s.generations.data(), size_t(B) * 8);
    std::memcpy(payload + offsets[nf + 4], s.weights.data(), size_t(B) * 4);
    auto* seqs = reinterpret_cast<int64_t*>(payload + offsets[nf + 5]);
    for (int64_t k = 0; k < B; ++k) seqs[k] = rb_.meta(s.slots[size_t(k)]).insert_seq;
    std::memcpy(payload + offsets[nf + 6], s.probs.data(), size_t(B) * 8);
    env.has_status = true;
    env.status = status();
    wire::write_header(buf.data(), off, env);
    MPIRL_CHECK(buf.size() <= reply_capacity_, "SampleReply of {} bytes exceeds the learners' {}-byte receive",
                buf.size(), reply_capacity_);
    sends_.send(buf, buf.size(), dest, kTagLearnerReply, comms_.world);
  }
  return any;
}

// Every learner has left: the final dump, then the acks with the final status.
void ReplayServer::finish_learners() {
  DumpInfo part;
  if (!final_checkpoint_.empty()) part = checkpoint(final_checkpoint_);
  dumps_.finish(rb_, part.path.empty() ? nullptr : &part);
  if (compressed_.rollouts > 0)
    spdlog::info("replay: {} rollouts arrived with compressed observations: {:.2f} MB for {:.2f} MB decoded, {:.1f}x",
                 compressed_.rollouts, compressed_.wire_bytes / 1e6, compressed_.raw_bytes / 1e6,
                 double(compressed_.raw_bytes) / double(compressed_.wire_bytes));
  for (int l : byes_) send_small(wire::Kind::LearnerByeAck, l, kTagLearnerReply, true);
  acked_ = true;
}

int run_replay(const Config& cfg, const Comms& comms, const RunStart& start) {
  // Short sleeps while a rollout arrives (ReplayServer::run): Linux's default 50 us timer slack
  // would make each 10-20 us sleep last 60-70 us.
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  auto server = std::make_unique<ReplayServer>(cfg, comms, start);
  try {
    return server->run();
  } catch (...) {
    // The I/O thread may still be reading the buffer (a job stuck on a hung disk): the server is
    // left for the process's end (MPI_Abort follows) rather than freed under it.
    if (server->io_running()) (void)server.release();
    throw;
  }
}

}  // namespace mpirl::buffer
