// The emulated learners of bench_replay_load (bench/replay_load.h): batches split over the shards
// as a real learner splits them, priority updates for every batch, the latencies and counts.
#include <mpi.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "bench/replay_load.h"
#include "comm/protocol.h"
#include "comm/seq_layout.h"
#include "comm/shard_sampling.h"
#include "comm/shard_status.h"
#include "comm/wire.h"
#include "core/error.h"

namespace mpirl::replay_load {

LearnerResult learner(const SeqLayout& layout, const std::vector<int>& shards, int rank, int64_t B, double seconds,
                      double warmup) {
  LearnerResult res;
  const size_t K = shards.size();
  std::vector<std::vector<char>> in(K);
  const size_t nf = layout.fields().size();
  std::vector<ReplayStatus> last(K);
  std::vector<char> heard(K, 0);
  std::mt19937_64 rng(uint64_t(rank) + 17);
  auto send = [&](wire::Envelope env, int dest, const std::vector<char>& payload) {
    env.sender = rank;
    auto f = wire::build_frame(env, payload.data(), payload.size());
    MPI_Send(f.data(), int(f.size()), MPI_BYTE, dest, kTagLearnerReq, MPI_COMM_WORLD);
  };
  const double t0 = now();
  bool started = false;
  while (now() - t0 < seconds) {
    const double a = now();
    // The split a learner makes: the latest masses, an even split before every shard answered.
    std::vector<double> masses(K, 1.0);
    double total = 0;
    for (size_t k = 0; k < K; ++k) total += heard[k] ? last[k].priority_mass : 0;
    if (total > 0 && std::all_of(heard.begin(), heard.end(), [](char h) { return h != 0; }))
      for (size_t k = 0; k < K; ++k) masses[k] = last[k].priority_mass;
    const auto n = K == 1 ? std::vector<int64_t>{B} : split_batch(B, masses, rng);
    for (size_t k = 0; k < K; ++k) {
      wire::Envelope req;
      req.kind = wire::Kind::SampleRequest;
      std::vector<char> payload;
      if (K > 1) {
        req.arrays = {{"n", wire::DType::I64, {1}}};
        payload.resize(wire::payload_bytes(req.arrays));
        std::memcpy(payload.data(), &n[k], 8);
      }
      send(req, shards[k], payload);
    }
    std::vector<wire::Message> msgs(K);
    for (size_t k = 0; k < K; ++k) {
      do msgs[k] = recv(in[k], shards[k], kTagLearnerReply);
      while (msgs[k].env.kind == wire::Kind::ReplayBusy);
      if (msgs[k].env.kind != wire::Kind::SampleReply) throw Error("learner: unexpected reply");
      last[k] = msgs[k].env.status;
      heard[k] = 1;
    }
    const double b = now();
    if (b - t0 >= warmup) {
      if (!started) {
        res.first = merge_shard_status(last);
        res.t_first = b;
        started = true;
      } else {
        res.latency.push_back(b - a);
        for (auto& i : in) res.reply_bytes += int64_t(i.size());
      }
      res.last = merge_shard_status(last);
      res.t_last = b;
    }
    for (size_t k = 0; k < K; ++k) {
      const int64_t m = n[k];
      if (m == 0) continue;
      wire::Envelope pu;
      pu.kind = wire::Kind::PriorityUpdate;
      pu.arrays = {{"slot", wire::DType::I64, {m}}, {"generation", wire::DType::I64, {m}},
                   {"priority", wire::DType::F32, {m}}};
      std::vector<size_t> off;
      std::vector<char> payload(wire::payload_bytes(pu.arrays, &off));
      std::memcpy(payload.data() + off[0], msgs[k].array<int64_t>(nf + 2), size_t(m) * 8);
      std::memcpy(payload.data() + off[1], msgs[k].array<int64_t>(nf + 3), size_t(m) * 8);
      for (int64_t i = 0; i < m; ++i) {
        const float p = 0.1f + float((i * 7919) % 97);
        std::memcpy(payload.data() + off[2] + size_t(i) * 4, &p, 4);
      }
      send(pu, shards[k], payload);
    }
  }
  std::vector<ReplayStatus> finals;
  for (size_t k = 0; k < K; ++k) {
    wire::Envelope bye;
    bye.kind = wire::Kind::LearnerBye;
    send(bye, shards[k], {});
  }
  for (size_t k = 0; k < K; ++k)
    for (;;) {
      auto msg = recv(in[k], shards[k], kTagLearnerReply);
      if (msg.env.kind == wire::Kind::LearnerByeAck) {
        finals.push_back(msg.env.status);
        break;
      }
    }
  res.final_status = merge_shard_status(finals);
  return res;
}

}  // namespace mpirl::replay_load
