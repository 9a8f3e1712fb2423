#pragma once
// The replay rank's server (buffer/replay.h says what it does). Internal to buffer/: replay.cpp
// holds the loop, replay_requests.cpp the learners' requests, replay_rollouts.cpp the actors'
// rollouts, replay_jobs.cpp the file work on the I/O thread.
//
// Long file work (the restore at start, periodic and SIGUSR2 dumps, the replay's part of a
// non-final checkpoint) runs on io_ (buffer/io_job.h) while the loop goes on:
//  - during a restore the loop touches nothing of the buffer: it only tells the learners it is
//    busy (ReplayBusy without a status) and lets MPI progress;
//  - during a dump or checkpoint part the I/O thread reads a snapshot (buffer/hdf5_dump.h
//    DumpSnapshot) and the items' storage in place: the loop samples, applies priority updates
//    and tells the learners it is busy, but takes no rollout into the buffer (a job starts only
//    with no rollout arriving into it); rollouts after the stop go to a discard buffer and may be
//    received meanwhile. A checkpoint's snapshot is taken when its request is handled (while a
//    dump runs, too); from then until its part is written the replies to learner 0 carry no
//    episode statistics (the part holds them) and no rollout goes into the buffer.
// A job that makes no progress for run.stall_timeout_s (10 x while it flushes) is reported once and the learners are no
// longer told the replay is busy: they stop after 2 x run.stall_timeout_s (learner 0 saves what it
// can), which ends a job stuck on a hung file system instead of waiting for ever.
// The final checkpoint part and the end-of-run dump run on the loop's thread: by then every
// learner waits in LearnerBye with no stall clock.
#include <deque>
#include <string>
#include <vector>

#include "buffer/dump_scheduler.h"
#include "buffer/io_job.h"
#include "buffer/pending_episodes.h"
#include "buffer/replay_buffer.h"
#include "buffer/replay_checkpoint.h"
#include "buffer/stall_watch.h"
#include "comm/protocol.h"
#include "comm/ranks.h"
#include "comm/rollout_codec.h"
#include "comm/seq_layout.h"
#include "comm/transport.h"
#include "comm/wire.h"
#include "core/config.h"
#include "core/run_dir.h"
#include "envs/registry.h"

namespace mpirl::buffer {

class ReplayServer {
 public:
  ReplayServer(const Config& cfg, const Comms& comms, const RunStart& start);
  int run();
  bool io_running() const { return io_.running(); }

 private:
  // --- replay.cpp: the loop and its messages
  ReplayStatus status() const;  // the replay's own counters (c_) and the buffer's
  void send_small(wire::Kind kind, int dest, int tag, bool with_status);
  void send_status(wire::Kind kind, int dest, int tag, const ReplayStatus& s);
  void send_envelope(wire::Envelope& env, int dest, int tag);  // no arrays; sets sender and seq
  void finish_learners();
  // --- replay_requests.cpp: the learners' requests and the sample replies
  bool handle_learners();
  void checkpoint_request(const wire::Message& msg, int src);
  bool serve();
  // --- replay_rollouts.cpp: the actors' rollouts
  bool handle_actors();
  struct Incoming {
    int src = -1, count = 0;
    bool into_chunk = false;
    char* buf = nullptr;
    MPI_Request req = MPI_REQUEST_NULL;
  };
  void received(const Incoming& in);

  // --- replay_jobs.cpp: file work, on the I/O thread where it can run there
  ReplayCheckpoint checkpoint_state() const;  // what replay_state.json holds besides the items
  DumpInfo checkpoint(const std::string& dir);  // synchronous (the final part)
  bool work_pending() const { return !ckpt_.dir.empty() || dump_why_ != nullptr; }
  bool start_due_work();   // a pending checkpoint part or dump, when no rollout arrives into the buffer
  void start_restore();
  bool poll_job();         // heartbeats to the learners; collects a finished job
  void finish_job();
  bool restoring() const { return job_ == Job::Restore; }

  ReplayPidFile pid_file_;  // replay.pid and replay.host while this rank runs
  const Config& cfg_;
  const Comms& comms_;
  const RunStart start_;
  const int shard_;                // this rank's replay shard (0 with one replay)
  const std::vector<int> actors_;  // the actor ranks that send to it
  const std::string part_;         // its checkpoint files' stem (buffer/replay_checkpoint.h)
  envs::EnvSpec spec_;
  SeqLayout layout_;
  ReplayBuffer rb_;
  DumpScheduler dumps_;
  StallWatch stalls_;
  SendPool sends_;
  std::vector<char> rbuf_;
  MsgBuffer discard_;  // rollouts that arrive after the stop (received, counted, dropped)
  // Compressed rollouts (comm/rollout_codec.h): the received frame is copied out of the chunk
  // (packed_), then decoded into the chunk in the plain layout (or into plain_ when discarded).
  ObsCodec codec_;
  std::vector<char> packed_, plain_;
  struct {
    int64_t rollouts = 0, wire_bytes = 0, raw_bytes = 0;  // their image fields: encoded, decoded
  } compressed_;
  Incoming rx_;        // the rollout being received (src < 0: none)
  std::deque<std::pair<int, int64_t>> pending_;  // sample requests: learner rank, sequences asked for
  PendingEpisodes episodes_;
  std::vector<int> byes_;
  std::string final_checkpoint_;  // where the final checkpoint's replay part goes ("" = none)
  const size_t reply_capacity_;
  ReplayStatus c_;  // counted here: rollouts, env steps (stored, and as the actors report them), restored
  uint64_t seq_ = 0;
  bool stopping_ = false, acked_ = false;
  int actors_done_ = 0, next_actor_ = 0;

  // The job on io_ and what it reads and writes (the I/O thread's alone while it runs).
  enum class Job { None, Restore, Dump, Checkpoint };
  IoJob io_;
  Job job_ = Job::None;
  const char* dump_why_ = nullptr;  // a dump is due (set by the scheduler, cleared when it starts)
  struct CheckpointJob {
    std::string dir;      // "" = none requested
    int src = -1;
    ReplayCheckpoint st;  // replay_state.json's content at the snapshot
    ReplayStatus at;      // the status at the snapshot: what CheckpointDone reports
    DumpSnapshot items;
    CheckpointStatus k;   // written by the job, copied into c_ when it is collected
  } ckpt_;
  struct DumpJob {
    const char* why = nullptr;
    DumpSnapshot items;
    DumpScheduler::Outcome out;
  } dump_;
  struct RestoreJob {
    ReplayCheckpoint st;  // from a checkpoint
    int64_t items = 0;    // from replay.restore
  } restore_;
  double last_busy_sent_ = 0, last_job_log_ = 0;
  bool stuck_logged_ = false;
};

}  // namespace mpirl::buffer
