#include "learner/batch_source.h"
#include "learner/batch_staging.h"

#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <algorithm>
#include <cstring>

#include "comm/shard_sampling.h"
#include "comm/shard_status.h"
#include "core/error.h"

namespace mpirl::learner {

using wire::DType;


BatchSource::BatchSource(const Config& cfg, const Comms& comms, const SeqLayout& layout, const envs::EnvSpec& spec,
                         torch::Device device)
    : cfg_(cfg), comms_(comms), layout_(layout), spec_(spec), device_(device), B_(cfg.learner.batch_size),
      prioritized_(cfg.replay.selector == "prioritized"),
      rng_(cfg.run.seed * 1000003ull + uint64_t(comms.rank) * 7919ull + 11ull) {
  const size_t cap = sample_reply_capacity(layout_, B_, comms.layout.learners);
  for (int r : comms.layout.replay_ranks()) {
    Shard s;
    s.rank = r;
    s.ring.resize(size_t(cfg.learner.prefetch));
    for (auto& rb : s.ring) rb.buf.resize(cap);
    shards_.push_back(std::move(s));
  }
  for (int i = 0; i < 2; ++i) {
    auto s = std::make_unique<BatchStaging>();
    if (device_.is_cuda()) s->copied = std::make_unique<c10::Event>(device_.type());
    staging_.push_back(std::move(s));
  }
  if (device_.is_cuda()) {
    copy_stream_ = c10::impl::VirtualGuardImpl(device_.type()).getStreamFromGlobalPool(device_);
    staged_ = std::make_unique<c10::Event>(device_.type());
  }
}

BatchSource::~BatchSource() = default;

void BatchSource::post(const Shard& s, Recv& r) {
  MPIRL_MPI(MPI_Irecv(r.buf.data(), int(r.buf.size()), MPI_BYTE, s.rank, kTagLearnerReply, comms_.world, &r.req));
}

void BatchSource::request() {
  const size_t K = shards_.size();
  Split split;
  if (K == 1) {
    split.n = {B_};
    split.masses = {1.0};
    send_small(wire::Kind::SampleRequest, shards_[0].rank);
  } else {
    // The latest mass each shard reported; before every shard has been heard from (or while all
    // are empty) an even split, which the shards fill as their items arrive.
    bool known = true;
    double total = 0;
    for (const auto& s : shards_) {
      known = known && s.heard;
      total += s.heard ? s.last.priority_mass : 0.0;
    }
    split.masses.resize(K, 1.0);
    if (known && total > 0)
      for (size_t k = 0; k < K; ++k) split.masses[k] = shards_[k].last.priority_mass;
    split.n = split_batch(B_, split.masses, rng_);
    for (size_t k = 0; k < K; ++k) {
      const int64_t n = split.n[k];
      send_arrays(wire::Kind::SampleRequest, shards_[k].rank, {{"n", DType::I64, {1}}},
                  [n](char* p, const std::vector<size_t>& o) { std::memcpy(p + o[0], &n, 8); });
    }
  }
  splits_.push_back(std::move(split));
}

void BatchSource::start() {
  // Receives first: replies match them in posting order, one per request.
  for (auto& s : shards_)
    for (auto& r : s.ring) post(s, r);
  for (int i = 0; i < cfg_.learner.prefetch; ++i) request();
}

void BatchSource::progress() {
  flush_priorities(false);
  sends_.progress();
  int flag = 0;
  MPIRL_MPI(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comms_.world, &flag, MPI_STATUS_IGNORE));
}

ReplayStatus BatchSource::merged_status() const {
  std::vector<ReplayStatus> all;
  for (const auto& s : shards_) all.push_back(s.last);
  return merge_shard_status(all);
}

Batch* BatchSource::next(int64_t version, const std::function<bool()>& keep_waiting) {
  // Each shard's next SampleReply (control messages before it are handled on the way). A reply
  // that arrived stays marked at its ring head (ready) if another shard's is still awaited when
  // the caller gives up.
  for (Shard& sh : shards_) {
    Backoff b;
    while (sh.ready < 0) {
      Recv& r = sh.ring[sh.head];
      MPI_Status st;
      int done = 0;
      MPIRL_MPI(MPI_Test(&r.req, &done, &st));
      if (!done) {
        flush_priorities(false);
        sends_.progress();
        if (!keep_waiting()) return nullptr;
        b.idle();
        continue;
      }
      int count = 0;
      MPIRL_MPI(MPI_Get_count(&st, MPI_BYTE, &count));
      auto msg = wire::decode(r.buf.data(), size_t(count), sh.rank,
                              {wire::Kind::SampleReply, wire::Kind::CheckpointDone, wire::Kind::ReplayBusy});
      if (take_control(sh, msg)) continue;
      sh.ready = count;
    }
  }
  const Split split = std::move(splits_.front());
  splits_.pop_front();
  std::vector<wire::Message> msgs(shards_.size());
  std::vector<Reply> parts;
  for (size_t k = 0; k < shards_.size(); ++k) {
    Shard& sh = shards_[k];
    msgs[k] = wire::decode(sh.ring[sh.head].buf.data(), size_t(sh.ready), sh.rank, {wire::Kind::SampleReply});
  }
  for (size_t k = 0; k < shards_.size(); ++k) {
    parts.push_back(check_reply(msgs[k], shards_[k].rank, split.n[k]));
    shards_[k].last = *parts.back().status;
    shards_[k].heard = true;
  }
  stage(parts, split, version);  // copies everything out of the receive buffers
  // The buffers are free again: post their receives and ask for the batch after the ones in flight.
  for (auto& sh : shards_) {
    sh.ready = -1;
    post(sh, sh.ring[sh.head]);
    sh.head = (sh.head + 1) % sh.ring.size();
  }
  request();
  return &batch_;
}

bool BatchSource::take_control(Shard& sh, const wire::Message& msg) {
  const auto kind = msg.env.kind;
  if (kind != wire::Kind::CheckpointDone && kind != wire::Kind::ReplayBusy) return false;
  if (kind == wire::Kind::CheckpointDone && !msg.env.has_status)
    throw Error(fmt::format("CheckpointDone from rank {} carries no status", sh.rank));
  if (!msg.env.arrays.empty())
    throw Error(fmt::format("{} from rank {} carries {} arrays, expected none", wire::kind_name(kind), sh.rank,
                            msg.env.arrays.size()));
  const ReplayStatus status = msg.env.status;
  post(sh, sh.ring[sh.head]);  // no request behind it: the ring keeps one receive per reply in flight
  sh.head = (sh.head + 1) % sh.ring.size();
  if (kind == wire::Kind::CheckpointDone) {
    if (sh.checkpoint_done)
      throw Error(fmt::format("a second CheckpointDone from replay rank {} before the other shards answered", sh.rank));
    sh.checkpoint_done = status;
    std::vector<ReplayStatus> all;
    for (const auto& s : shards_)
      if (s.checkpoint_done) all.push_back(*s.checkpoint_done);
    if (all.size() < shards_.size()) return true;
    for (auto& s : shards_) s.checkpoint_done.reset();
    if (on_checkpoint_done) on_checkpoint_done(merge_shard_status(all));
  } else if (on_replay_busy) {
    on_replay_busy();
  }
  return true;
}

}  // namespace mpirl::learner
