#pragma once
// The message protocol between the roles: every message kind, the MPI tags, the typed status the
// replay reports to learners, and the start/stop sequence. Frames are built by comm/wire.h.
//
// Start and stop (one run; L learners, 1 replay, A actors):
//
//   learner 0              learners 1..L-1        replay                    actors
//   | Params v0 (Ibcast on `publish`) --------------------------------------> | wait for v0, then step
//   | SampleRequest x prefetch ---------------> |                           |
//   |                      | SampleRequest ---> |  <--------------- Rollout | (<= max_inflight unacked)
//   |                      |                    |  RolloutAck ------------> | (returns a send credit)
//   | <------------------------- SampleReply(B sequences, ReplayStatus)     |
//   | PriorityUpdate ------------------------> |  (prioritized only)       |
//   | Params vK every publish_interval updates (newest, as soon as the last broadcast is done) -> |
//   ...                                                                      ...
//   | stop decided (allreduce MAX over learners: every learner leaves at the same update)
//   | Stop (Ibcast) ---------------------------------------------------------> | leave the loop,
//   |                                           |  <---------- ActorDone(env steps) after every
//   |                                           |  ActorDoneAck ----------> |  sent rollout is delivered
//   | CheckpointRequest(final) -------------->   |  (run.checkpoint = "end": the replay writes its part
//   |                                           |   after the last ActorDone, before the ByeAck)
//   | LearnerBye --------------------------->   |  <--- LearnerBye          |
//   |   (model.pt and summary.json are written before the Bye: they never depend on the dump)
//   |                                           | after every learner's Bye and every ActorDone: final
//   |                                           | dump (a failure is reported, never fatal), then
//   |                                           | LearnerByeAck(final status)
//   | <----------- LearnerByeAck --------------- | -----> LearnerByeAck      |
//   | summary.json rewritten with the final status; every rank leaves its loop and exits 0
//
// A periodic checkpoint: the learners agree on it at an update boundary (with the stop flag);
// learner 0 writes learner.pt and sends CheckpointRequest; the replay writes its part at once and
// answers CheckpointDone on the reply stream, after every SampleReply it sent before, so learner
// 0 has seen exactly the episode statistics the replay no longer holds; learner 0 then writes
// state.json and seals the checkpoint. The replay writes its part on its I/O thread from a snapshot
// taken when the request is handled: meanwhile it samples from the frozen buffer (replies to
// learner 0 then carry no episode statistics, which the part holds) and takes no rollouts, and
// every learner hears ReplayBusy every few seconds (also during dumps and the restore at start),
// so a slow disk does not look like a stalled replay. A signal makes the stop "preempted" (SIGUSR1, or SIGTERM not from
// the Open MPI launcher) or "interrupted" (SIGINT); core/signals.h.
//
// Rollouts still arriving after the first LearnerBye are received and counted as discarded, so
// every send is matched. A fatal error on any rank: logged with rank and host, then MPI_Abort.
//
// Central inference (actor.inference = "central"): the publish communicator holds learner 0 and
// the inference ranks (not the actors), so parameters and Stop go to the inference ranks only.
//
//   learner 0               inference rank I                      actors served by I
//   | Params v0 ----------> | (requests wait for v0)              | reset envs
//   |                       | <----------- InferRequest(group g, obs, is_init)  (one per group in flight)
//   |                       | one forward over the waiting rows of many actors and groups
//   |                       | InferReply(dist rows, core states, version) -----> | sample, step group g,
//   |                       |                                     |   InferRequest(g) for the next step
//   | Params vK ----------> | (swapped in between batches)        | rollouts to the replay as above
//   | InferStats <--------- | (every run.log_interval_s)          |
//   | Stop (Ibcast) ------> | every request from now on is answered with Stop -> | leave the loop after
//   |                       | <------------------- InferBye after its last reply  |  every group's reply,
//   |                       |                                     |   then ActorDone to the replay as above
//   | <--- InferStats(final) after every served actor's InferBye; the rank leaves its loop
//   (learner 0 waits for every final InferStats before the final summary)
//
// An actor has at most one request per group in flight, so a server holds at most (its actors x
// actor.env_groups) requests and answers each exactly once.
#include <cstdint>
#include <string>
#include <vector>

namespace mpirl::wire {

enum class Kind : uint16_t {
  Rollout = 1,      // actor -> replay: T steps x E envs
  RolloutAck,       // replay -> actor: one rollout stored (returns a send credit)
  ActorDone,        // actor -> replay: no more rollouts; carries the actor's env step count
  ActorDoneAck,     // replay -> actor: last message to the actor
  SampleRequest,    // learner -> replay
  SampleReply,      // replay -> learner: B sequences, their ids and weights, the replay status
  LearnerBye,       // learner -> replay: no more requests
  LearnerByeAck,    // replay -> learner: last message to the learner, with the final status
  Params,           // learner 0 -> actors (broadcast): flat parameters
  Stop,             // learner 0 -> actors (broadcast): leave the loop
  PriorityUpdate,   // learner -> replay: new priorities for sampled items (slot, generation)
  CheckpointRequest,  // learner 0 -> replay: write your part of a checkpoint into a directory
                      // (arrays "dir" u8[n], "final" u8[1]; final: after the last ActorDone)
  CheckpointDone,     // replay -> learner 0 (on the reply stream): a non-final checkpoint's part is
                      // written (or failed): the status's `checkpoint`
  InferRequest,       // actor -> inference: one env group's observations and is_init (comm/inference_wire.h)
  InferReply,         // inference -> actor: the group's distribution rows and core states, the version
                      // (a Stop on the same tag instead, once the run stops)
  InferBye,           // actor -> inference: no more requests (after the reply to every one)
  InferStats,         // inference -> learner 0: batching statistics as JSON text ("final": true last)
  ReplayBusy,         // replay -> learner (on the reply stream): a dump, checkpoint part or restore is
                      // being written or read on the replay's I/O thread and progressing; the
                      // learner's stall clock restarts (no arrays; a status except during a restore)
};
const char* kind_name(Kind k);

}  // namespace mpirl::wire

namespace mpirl {

// A SampleReply carries at most this many finished-episode statistics; the rest wait for the
// next reply. Status strings are cut to kMaxStatusString bytes. Both bound the reply's size.
inline constexpr int64_t kMaxEpisodeStatsPerReply = 4096;
inline constexpr size_t kMaxStatusString = 512;

// Message tags (one per direction and peer type, so MPI's per-pair ordering holds per stream).
enum Tag : int {
  kTagRollout = 11, kTagActorCtl = 12, kTagLearnerReq = 13, kTagLearnerReply = 14,
  kTagInferReq = 15, kTagInferStats = 17,
  // Replies (and Stops) to env group g arrive on tag kTagInferReply + g: an actor posts one receive
  // per group, and the server may answer its groups in any order (at most kMaxEnvGroups groups).
  kTagInferReply = 4096
};
inline constexpr int kMaxEnvGroups = 1024;

// The last replay dump as the replay saw it.
struct DumpStatus {
  int64_t dumps = 0, failures = 0;  // completed and failed dumps so far
  int64_t items = 0;                // of the last completed dump
  uint32_t checksum = 0;
  double seconds = 0;
  std::string path, last_error;     // last_error: of the last failed dump ("" = none failed)
  bool final_failed = false;        // the end-of-run dump failed (learner 0 then exits 3)
};

// The replay's part of the checkpoints (core/checkpoint.h), as the replay saw it.
struct CheckpointStatus {
  int64_t requests = 0, completed = 0, failures = 0;
  int64_t items = 0;                // replay items in the last completed one
  uint32_t checksum = 0;            // their CRC-32 (as in the dump)
  double seconds = 0;
  bool last_ok = false;             // the last request (dir) was written
  std::string dir, last_error;      // dir: of the last request; last_error: of the last failure
};

// The replay's counters, sent with every SampleReply and with the LearnerByeAck. Counted by the
// replay alone; learners and actors keep their own counts so tests can compare them.
struct ReplayStatus {
  int64_t env_steps = 0;          // env steps of the rollouts stored
  int64_t actor_env_steps = 0;    // env steps the actors say they sent (from ActorDone; final only)
  int64_t rollouts = 0, discarded_rollouts = 0, episodes = 0;
  int64_t inserted = 0, restored = 0, evicted = 0, consumed = 0, fill = 0, capacity = 0;
  int64_t restored_seq_end = 0;   // insertion numbers below this are items restored from a dump
  int64_t sampled = 0, batches = 0, priority_updates = 0, stale_priority_updates = 0;
  double max_priority = 1;
  // Replay shards (roles.replays): this shard's index, its sampling mass (prioritized: the sum of
  // priority^alpha over its items; uniform and fifo: its item count) and the importance exponent
  // it weights with. A learner splits each batch over the shards in proportion to their masses.
  int64_t shard = 0;
  double priority_mass = 0, importance_exponent = 0;
  std::vector<int64_t> sampled_by_learner;
  DumpStatus dump;
  CheckpointStatus checkpoint;

  int64_t removed() const { return evicted + consumed; }
};

}  // namespace mpirl
