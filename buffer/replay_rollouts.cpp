// The actors' rollouts into the replay rank (buffer/replay_server.h): received without blocking,
// straight into a reserved chunk, compressed ones decoded there; ActorDone.
#include <cmath>

#include <spdlog/spdlog.h>

#include "buffer/messages.h"
#include "buffer/replay_server.h"
#include "comm/rollout_codec.h"
#include "core/clock.h"
#include "core/error.h"

namespace mpirl::buffer {

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
  if (layout_.has(Seq::InitialPriority)) {  // the actor's priorities: finite (negative: the largest so far)
    const char* base = (is_compressed_rollout(msg) ? (into_chunk ? buf : plain_.data()) : buf) + payload_offset;
    const float* p = layout_.ptr<float>(base, Seq::InitialPriority, rows);
    for (int64_t i = 0; i < rows; ++i)
      if (!std::isfinite(p[i]))
        throw Error(fmt::format("rollout from rank {}: env {}'s initial_priority is {} (r2d2.initial_priority = "
                                "\"actor\"; the actor's Q-values are not finite)", src, i, p[i]));
  }
  const auto stats = read_episode_stats(msg, stats_at, src);
  if (!into_chunk) {
    if (!stopping_)
      throw Error(fmt::format("rollout from rank {} is {} bytes, more than the {} a rollout can take", src, count,
                              rb_.chunk_bytes()));
    ++c_.discarded_rollouts;
  } else {  // matched before the stop (or after, into a chunk): stored and counted as such
    const int64_t dropped = episodes_.dropped();
    episodes_.add(stats.returns, stats.lengths, stats.n);
    if (dropped == 0 && episodes_.dropped() > 0)
      spdlog::warn("replay: more than {} finished episodes wait for learner 0 (episodes end faster than its "
                   "updates collect them): the oldest episodes' returns are dropped from now on, so learner 0's "
                   "episode count leaves them out (the replay's own, in the summary, keeps them) and the returns "
                   "it reports may lag the actors by up to that many episodes",
                   PendingEpisodes::kMaxPending);
    rb_.commit_chunk(payload_offset, rows);
    ++c_.rollouts;
    c_.env_steps += rows * new_steps(layout_.T(), rollout_overlap(cfg_), msg.env.seq);  // repeated steps once
    c_.episodes += int64_t(stats.n);
  }
  send_small(wire::Kind::RolloutAck, src, kTagActorCtl, false);
}

}  // namespace mpirl::buffer
