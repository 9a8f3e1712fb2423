#pragma once
// The batch source: keeps learner.prefetch sample requests in flight with a receive posted for
// each (so a reply lands while the current update runs), decodes each reply, checks it against
// the run's layout, and stages it for the device: time-major tensors in pinned host buffers,
// copied to a CUDA device with non-blocking copies on a copy stream of their own, so that they
// overlap the update still running on the compute stream (which waits for them on the device,
// never on the host). It also sends priority updates (on CUDA: copied back without a blocking
// sync, sent once their copy has landed) and, at the end, leaves the replay
// (LearnerBye -> LearnerByeAck).
//
// Replay shards (roles.replays = K > 1, comm/ranks.h): every batch is one request to each shard,
// for n_k sequences drawn from Multinomial(B, M_k / sum M) over the shards' sampling masses M_k
// (comm/shard_sampling.h; each shard reports its mass with every reply, the split uses the
// latest one heard, 1 each before any), so every sequence is drawn from one global distribution.
// The K replies (a shard given 0 still answers, with its status) are joined into one batch in
// shard order; prioritized importance weights are recomputed over the whole batch from each
// item's probability within its shard and the masses the split used. Priority updates go to the
// shard that owns the item; checkpoint requests and the goodbye go to every shard; statuses are
// merged (comm/shard_status.h), a checkpoint is done once every shard has written its part.
#include <c10/core/Event.h>
#include <c10/core/Stream.h>

#include <deque>
#include <functional>
#include <optional>
#include <memory>
#include <random>
#include <vector>

#include <torch/torch.h>

#include "comm/protocol.h"
#include "comm/ranks.h"
#include "comm/seq_layout.h"
#include "comm/transport.h"
#include "core/config.h"
#include "learner/train_batch.h"
#include "learner/trainer.h"

namespace mpirl::learner {

struct BatchStaging;  // learner/batch_staging.h

struct Batch {
  TrainBatch train;  // on the device, time-major
  BootInputs boot;   // truncation bootstraps, on the device
  std::vector<int64_t> slots, generations, insert_seqs, versions;  // host, per sequence
  std::vector<int> shards;  // per sequence: the replay shard that holds it (index in the layout)
  std::vector<float> episode_returns;   // episodes finished since the last reply (learner 0 only)
  std::vector<int32_t> episode_lengths;
  ReplayStatus status;
  int64_t kept = 0;         // sequences trained on
  int64_t too_old = 0;      // sequences masked out: policy lag > learner.max_policy_lag
  int64_t lag_sum = 0, lag_max = 0, lag_known = 0;  // lag of the items whose version is known
  int64_t lag_unknown = 0;  // items from a previous run (version above ours: restored)
  int64_t restored = 0;     // items restored from a dump or checkpoint (insert_seq below their shard's restored_seq_end)
  int64_t truncations = 0;  // steps truncated (and not terminated), counted from the flags
};

class BatchSource {
 public:
  BatchSource(const Config& cfg, const Comms& comms, const SeqLayout& layout, const envs::EnvSpec& spec,
              torch::Device device);
  ~BatchSource();  // defined where BatchStaging is complete
  BatchSource(const BatchSource&) = delete;
  BatchSource& operator=(const BatchSource&) = delete;

  void start();     // posts the receives and sends learner.prefetch requests
  void progress();  // lets MPI move posted receives and sends along
  // The next batch; `version` is the learner's policy version (for lag). Between tests it calls
  // keep_waiting(), which returns false to give up: then nullptr. The batch stays valid until the
  // next call.
  Batch* next(int64_t version, const std::function<bool()>& keep_waiting);
  // New priorities for the items of `b` (prioritized replay only; a no-op otherwise). On CUDA they
  // are sent once their device-to-host copy has landed (checked by progress() and next()).
  void send_priorities(const Batch& b, const torch::Tensor& priorities);
  // Sends every pending priority now, waiting for its copy (every learner, at a checkpoint).
  void send_pending_priorities() { flush_priorities(true); }
  // Learner 0: asks the replay for its part of a checkpoint in `dir` (comm/protocol.h). A
  // non-final one is answered by a CheckpointDone, handed to on_checkpoint_done from next() or
  // leave() in stream order (after every SampleReply sent before it); a final one is written
  // after the last ActorDone and reported in leave()'s status.
  void send_checkpoint_request(const std::string& dir, bool final);
  std::function<void(const ReplayStatus&)> on_checkpoint_done;
  // The replay is writing or reading a file on its I/O thread and progressing (ReplayBusy, every
  // few seconds meanwhile): the caller's stall clock restarts.
  std::function<void()> on_replay_busy;
  // LearnerBye, drains the replies still in flight (their episode statistics and status go to
  // on_drained; their sequences are not trained on), waits for the LearnerByeAck; returns its
  // status. (Receives still posted when a BatchSource is destroyed mean the run is aborting.)
  using DrainedReply = std::function<void(const std::vector<float>& returns, const std::vector<int32_t>& lengths,
                                          const ReplayStatus& status)>;
  ReplayStatus leave(const DrainedReply& on_drained = {});
  int64_t items_received() const { return received_; }  // every sequence received, drained ones too

 private:
  using Recv = MsgBuffer;  // kept for MPI if the learner dies with the receive posted
  // One replay shard: its reply ring (one receive per request in flight), its latest status and
  // its answer to the checkpoint request in progress.
  struct Shard {
    int rank = -1;
    std::vector<Recv> ring;
    size_t head = 0;
    int ready = -1;  // bytes of the SampleReply that arrived at the ring's head and is not used yet
    ReplayStatus last;
    bool heard = false;
    std::optional<ReplayStatus> checkpoint_done;
    // Episode statistics this shard sent after its CheckpointDone while another shard's is still
    // awaited: its part holds them as pending, so learner 0 takes them only once the checkpoint is
    // done (as with one replay, whose statistics after CheckpointDone follow learner 0's snapshot).
    std::vector<float> held_returns;
    std::vector<int32_t> held_lengths;
  };
  // A request in flight: sequences asked of each shard and the masses the split used.
  struct Split {
    std::vector<int64_t> n;
    std::vector<double> masses;
  };
  // One shard's SampleReply, checked.
  struct Reply {
    const char* payload = nullptr;
    int64_t n = 0, m = 0;
    const float* returns = nullptr;
    const int32_t* lengths = nullptr;
    const int64_t *slots = nullptr, *generations = nullptr, *insert_seqs = nullptr;
    const float* weights = nullptr;
    const double* probs = nullptr;
    const ReplayStatus* status = nullptr;
  };
  struct PendingPriorities {
    std::vector<int> shards;
    std::vector<int64_t> slots, generations;
    torch::Tensor host;  // pinned, filled by a non-blocking copy
    std::unique_ptr<c10::Event> copied;
  };
  void post(const Shard& s, Recv& r);
  // Sends the pending priorities whose copy has landed, in order; all of them when `wait`.
  void flush_priorities(bool wait);
  // Each item's priority to the shard that holds it.
  void send_priority_arrays(const std::vector<int>& shards, const std::vector<int64_t>& slots,
                            const std::vector<int64_t>& generations, const float* priorities);
  void request();
  Reply check_reply(const wire::Message& msg, int rank, int64_t expected) const;
  void stage(const std::vector<Reply>& parts, const Split& split, int64_t version);
  void send_small(wire::Kind kind, int dest);
  // A frame of `arrays` to a replay rank; `fill` writes their payload at the given offsets.
  void send_arrays(wire::Kind kind, int dest, std::vector<wire::ArrayDesc> arrays,
                   const std::function<void(char* payload, const std::vector<size_t>& offsets)>& fill);
  // A CheckpointDone or ReplayBusy at the head of a shard's ring: handed on (a checkpoint once
  // every shard has answered), the receive posted again, the head moved on. False for any other kind.
  bool take_control(Shard& s, const wire::Message& msg);
  ReplayStatus merged_status() const;

  const Config& cfg_;
  const Comms& comms_;
  const SeqLayout& layout_;
  envs::EnvSpec spec_;
  torch::Device device_;
  const int64_t B_;
  const bool prioritized_;
  std::vector<Shard> shards_;
  std::deque<Split> splits_;   // one per request in flight, oldest first
  std::mt19937_64 rng_;        // the batch splits
  std::vector<char> merged_;   // the joined payload of a batch from several shards
  std::vector<std::unique_ptr<BatchStaging>> staging_;
  size_t stage_next_ = 0;
  std::optional<c10::Stream> copy_stream_;  // CUDA: host-to-device copies
  std::unique_ptr<c10::Event> staged_;       // CUDA: the last batch's copies are done
  std::deque<PendingPriorities> priorities_;
  Batch batch_;
  SendPool sends_;
  uint64_t seq_ = 0;
  int64_t received_ = 0;
};

}  // namespace mpirl::learner
