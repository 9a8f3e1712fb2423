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
#include "bench/replay_load.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "buffer/replay.h"
#include "comm/ranks.h"
#include "comm/rollout_codec.h"
#include "comm/seq_layout.h"
#include "core/config.h"
#include "core/run_dir.h"
#include "envs/registry.h"

using namespace mpirl;
using namespace mpirl::replay_load;

namespace {

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
