// The replay rank's loop (buffer/replay_server.h): its start, its status and small messages, the
// learners' goodbyes at the end, and run_replay.
#include "buffer/replay.h"

#include <sys/prctl.h>

#include <unistd.h>

#include <memory>

#include <spdlog/spdlog.h>

#include "buffer/replay_config.h"
#include "buffer/replay_server.h"
#include "core/clock.h"
#include "core/fault.h"
#include "core/run_dir.h"
#include "envs/registry.h"
#include "models/state_size.h"

namespace mpirl::buffer {

ReplayServer::ReplayServer(const Config& cfg, const Comms& comms, const RunStart& start)
    : pid_file_(start.run_dir, comms.layout.shard_index(comms.rank)), cfg_(cfg), comms_(comms), start_(start),
      shard_(comms.layout.shard_index(comms.rank)), actors_(comms.layout.actors_of_shard(shard_)),
      part_(part_name(shard_)), spec_(envs::env_spec(cfg)),
      layout_(spec_, cfg.actor.rollout_len, models::state_size(cfg, spec_), seq_layout_priority(cfg)),
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
