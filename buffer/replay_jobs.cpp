// The replay rank's file work (buffer/replay_server.h): the restore at start, dumps and the
// replay's part of checkpoints, on the I/O thread while the loop goes on.
#include <algorithm>

#include <spdlog/spdlog.h>

#include "buffer/replay_server.h"
#include "core/clock.h"
#include "core/error.h"

namespace mpirl::buffer {
namespace {
constexpr int kFlushStallFactor = 10;  // a flush may take this many run.stall_timeout_s without a tick
}  // namespace

ReplayCheckpoint ReplayServer::checkpoint_state() const {
  ReplayCheckpoint st;
  st.status = status();
  // The steps a resumed run counts as reported by actors: those accounted for here (a
  // non-final checkpoint comes before the actors' ActorDone).
  // (A discarded rollout is never an actor's first in practice: T - overlap new steps each.)
  st.status.actor_env_steps =
      c_.env_steps + c_.discarded_rollouts * cfg_.env.num_envs * (layout_.T() - rollout_overlap(cfg_));
  st.returns = episodes_.returns();
  st.lengths = episodes_.lengths();
  st.dropped = episodes_.dropped();
  st.buffer = rb_.resume_state();
  return st;
}

// The replay's part of the final checkpoint, on this thread; a failure is reported to learner 0
// in the status.
DumpInfo ReplayServer::checkpoint(const std::string& dir) {
  return write_checkpoint_part(DumpSnapshot::of(rb_), checkpoint_state(), dir, cfg_, c_.checkpoint, {}, part_);
}

void ReplayServer::start_restore() {
  const bool resume = !start_.resume_from.empty();
  job_ = Job::Restore;
  io_.start(resume ? "restore from checkpoint '" + start_.resume_from + "'"
                   : "restore from '" + cfg_.replay.restore + "'",
            [this, resume](const IoJob::Progress& p) {
              DumpOptions o;
              o.on_block = p.tick;
              if (resume) restore_.st = resume_from_checkpoint(rb_, start_, cfg_.env.id, o, part_);
              else restore_.items = restore_replay(rb_, cfg_.replay.restore, cfg_.env.id, o).items;
            });
  spdlog::info("replay: {} on the I/O thread; the learners are told the replay is busy", io_.what());
}

bool ReplayServer::start_due_work() {
  // Not while a rollout arrives into the buffer (its chunk is not in any snapshot, but a dump's
  // snapshot is taken below and is simplest to reason about with no receive into the buffer).
  if (io_.running() || !work_pending() || (rx_.src >= 0 && rx_.into_chunk)) return false;
  if (!ckpt_.dir.empty()) {  // its snapshot was taken when the request was handled
    job_ = Job::Checkpoint;
    io_.start("checkpoint part -> " + ckpt_.dir, [this](const IoJob::Progress& p) {
      DumpOptions o;
      o.on_block = p.tick;
      o.on_flush = p.flushing;
      write_checkpoint_part(ckpt_.items, ckpt_.st, ckpt_.dir, cfg_, ckpt_.k, o, part_);
    });
  } else {
    job_ = Job::Dump;
    dump_.why = dump_why_;
    dump_why_ = nullptr;
    dump_.items = DumpSnapshot::of(rb_);
    io_.start(std::string("dump (") + dump_.why + ")", [this](const IoJob::Progress& p) {
      DumpOptions o;
      o.on_block = p.tick;
      o.on_flush = p.flushing;
      dump_.out = dumps_.write(dump_.items, o);
    });
  }
  last_busy_sent_ = last_job_log_ = now_seconds();
  stuck_logged_ = false;
  return true;
}

bool ReplayServer::poll_job() {
  if (io_.finished()) {
    finish_job();
    return true;
  }
  const double now = now_seconds(), S = cfg_.run.stall_timeout_s;
  const double idle = io_.idle_seconds();
  // The final flush and fsync give no ticks; on a network file system they may take many times
  // what one block does.
  const double limit = io_.flushing() ? kFlushStallFactor * S : S;
  if (S > 0 && idle > limit) {
    if (!stuck_logged_)
      spdlog::error("replay: {} has made no progress for {:.0f} s ({}run.stall_timeout_s = {} s) after {} blocks: "
                    "the file system does not answer. The learners are no longer told the replay is busy; they "
                    "stop after 2 x run.stall_timeout_s, learner 0 saving model.pt",
                    io_.what(), idle, io_.flushing() ? fmt::format("flushing the file: {} x ", kFlushStallFactor) : "",
                    S, io_.ticks());
    stuck_logged_ = true;
    return false;
  }
  if (now - last_job_log_ >= 30) {
    spdlog::info("replay: {}: {} blocks in {:.0f} s so far; learners are told the replay is busy", io_.what(),
                 io_.ticks(), now - io_.started_at());
    last_job_log_ = now;
  }
  // Often enough that a learner's clock (2 x run.stall_timeout_s) never runs out meanwhile.
  const double every = S > 0 ? std::min(S / 4, 5.0) : 5.0;
  if (now - last_busy_sent_ >= every) {
    for (int l = 0; l < comms_.layout.learners; ++l)
      if (std::find(byes_.begin(), byes_.end(), l) == byes_.end())
        send_small(wire::Kind::ReplayBusy, l, kTagLearnerReply, /*with_status=*/!restoring());
    last_busy_sent_ = now;
  }
  return false;
}

void ReplayServer::finish_job() {
  const Job job = job_;
  job_ = Job::None;
  const double seconds = now_seconds() - io_.started_at();
  std::exception_ptr err = io_.collect();
  // The actors waited on back-pressure meanwhile: none is silent for what the job took.
  stalls_.excuse_all();
  switch (job) {
    case Job::Restore:
      if (err) std::rethrow_exception(err);  // a resume or restore that fails ends the job, as before
      spdlog::info("replay: {} done in {:.2f} s", io_.what(), seconds);
      if (!start_.resume_from.empty()) {
        c_ = restore_.st.status;
        c_.sampled_by_learner.resize(size_t(comms_.layout.learners), 0);
        episodes_.assign(restore_.st.returns, restore_.st.lengths, restore_.st.dropped);
      } else {
        c_.restored = restore_.items;
        c_.restored_seq_end = rb_.next_insert_seq();
        spdlog::info("replay: restored {} items from '{}' in {:.2f} s", restore_.items, cfg_.replay.restore, seconds);
      }
      restore_ = {};
      break;
    case Job::Checkpoint: {
      if (err) std::rethrow_exception(err);  // write_checkpoint_part reports its failures in k
      c_.checkpoint = ckpt_.k;
      ReplayStatus s = ckpt_.at;
      s.checkpoint = c_.checkpoint;
      s.dump = dumps_.status();
      send_status(wire::Kind::CheckpointDone, ckpt_.src, kTagLearnerReply, s);
      ckpt_ = {};
      break;
    }
    case Job::Dump:
      if (err) std::rethrow_exception(err);  // DumpScheduler::write reports its failures in out
      dumps_.record(dump_.out, dump_.why);
      dump_ = {};
      break;
    case Job::None: break;
  }
}

}  // namespace mpirl::buffer
