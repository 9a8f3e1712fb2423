// Load generator for the replay (issue 31, item 3): the replay's real loop (buffer/replay.h,
// run_replay) on K shards between emulated learners and actors that speak the real wire format.
//   mpirun -n L+K+A bench_replay_load [--learners L] [--shards K] [--obs-dim 7056] [--envs 8]
//          [--T 32] [--batch 32] [--rate R] [--seconds 10] [--capacity 2048] [--selector prioritized]
// Ranks 0..L-1 are learners: each keeps one batch in flight, split over the shards as a real
// learner splits it (Multinomial over the masses the shards report; learner/batch_source.h), and
// answers every batch with priority updates for its items, each to its shard. The replay shards
// are placed as roles.replays places them (comm/ranks.h, with the hosts' real names); --capacity
// is per shard. The rest are actors: each sends rollouts of E x T steps to its shard (--rate R
// rollouts/s each, 0 = as fast as the replay's acknowledgements allow, two in flight like
// actor.max_inflight). No rank busy-polls: emulated ranks sleep 20 us between tests. First a
// raw-MPI phase: the actors send the same frames to their shard's rank, which only receives them
// (the bandwidth the transport gives this pattern).
// Printed by rank 0: the replay's own counts over the measured window (items in, GB/s in, batches
// and GB/s out), the learners' request-to-reply latency (p50, p99), and raw MPI in the same run.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <cstring>
#include <random>
#include <vector>

#include "buffer/replay.h"
#include "comm/protocol.h"
#include "comm/rollout_codec.h"
#include "comm/ranks.h"
#include "comm/seq_layout.h"
#include "comm/shard_sampling.h"
#include "comm/shard_status.h"
#include "comm/wire.h"
#include "core/config.h"
#include "core/error.h"
#include "core/run_dir.h"
#include "envs/registry.h"
#include "envs/vector_env.h"

using namespace mpirl;

namespace {

double now() { return MPI_Wtime(); }
void nap() { ::usleep(20); }

// Receives the next message with `tag` from `src` (MPI_ANY_SOURCE allowed) without busy-polling.
wire::Message recv(std::vector<char>& buf, int src, int tag, int* from = nullptr) {
  MPI_Status st;
  for (int flag = 0; !flag;) {
    MPI_Iprobe(src, tag, MPI_COMM_WORLD, &flag, &st);
    if (!flag) nap();
  }
  int n = 0;
  MPI_Get_count(&st, MPI_BYTE, &n);
  buf.resize(size_t(n));
  MPI_Recv(buf.data(), n, MPI_BYTE, st.MPI_SOURCE, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  if (from) *from = st.MPI_SOURCE;
  return wire::decode(buf.data(), size_t(n), st.MPI_SOURCE);
}

void wait(MPI_Request& r) {
  for (int done = 0; !done;) {
    MPI_Test(&r, &done, MPI_STATUS_IGNORE);
    if (!done) nap();
  }
}

// The rollout frames an actor sends, in turn (each may be compressed: sizes differ).
struct Frames {
  std::vector<std::vector<char>> buf;
  size_t max_bytes() const {
    size_t m = 0;
    for (auto& b : buf) m = std::max(m, b.size());
    return m;
  }
  double mean_bytes() const {
    double t = 0;
    for (auto& b : buf) t += double(b.size());
    return buf.empty() ? 0 : t / double(buf.size());
  }
};

// Synthetic: random finite floats. A real env (--env): `record` rollouts of its own frames with
// random actions (frame 0 of each the last of the one before), every other field zero; with
// `codec`, each sent compressed (comm/rollout_codec.h) as actors do.
Frames rollout_frames(const Config& cfg, const SeqLayout& layout, int64_t E, int rank, int record, ObsCodec* codec) {
  wire::Envelope env;
  env.kind = wire::Kind::Rollout;
  env.sender = rank;
  env.arrays = layout.arrays(E, true, 0);
  std::vector<size_t> off;
  std::vector<char> payload(wire::payload_bytes(env.arrays, &off));
  Frames f;
  if (cfg.env.id == "Synthetic") {
    std::mt19937 rng(static_cast<uint32_t>(rank));
    for (size_t i = 0; i < payload.size(); i += 4) payload[i] = char(rng() & 0x3f);  // finite floats
    for (int k = 0; k < 2; ++k) f.buf.push_back(wire::build_frame(env, payload.data(), payload.size()));
    return f;
  }
  auto venv = envs::make_vector_env(cfg, int(E), uint64_t(rank));
  const auto& spec = venv->spec();
  const int64_t T = layout.T(), OB = spec.obs_bytes();
  auto* obs = reinterpret_cast<uint8_t*>(payload.data() + off[0]);
  auto* init = reinterpret_cast<uint8_t*>(payload.data() + layout.offset(Seq::IsInit, E));
  std::vector<float> reward(static_cast<size_t>(E));
  std::vector<uint8_t> term(static_cast<size_t>(E)), trunc(static_cast<size_t>(E));
  std::vector<int64_t> actions(static_cast<size_t>(E));
  std::mt19937_64 rng(uint64_t(rank) + 1);
  venv->reset(obs, (T + 1) * spec.obs_size(), init, T + 1);
  for (int r = 0; r < record; ++r) {
    if (r > 0)
      for (int64_t e = 0; e < E; ++e) {
        std::memcpy(obs + (e * (T + 1)) * OB, obs + (e * (T + 1) + T) * OB, size_t(OB));
        init[e * (T + 1)] = init[e * (T + 1) + T];
      }
    for (int64_t t = 0; t < T; ++t) {
      for (auto& a : actions) a = int64_t(rng() % uint64_t(std::max<int64_t>(spec.num_actions, 1)));
      envs::StepOutputs so;
      so.obs = obs + (t + 1) * OB;
      so.obs_stride = (T + 1) * spec.obs_size();
      so.is_init = init + t + 1;
      so.is_init_stride = T + 1;
      so.reward = reward.data();
      so.terminated = term.data();
      so.truncated = trunc.data();
      venv->step(actions.data(), nullptr, so);
    }
    std::vector<char> frame;
    if (codec) {
      encode_rollout(*codec, layout, payload.data(), E, 0, env, frame);
    } else {
      frame = wire::build_frame(env, payload.data(), payload.size());
    }
    f.buf.push_back(std::move(frame));
  }
  return f;
}

// Phase 1: raw MPI, every actor sends `n` frames to `dest`, which receives them into one buffer.
double raw_phase(const Frames& f, size_t max_bytes, int n, int dest, bool receiver, bool sender, int senders) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = now();
  if (receiver) {
    std::vector<char> in(max_bytes);
    for (int k = 0; k < n * senders; ++k) {
      MPI_Request r;
      MPI_Irecv(in.data(), int(in.size()), MPI_BYTE, MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, &r);
      wait(r);
    }
  } else if (sender) {
    MPI_Request r[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    for (int k = 0; k < n; ++k) {
      if (r[k % 2] != MPI_REQUEST_NULL) wait(r[k % 2]);
      const auto& b = f.buf[size_t(k) % f.buf.size()];
      MPI_Isend(b.data(), int(b.size()), MPI_BYTE, dest, 99, MPI_COMM_WORLD, &r[k % 2]);
    }
    for (auto& q : r)
      if (q != MPI_REQUEST_NULL) wait(q);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return now() - t0;
}

void actor(const Frames& f, int replay, int64_t steps_per_rollout, double rate, double seconds) {
  std::vector<char> in;
  MPI_Request req[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  int credits = 2;
  int64_t sent = 0;
  const double t0 = now(), period = rate > 0 ? 1.0 / rate : 0;
  double next = t0;
  while (now() - t0 < seconds) {
    int flag = 0;
    MPI_Iprobe(replay, kTagActorCtl, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
    if (flag) {
      recv(in, replay, kTagActorCtl);
      ++credits;
      continue;
    }
    if (credits > 0 && now() >= next) {
      auto& r = req[sent % 2];
      if (r != MPI_REQUEST_NULL) wait(r);
      const auto& b = f.buf[size_t(sent) % f.buf.size()];
      MPI_Isend(b.data(), int(b.size()), MPI_BYTE, replay, kTagRollout, MPI_COMM_WORLD, &r);
      ++sent;
      --credits;
      next = period > 0 ? std::max(next + period, now() - period) : now();  // no catching up in bursts
      continue;
    }
    nap();
  }
  for (auto& r : req)
    if (r != MPI_REQUEST_NULL) wait(r);
  while (credits < 2) {
    recv(in, replay, kTagActorCtl);
    ++credits;
  }
  wire::Envelope done;
  done.kind = wire::Kind::ActorDone;
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  done.sender = rank;
  done.seq = uint64_t(sent);
  done.arrays = {{"env_steps", wire::DType::I64, {1}}};
  const int64_t steps = sent * steps_per_rollout;
  auto frame = wire::build_frame(done, &steps, 8);
  MPI_Send(frame.data(), int(frame.size()), MPI_BYTE, replay, kTagRollout, MPI_COMM_WORLD);
  for (;;)
    if (recv(in, replay, kTagActorCtl).env.kind == wire::Kind::ActorDoneAck) break;
}

struct LearnerResult {
  std::vector<double> latency;
  ReplayStatus first, last, final_status;
  double t_first = 0, t_last = 0;
  int64_t reply_bytes = 0;
};

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

double pct(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(q * double(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, world = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  CLI::App app("load generator for the replay (K shards)");
  int L = 1, K = 1, obs_dim = 7056, E = 8, T = 32, B = 32, capacity = 2048, raw_messages = 100;
  double rate = 0, seconds = 10, warmup = 2;
  std::string selector = "prioritized", env_id = "Synthetic";
  bool compress = false;
  int record = 4;
  app.add_option("--learners", L);
  app.add_option("--shards", K, "replay shards (roles.replays); --capacity is per shard");
  app.add_option("--obs-dim", obs_dim);
  app.add_option("--envs", E);
  app.add_option("--T", T);
  app.add_option("--batch", B);
  app.add_option("--rate", rate, "rollouts/s per actor (0: as fast as acknowledged)");
  app.add_option("--seconds", seconds);
  app.add_option("--warmup", warmup, "seconds before the measured window");
  app.add_option("--capacity", capacity);
  app.add_option("--selector", selector);
  app.add_option("--raw-messages", raw_messages, "frames per actor in the raw-MPI phase");
  app.add_option("--env", env_id, "Synthetic (--obs-dim floats), or a real env whose frames the actors record");
  app.add_option("--record", record, "rollouts each actor records from --env and sends in turn");
  app.add_flag("--compress", compress, "send the recorded observations compressed (uint8 image envs)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (rank == 0) app.exit(e);
    MPI_Finalize();
    return 2;
  }
  const int A = world - L - K;
  if (A < 1 || L < 1 || K < 1) {
    if (rank == 0) fmt::print(stderr, "needs --learners L >= 1, --shards K >= 1 and at least one actor: mpirun -n L+K+A\n");
    MPI_Finalize();
    return 2;
  }
  try {
    Config cfg = load_config("", {fmt::format("env.id=\"{}\"", env_id), fmt::format("env.obs_dim={}", obs_dim),
                                  fmt::format("env.num_envs={}", E), fmt::format("actor.rollout_len={}", T),
                                  fmt::format("learner.batch_size={}", B), fmt::format("replay.capacity={}", capacity),
                                  fmt::format("replay.selector=\"{}\"", selector), "replay.max_times_sampled=0",
                                  "replay.samples_per_insert=0", fmt::format("replay.min_size_to_sample={}", B),
                                  "replay.dump=\"never\"", "run.stall_timeout_s=0",
                                  fmt::format("roles.learners={}", L), fmt::format("roles.replays={}", K)});
    const std::vector<std::string> hosts = gather_hosts();
    const Layout layout = make_layout(cfg, world, hosts);
    Comms comms = Comms::create(layout, hosts);
    const SeqLayout seq(envs::env_spec(cfg), T, 0);
    const bool is_actor = layout.role_of(rank) == Role::Actor;
    const bool is_replay = layout.role_of(rank) == Role::Replay;
    // An actor's shard; a shard's own rank (for the raw phase).
    const int replay = is_actor ? layout.replay_of(rank) : is_replay ? rank : layout.replay_rank();
    const int my_actors = is_replay ? int(layout.actors_of_shard(layout.shard_index(rank)).size()) : 0;
    std::unique_ptr<ObsCodec> codec;
    if (compress) codec = std::make_unique<ObsCodec>();
    Frames frames = is_actor ? rollout_frames(cfg, seq, E, rank, record, codec.get()) : Frames{};
    // Every rank learns the largest frame (the raw phase's receiver sizes its buffer by it) and
    // the bytes the raw phase moves.
    uint64_t fb = frames.max_bytes(), fbmax = 0;
    MPI_Allreduce(&fb, &fbmax, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    double moved = 0, moved_all = 0;
    for (int k = 0; k < raw_messages && is_actor; ++k) moved += double(frames.buf[size_t(k) % frames.buf.size()].size());
    MPI_Allreduce(&moved, &moved_all, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    double mean_frame = frames.mean_bytes(), mean_all = 0;
    MPI_Allreduce(&mean_frame, &mean_all, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    mean_all /= A;
    const double raw_s = raw_phase(frames, size_t(fbmax), raw_messages, replay, is_replay, is_actor, my_actors);
    const double raw_gbs = moved_all / raw_s / 1e9;
    RunStart start;
    start.run_dir = "/tmp";
    LearnerResult res;
    if (is_replay) {
      buffer::run_replay(cfg, comms, start);
    } else if (is_actor) {
      actor(frames, replay, int64_t(E) * T, rate, seconds);
    } else {
      res = learner(seq, layout.replay_ranks(), rank, B, seconds, warmup);
    }
    // Latencies of every learner to rank 0.
    std::vector<double> lat = res.latency;
    int n = int(lat.size());
    std::vector<int> counts(static_cast<size_t>(world));
    MPI_Gather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
    std::vector<int> displs(static_cast<size_t>(world), 0);
    int total = 0;
    for (int r = 0; r < world; ++r) {
      displs[size_t(r)] = total;
      total += counts[size_t(r)];
    }
    std::vector<double> all(size_t(std::max(total, 1)));
    MPI_Gatherv(lat.data(), n, MPI_DOUBLE, all.data(), counts.data(), displs.data(), MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank == 0) {
      all.resize(size_t(total));
      const double dt = res.t_last - res.t_first;
      const auto& a = res.first;
      const auto& b = res.last;
      const double items_in = double(b.inserted - a.inserted), sampled = double(b.sampled - a.sampled);
      const double seq_bytes = double(seq.bytes_per_sequence());
      fmt::print("replay load: {} learner(s) x batch {}, {} replay shard(s) on {} host(s), {} actor(s) x {} envs x T={} ({}, "
                 "{:.1f} KiB per item, {:.1f} KiB per rollout message{}), rate {}, selector {}, window {:.1f} s\n",
                 L, B, K, comms.num_hosts(), A, E, T, env_id == "Synthetic" ? fmt::format("Synthetic obs {} floats", obs_dim) : env_id,
                 double(seq.bytes_per_sequence()) / 1024, mean_all / 1024, compress ? ", compressed" : "",
                 rate > 0 ? fmt::format("{} rollouts/s per actor", rate) : std::string("unlimited"), selector, dt);
      fmt::print("raw MPI, actors -> their shard's rank : {:.3f} GB/s\n", raw_gbs);
      const double wire_gbs = items_in / double(E) * mean_all / dt / 1e9;
      fmt::print("replay in  (its inserted count)        : {:.0f} items/s, {:.0f} env steps/s, {:.3f} GB/s stored, "
                 "{:.3f} GB/s on the wire ({:.1f}% of raw MPI)\n",
                 items_in / dt, items_in * T / dt, items_in * seq_bytes / dt / 1e9, wire_gbs, 100 * wire_gbs / raw_gbs);
      fmt::print("replay out (its sampled count)         : {:.0f} items/s, {:.3f} GB/s, sample/insert {:.2f}\n",
                 sampled / dt, sampled * seq_bytes / dt / 1e9, items_in > 0 ? sampled / items_in : 0.0);
      fmt::print("sample latency (request to reply)     : p50 {:.2f} ms, p99 {:.2f} ms over {} requests\n",
                 1e3 * pct(all, 0.5), 1e3 * pct(all, 0.99), all.size());
      const auto& f = res.final_status;
      fmt::print("final counts: inserted {} = rollouts {} x {}, sampled {}, priority updates {} (stale {})\n",
                 f.inserted, f.rollouts, E, f.sampled, f.priority_updates, f.stale_priority_updates);
    }
    comms.free();
  } catch (const std::exception& e) {
    fmt::print(stderr, "rank {}: {}\n", rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return 0;
}
