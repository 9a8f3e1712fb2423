// The learners' requests to the replay rank (buffer/replay_server.h): sample requests and their
// replies, priority updates, goodbyes and checkpoint requests.
#include <algorithm>
#include <cstring>
#include <vector>

#include "buffer/messages.h"
#include "buffer/replay_server.h"
#include "core/error.h"

namespace mpirl::buffer {

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
    stalls_.start();  // the learners are up, and the first parameters are (about) at the actors
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

}  // namespace mpirl::buffer
