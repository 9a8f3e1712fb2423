// The emulated actors of bench_replay_load (bench/replay_load.h): their rollout frames, the
// raw-MPI phase, and the rollouts they send to their shard.
#include <mpi.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "bench/replay_load.h"
#include "comm/protocol.h"
#include "comm/rollout_codec.h"
#include "comm/seq_layout.h"
#include "comm/wire.h"
#include "core/config.h"
#include "envs/registry.h"
#include "envs/vector_env.h"

namespace mpirl::replay_load {

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

}  // namespace mpirl::replay_load
