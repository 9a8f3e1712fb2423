#pragma once
// The batch source: keeps learner.prefetch sample requests in flight with a receive posted for
// each (so a reply lands while the current update runs), decodes each reply, checks it against
// the run's layout, and stages it for the device: time-major tensors, copied from pinned host
// buffers with non-blocking copies when the device is CUDA. It also sends priority updates and,
// at the end, leaves the replay (LearnerBye -> LearnerByeAck).
#include <functional>
#include <memory>
#include <vector>

#include <torch/torch.h>

#include "comm/protocol.h"
#include "comm/ranks.h"
#include "comm/seq_layout.h"
#include "comm/transport.h"
#include "core/config.h"
#include "learner/losses.h"
#include "learner/trainer.h"

namespace mpirl::learner {

struct Batch {
  TrainBatch train;  // on the device, time-major
  BootInputs boot;   // truncation bootstraps, on the device
  std::vector<int64_t> slots, generations, insert_seqs, versions;  // host, per sequence
  std::vector<float> episode_returns;   // episodes finished since the last reply (learner 0 only)
  std::vector<int32_t> episode_lengths;
  ReplayStatus status;
  int64_t kept = 0;         // sequences trained on
  int64_t too_old = 0;      // sequences masked out: policy lag > learner.max_policy_lag
  int64_t lag_sum = 0, lag_max = 0, lag_known = 0;  // lag of the items whose version is known
  int64_t lag_unknown = 0;  // items from a previous run (version above ours: restored)
  int64_t truncations = 0;  // steps truncated (and not terminated), counted from the flags
};

class BatchSource {
 public:
  BatchSource(const Config& cfg, const Comms& comms, const SeqLayout& layout, const envs::EnvSpec& spec,
              torch::Device device);
  ~BatchSource();  // defined where Staging is complete
  BatchSource(const BatchSource&) = delete;
  BatchSource& operator=(const BatchSource&) = delete;

  void start();     // posts the receives and sends learner.prefetch requests
  void progress();  // lets MPI move posted receives and sends along
  // The next batch; `version` is the learner's policy version (for lag). Between tests it calls
  // keep_waiting(), which returns false to give up: then nullptr. The batch stays valid until the
  // next call.
  Batch* next(int64_t version, const std::function<bool()>& keep_waiting);
  // New priorities for the items of `b` (prioritized replay only; a no-op otherwise).
  void send_priorities(const Batch& b, const torch::Tensor& priorities);
  // Learner 0: asks the replay for its part of a checkpoint in `dir` (comm/protocol.h). A
  // non-final one is answered by a CheckpointDone, handed to on_checkpoint_done from next() or
  // leave() in stream order (after every SampleReply sent before it); a final one is written
  // after the last ActorDone and reported in leave()'s status.
  void send_checkpoint_request(const std::string& dir, bool final);
  std::function<void(const ReplayStatus&)> on_checkpoint_done;
  // LearnerBye, drains the replies still in flight (their episode statistics and status go to
  // on_drained; their sequences are not trained on), waits for the LearnerByeAck; returns its
  // status. (Receives still posted when a BatchSource is destroyed mean the run is aborting.)
  using DrainedReply = std::function<void(const std::vector<float>& returns, const std::vector<int32_t>& lengths,
                                          const ReplayStatus& status)>;
  ReplayStatus leave(const DrainedReply& on_drained = {});
  int64_t items_received() const { return received_; }  // every sequence received, drained ones too

 private:
  struct Recv {
    std::vector<char> buf;
    MPI_Request req = MPI_REQUEST_NULL;
  };
  struct Staging;
  void post(Recv& r);
  void request();
  void stage(const wire::Message& msg, int64_t version);
  void send_small(wire::Kind kind);
  // A frame of `arrays` to the replay; `fill` writes their payload at the given offsets.
  void send_arrays(wire::Kind kind, std::vector<wire::ArrayDesc> arrays,
                   const std::function<void(char* payload, const std::vector<size_t>& offsets)>& fill);
  // A CheckpointDone in ring_[head_]: handed on, the receive posted again, head_ moved on.
  bool take_checkpoint_done(const wire::Message& msg);

  const Config& cfg_;
  const Comms& comms_;
  const SeqLayout& layout_;
  envs::EnvSpec spec_;
  torch::Device device_;
  const int replay_;
  const int64_t B_;
  const bool prioritized_;
  std::vector<Recv> ring_;
  size_t head_ = 0;
  std::vector<std::unique_ptr<Staging>> staging_;
  size_t stage_next_ = 0;
  Batch batch_;
  SendPool sends_;
  uint64_t seq_ = 0;
  int64_t received_ = 0;
};

}  // namespace mpirl::learner
