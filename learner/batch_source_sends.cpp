// BatchSource: what it sends to the replay (requests aside) and how it leaves.
#include <c10/core/impl/VirtualGuardImpl.h>

#include <cstring>

#include "comm/shard_status.h"
#include "core/error.h"
#include "learner/batch_source.h"

namespace mpirl::learner {

using wire::DType;

void BatchSource::send_small(wire::Kind kind, int dest) {
  wire::Envelope env;
  env.kind = kind;
  env.sender = comms_.rank;
  env.seq = seq_++;
  auto& buf = sends_.acquire();
  buf = wire::build_frame(env, nullptr, 0);
  sends_.send(buf, buf.size(), dest, kTagLearnerReq, comms_.world);
}

void BatchSource::send_arrays(wire::Kind kind, int dest, std::vector<wire::ArrayDesc> arrays,
                              const std::function<void(char* payload, const std::vector<size_t>& offsets)>& fill) {
  wire::Envelope env;
  env.kind = kind;
  env.sender = comms_.rank;
  env.seq = seq_++;
  env.arrays = std::move(arrays);
  const size_t off = wire::natural_payload_offset(env);
  std::vector<size_t> offsets;
  const size_t total = off + wire::payload_bytes(env.arrays, &offsets);
  auto& buf = sends_.acquire();
  buf.resize(total);
  wire::write_header(buf.data(), off, env);
  fill(buf.data() + off, offsets);
  sends_.send(buf, total, dest, kTagLearnerReq, comms_.world);
}

void BatchSource::send_checkpoint_request(const std::string& dir, bool final) {
  flush_priorities(true);  // the checkpoint holds every priority computed before it
  for (const auto& sh : shards_)  // every shard writes its own part into `dir`
    send_arrays(wire::Kind::CheckpointRequest, sh.rank,
                {{"dir", DType::U8, {int64_t(dir.size())}}, {"final", DType::U8, {1}}},
                [&](char* p, const std::vector<size_t>& o) {
                  std::memcpy(p + o[0], dir.data(), dir.size());
                  p[o[1]] = final ? 1 : 0;
                });
}

void BatchSource::send_priority_arrays(const std::vector<int>& shards, const std::vector<int64_t>& all_slots,
                                       const std::vector<int64_t>& all_generations, const float* all_priorities) {
  for (size_t k = 0; k < shards_.size(); ++k) {
    std::vector<int64_t> slots, generations;
    std::vector<float> priorities;
    for (size_t i = 0; i < all_slots.size(); ++i)
      if (shards.empty() || shards[i] == int(k)) {
        slots.push_back(all_slots[i]);
        generations.push_back(all_generations[i]);
        priorities.push_back(all_priorities[i]);
      }
    const int64_t B = int64_t(slots.size());
    if (B == 0) continue;
    send_arrays(wire::Kind::PriorityUpdate, shards_[k].rank,
                {{"slot", DType::I64, {B}}, {"generation", DType::I64, {B}}, {"priority", DType::F32, {B}}},
                [&](char* p, const std::vector<size_t>& o) {
                  std::memcpy(p + o[0], slots.data(), size_t(B) * 8);
                  std::memcpy(p + o[1], generations.data(), size_t(B) * 8);
                  std::memcpy(p + o[2], priorities.data(), size_t(B) * 4);
                });
  }
}

void BatchSource::send_priorities(const Batch& b, const torch::Tensor& priorities) {
  if (!prioritized_) return;
  const int64_t B = priorities.numel();
  MPIRL_CHECK(B == int64_t(b.slots.size()), "{} priorities for {} sampled items", B, b.slots.size());
  if (!priorities.is_cuda()) {
    auto pc = priorities.to(torch::kFloat32).contiguous();
    send_priority_arrays(b.shards, b.slots, b.generations, pc.data_ptr<float>());
    return;
  }
  // Copied back on the compute stream behind the update; sent once the copy has landed.
  PendingPriorities p{b.shards, b.slots, b.generations,
                      torch::empty({B}, torch::TensorOptions().dtype(torch::kFloat32).pinned_memory(true)),
                      std::make_unique<c10::Event>(priorities.device().type())};
  p.host.copy_(priorities.reshape({B}), /*non_blocking=*/true);
  p.copied->record(c10::impl::VirtualGuardImpl(priorities.device().type()).getStream(priorities.device()));
  priorities_.push_back(std::move(p));
  flush_priorities(false);
}

void BatchSource::flush_priorities(bool wait) {
  while (!priorities_.empty()) {
    auto& p = priorities_.front();
    if (wait) p.copied->synchronize();
    else if (!p.copied->query()) return;
    send_priority_arrays(p.shards, p.slots, p.generations, p.host.data_ptr<float>());
    priorities_.pop_front();
  }
}

ReplayStatus BatchSource::leave(const DrainedReply& on_drained) {
  flush_priorities(true);
  for (const auto& sh : shards_) send_small(wire::Kind::LearnerBye, sh.rank);
  // Replies still in flight land in the posted receives, in order; the ByeAck is the last
  // message a shard sends us. Then the receives still posted can never match: cancel them.
  std::vector<ReplayStatus> finals;
  for (Shard& sh : shards_) {
    for (bool acked = false; !acked;) {
      Recv& r = sh.ring[sh.head];
      int count = sh.ready;
      if (count < 0) {
        MPI_Status st;
        wait_request(r.req, [&] { sends_.progress(); }, &st);
        MPIRL_MPI(MPI_Get_count(&st, MPI_BYTE, &count));
      }
      sh.ready = -1;
      auto msg = wire::decode(r.buf.data(), size_t(count), sh.rank,
                              {wire::Kind::SampleReply, wire::Kind::LearnerByeAck, wire::Kind::CheckpointDone,
                               wire::Kind::ReplayBusy});
      if (take_control(sh, msg)) continue;
      if (msg.env.kind == wire::Kind::LearnerByeAck) {
        acked = true;
        finals.push_back(msg.env.status);
        sh.last = msg.env.status;
      } else {
        received_ += msg.env.arrays.empty() || msg.env.arrays[0].shape.empty() ? 0 : msg.env.arrays[0].shape[0];
        const size_t nf = layout_.fields().size();
        const auto& a = msg.env.arrays;
        if (msg.env.has_status) sh.last = msg.env.status;
        if (on_drained && a.size() > nf + 1 && a[nf].name == "episode_return" && a[nf].dtype == DType::F32 &&
            a[nf + 1].name == "episode_length" && a[nf + 1].dtype == DType::I32 && a[nf].shape == a[nf + 1].shape &&
            a[nf].shape.size() == 1) {
          const int64_t m = a[nf].shape[0];
          if (sh.checkpoint_done) {  // after this shard's CheckpointDone, before the others': held (stage())
            sh.held_returns.insert(sh.held_returns.end(), msg.array<float>(nf), msg.array<float>(nf) + m);
            sh.held_lengths.insert(sh.held_lengths.end(), msg.array<int32_t>(nf + 1), msg.array<int32_t>(nf + 1) + m);
          } else {
            on_drained(std::vector<float>(msg.array<float>(nf), msg.array<float>(nf) + m),
                       std::vector<int32_t>(msg.array<int32_t>(nf + 1), msg.array<int32_t>(nf + 1) + m),
                       merged_status());
          }
        }
        post(sh, r);
      }
      sh.head = (sh.head + 1) % sh.ring.size();
    }
  }
  // Statistics held for a checkpoint whose last CheckpointDone never came (the run ended first).
  for (auto& sh : shards_) {
    if (on_drained && !sh.held_returns.empty()) on_drained(sh.held_returns, sh.held_lengths, merged_status());
    sh.held_returns.clear();
    sh.held_lengths.clear();
  }
  for (auto& sh : shards_)
    for (auto& r : sh.ring) {
      if (r.req == MPI_REQUEST_NULL) continue;
      MPIRL_MPI(MPI_Cancel(&r.req));
      MPIRL_MPI(MPI_Wait(&r.req, MPI_STATUS_IGNORE));
    }
  sends_.wait_all();
  return merge_shard_status(finals);
}

}  // namespace mpirl::learner
