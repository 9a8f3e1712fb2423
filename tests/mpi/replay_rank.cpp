// The replay rank's real loop (buffer/replay.h: run_replay, its I/O thread, dumps and a checkpoint
// part) on 3 MPI ranks under AddressSanitizer + UndefinedBehaviorSanitizer (tests/hardening), with
// the learner (rank 0) and the actor (rank 2) played by this program over the real wire format:
//   - the actor sends kRollouts rollouts of num_envs sequences, one at a time (each acknowledged),
//     then ActorDone;
//   - the learner asks for batches, sends priority updates for every item it gets, asks for a
//     checkpoint part after kBatchesBeforeCheckpoint batches and waits for CheckpointDone (taking
//     any ReplayBusy meanwhile), then leaves (LearnerBye) and drains to the LearnerByeAck;
//   - the replay dumps every 20 ms on its I/O thread meanwhile, and at the end; the learner goes on
//     asking for batches until a reply's status shows an interval dump written (an event, not a time).
// Checks (each rank exits non-zero on a failure; mpirun then fails): counts that add up in the
// final status, a checkpoint part written, dumps written, replies of the right size. No LibTorch:
// the model's state size and the env spec come from the two functions defined below.
// With "pixels", the actor's rollouts are frame-stacked uint8 images sent compressed, and the learner
// checks every sampled sequence's frames byte for byte: the replay's decode path in its real loop.
// Usage: mpirun -n 3 replay_rank RUN_DIR [pixels]
#include <mpi.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "buffer/replay.h"
#include "comm/protocol.h"
#include "comm/rollout_codec.h"
#include "comm/ranks.h"
#include "comm/seq_layout.h"
#include "comm/wire.h"
#include "core/config.h"
#include "core/error.h"
#include "core/run_dir.h"
#include "envs/registry.h"
#include "models/state_size.h"

using namespace mpirl;

// The seams: a CartPole spec, or (argument "pixels") uint8 frames of 4 planes of 10 x 10 that the
// actor sends compressed (comm/rollout_codec.h); no recurrent core.
namespace {
bool g_pixels = false;
}
namespace mpirl::envs {
EnvSpec env_spec(const Config&) {
  EnvSpec s;
  s.id = g_pixels ? "pixels" : "CartPole-v1";
  s.obs_shape = g_pixels ? std::vector<int64_t>{4, 10, 10} : std::vector<int64_t>{4};
  s.obs_uint8 = g_pixels;
  s.num_actions = 2;
  s.max_episode_steps = 500;
  return s;
}
}  // namespace mpirl::envs
namespace mpirl::models {
int64_t state_size(const Config&, const envs::EnvSpec&) { return 0; }
}  // namespace mpirl::models

namespace {

constexpr int kRollouts = 60, kBatchesBeforeCheckpoint = 20;

int failures = 0;
void expect(bool ok, const std::string& what) {
  std::printf("%s: %s\n", ok ? "ok" : "FAILED", what.c_str());
  failures += !ok;
}

// Pixel mode: sequence e of rollout k, frame t, plane c is the byte k*7 + e*3 + t + c with a mark
// at (t + c) % 100, so frame t+1 repeats planes 1..3 of frame t (a frame stack).
void fill_frames(uint8_t* obs, const SeqLayout& layout, int64_t k, int64_t e) {
  const int64_t F = layout.T() + 1, C = 4, P = 100;
  uint8_t* o = obs + e * F * C * P;
  for (int64_t t = 0; t < F; ++t)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < P; ++i)
        o[(t * C + c) * P + i] = uint8_t((k * 7 + e * 3 + t + c) ^ (i == (t + c) % P ? 0x80 : 0));
}

void send(const wire::Envelope& env, const std::vector<char>& payload, int dest, int tag) {
  const auto f = wire::build_frame(env, payload.data(), payload.size());
  MPI_Send(f.data(), int(f.size()), MPI_BYTE, dest, tag, MPI_COMM_WORLD);
}

wire::Message recv(std::vector<char>& buf, int src, int tag) {
  MPI_Status st;
  MPI_Probe(src, tag, MPI_COMM_WORLD, &st);
  int n = 0;
  MPI_Get_count(&st, MPI_BYTE, &n);
  buf.resize(size_t(n));
  MPI_Recv(buf.data(), n, MPI_BYTE, src, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  return wire::decode(buf.data(), size_t(n), src);
}

void actor(const Config& cfg, const SeqLayout& layout) {
  const int64_t E = cfg.env.num_envs;
  std::vector<char> buf;
  ObsCodec codec;
  for (int k = 0; k < kRollouts; ++k) {
    wire::Envelope env;
    env.kind = wire::Kind::Rollout;
    env.sender = 2;
    env.seq = uint64_t(k);
    env.arrays = layout.arrays(E, true, 1);  // one finished episode per rollout
    std::vector<char> payload(wire::payload_bytes(env.arrays), 0);
    // The episode's return and length (the last two arrays): 1 and 8.
    std::vector<size_t> off;
    wire::payload_bytes(env.arrays, &off);
    const float ret = 1;
    const int32_t len = 8;
    std::memcpy(payload.data() + off[off.size() - 2], &ret, 4);
    std::memcpy(payload.data() + off[off.size() - 1], &len, 4);
    for (int64_t e = 0; e < E; ++e) {
      layout.ptr<int64_t>(payload.data(), Seq::Version, E)[e] = k;
      layout.ptr<int32_t>(payload.data(), Seq::EnvIndex, E)[e] = int32_t(e);
    }
    if (g_pixels) {  // stacked frames, every sequence its own, sent compressed as an actor does
      for (int64_t e = 0; e < E; ++e) fill_frames(layout.ptr<uint8_t>(payload.data(), Seq::Obs, E), layout, k, e);
      std::vector<char> frame;
      encode_rollout(codec, layout, payload.data(), E, 1, env, frame);
      MPI_Send(frame.data(), int(frame.size()), MPI_BYTE, 1, kTagRollout, MPI_COMM_WORLD);
    } else {
      send(env, payload, 1, kTagRollout);
    }
    auto ack = recv(buf, 1, kTagActorCtl);
    if (ack.env.kind != wire::Kind::RolloutAck) throw Error("actor: expected a RolloutAck");
  }
  wire::Envelope done;
  done.kind = wire::Kind::ActorDone;
  done.sender = 2;
  done.arrays = {{"env_steps", wire::DType::I64, {1}}};
  std::vector<char> steps(8);
  const int64_t n = kRollouts * E * cfg.actor.rollout_len;
  std::memcpy(steps.data(), &n, 8);
  send(done, steps, 1, kTagRollout);
  auto ack = recv(buf, 1, kTagActorCtl);
  expect(ack.env.kind == wire::Kind::ActorDoneAck, "actor: ActorDoneAck is the last message");
}

void learner(const Config& cfg, const SeqLayout& layout, const std::string& run_dir) {
  const int64_t B = cfg.learner.batch_size, E = cfg.env.num_envs;
  const size_t nf = layout.fields().size();
  int64_t pixel_items = 0, pixel_bad = 0;
  std::vector<char> buf;
  wire::Envelope small;
  small.sender = 0;
  auto request = [&] {
    small.kind = wire::Kind::SampleRequest;
    send(small, {}, 1, kTagLearnerReq);
  };
  int batches = 0, busy = 0, done = 0;
  int64_t items = 0, items_at_request = -1, interval_dumps = 0;
  const std::string dir = run_dir + "/part";
  ::mkdir(dir.c_str(), 0755);
  ReplayStatus at_done;
  request();
  // Until the checkpoint part is done and an interval dump has been written: the test waits for
  // the dump (an event in the replies' status), never for a length of time.
  while (done == 0 || interval_dumps == 0) {
    auto msg = recv(buf, 1, kTagLearnerReply);
    if (msg.env.kind == wire::Kind::ReplayBusy) {
      ++busy;
      continue;
    }
    if (msg.env.kind == wire::Kind::CheckpointDone) {
      ++done;
      at_done = msg.env.status;
      items_at_request = items;
      if (interval_dumps == 0) request();
      continue;
    }
    if (msg.env.kind != wire::Kind::SampleReply) throw Error("learner: unexpected reply");
    const int64_t n = layout.check(msg, 1);
    if (n != B) throw Error("learner: a batch of the wrong size");
    ++batches;
    items += n;
    interval_dumps = msg.env.status.dump.dumps;
    if (g_pixels) {  // every sampled sequence holds the frames its actor made, byte for byte
      std::vector<uint8_t> want(size_t(E) * layout.field(Seq::Obs).bytes);
      const auto* obs = msg.array<uint8_t>(layout.position(Seq::Obs));
      const auto* ver = msg.array<int64_t>(layout.position(Seq::Version));
      const auto* env_index = msg.array<int32_t>(layout.position(Seq::EnvIndex));
      const size_t SB = layout.field(Seq::Obs).bytes;
      for (int64_t j = 0; j < n; ++j) {
        if (env_index[j] < 0 || env_index[j] >= E) {
          ++pixel_bad;
          continue;
        }
        fill_frames(want.data(), layout, ver[j], env_index[j]);
        pixel_items += 1;
        pixel_bad += std::memcmp(obs + size_t(j) * SB, want.data() + size_t(env_index[j]) * SB, SB) != 0;
      }
    }
    // New priorities for what it got.
    wire::Envelope pu;
    pu.kind = wire::Kind::PriorityUpdate;
    pu.sender = 0;
    pu.arrays = {{"slot", wire::DType::I64, {B}}, {"generation", wire::DType::I64, {B}},
                 {"priority", wire::DType::F32, {B}}};
    std::vector<size_t> off;
    std::vector<char> payload(wire::payload_bytes(pu.arrays, &off));
    std::memcpy(payload.data() + off[0], msg.array<int64_t>(nf + 2), size_t(B) * 8);
    std::memcpy(payload.data() + off[1], msg.array<int64_t>(nf + 3), size_t(B) * 8);
    for (int64_t i = 0; i < B; ++i) {
      const float p = 0.5f + float(i);
      std::memcpy(payload.data() + off[2] + size_t(i) * 4, &p, 4);
    }
    send(pu, payload, 1, kTagLearnerReq);
    if (batches == kBatchesBeforeCheckpoint && done == 0) {
      wire::Envelope cr;
      cr.kind = wire::Kind::CheckpointRequest;
      cr.sender = 0;
      cr.arrays = {{"dir", wire::DType::U8, {int64_t(dir.size())}}, {"final", wire::DType::U8, {1}}};
      std::vector<char> p(dir.begin(), dir.end());
      p.resize(wire::payload_bytes(cr.arrays), 0);
      std::vector<size_t> o;
      wire::payload_bytes(cr.arrays, &o);
      std::memcpy(p.data() + o[0], dir.data(), dir.size());
      p[o[1]] = 0;
      send(cr, p, 1, kTagLearnerReq);
    } else if (done == 0 || interval_dumps == 0) {
      request();
    }
  }
  expect(at_done.checkpoint.last_ok && at_done.checkpoint.completed == 1,
         "learner: the checkpoint part was written (" + at_done.checkpoint.last_error + ")");
  expect(at_done.sampled_by_learner.size() == 1 && at_done.sampled_by_learner[0] == items_at_request,
         "learner: CheckpointDone carries the status at the request (" + std::to_string(items_at_request) +
             " items sampled)");
  struct stat st {};
  expect(::stat((dir + "/replay.h5").c_str(), &st) == 0 && ::stat((dir + "/replay_state.json").c_str(), &st) == 0,
         "learner: replay.h5 and replay_state.json are in the part's directory");
  small.kind = wire::Kind::LearnerBye;
  send(small, {}, 1, kTagLearnerReq);
  ReplayStatus final_status;
  for (;;) {
    auto msg = recv(buf, 1, kTagLearnerReply);
    if (msg.env.kind == wire::Kind::LearnerByeAck) {
      final_status = msg.env.status;
      break;
    }
    if (msg.env.kind == wire::Kind::SampleReply) items += layout.check(msg, 1);
  }
  const auto& s = final_status;
  expect(s.rollouts + s.discarded_rollouts == kRollouts && s.inserted == s.rollouts * E,
         "final status: every rollout stored or counted as discarded, inserted = rollouts x num_envs");
  expect(s.actor_env_steps == kRollouts * E * cfg.actor.rollout_len, "final status: the actor's env steps");
  expect(s.sampled == items, "final status: sampled = what the learner received (" + std::to_string(items) + ")");
  expect(s.dump.dumps >= 2 && s.dump.failures == 0 && !s.dump.final_failed,
         "final status: interval dumps and the end dump written (" + std::to_string(s.dump.dumps) + ")");
  if (g_pixels)
    expect(pixel_items > 0 && pixel_bad == 0, "pixels: every sampled sequence's frames are its actor's (" +
                                                   std::to_string(pixel_bad) + " of " + std::to_string(pixel_items) +
                                                   " differ)");
  std::printf("learner: %d batches, %d ReplayBusy, %ld dumps\n", batches, busy, long(s.dump.dumps));
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, world = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  g_pixels = argc == 3 && std::string(argv[2]) == "pixels";
  if ((argc != 2 && !g_pixels) || world != 3) {
    if (rank == 0) std::fprintf(stderr, "usage: mpirun -n 3 replay_rank RUN_DIR [pixels]\n");
    MPI_Finalize();
    return 2;
  }
  try {
    Config cfg;
    cfg.env.id = "CartPole-v1";
    cfg.env.num_envs = 4;
    cfg.actor.rollout_len = 8;
    cfg.learner.batch_size = 8;
    cfg.replay.capacity = 64;
    cfg.replay.selector = "prioritized";
    cfg.replay.max_times_sampled = 0;
    cfg.replay.samples_per_insert = 0;
    cfg.replay.min_size_to_sample = 8;
    cfg.replay.dump = "end";
    cfg.replay.dump_interval_s = 0.02;
    cfg.run.stall_timeout_s = 0;
    RunStart start;
    start.run_dir = argv[1];
    const Layout layout = make_layout(cfg, world, {"h", "h", "h"});
    Comms comms = Comms::create(layout, {"h", "h", "h"});
    const SeqLayout seq(envs::env_spec(cfg), cfg.actor.rollout_len, 0);
    int code = 0;
    if (rank == 1) code = buffer::run_replay(cfg, comms, start);
    if (rank == 0) learner(cfg, seq, start.run_dir);
    if (rank == 2) actor(cfg, seq);
    comms.free();
    if (code != 0 || failures > 0) {
      std::fprintf(stderr, "rank %d: %d check(s) failed, exit code %d\n", rank, failures, code);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return 0;
}
