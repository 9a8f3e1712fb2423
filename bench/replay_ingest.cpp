// Replay ingest throughput with K actor ranks next to raw MPI bandwidth for the same messages,
// measured in the same run:  mpirun -n K+1 bench_replay_ingest [--obs-dim 64 --envs 16 --T 32]
// Rank 0 receives; ranks 1..K each send --messages rollout frames of the real wire format with
// two sends in flight. Phase "raw": rank 0 only receives. Phase "replay": rank 0 also decodes,
// checks the layout and inserts every sequence into a prioritized ReplayBuffer (evicting once
// full), which is the replay rank's ingest path without acknowledgements.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <mpi.h>

#include <chrono>
#include <random>

#include "buffer/replay_buffer.h"
#include "envs/registry.h"
#include "runtime/rollout.h"
#include "runtime/wire.h"

using namespace mpirl;

namespace {
double now() { return MPI_Wtime(); }
}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, world = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  CLI::App app("replay ingest vs raw MPI");
  int obs_dim = 64, E = 16, T = 32, messages = 300, capacity = 65536;
  app.add_option("--obs-dim", obs_dim);
  app.add_option("--envs", E);
  app.add_option("--T", T);
  app.add_option("--messages", messages, "messages per sender per phase");
  app.add_option("--capacity", capacity);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (rank == 0) app.exit(e);
    MPI_Finalize();
    return 2;
  }
  if (world < 2) {
    if (rank == 0) fmt::print(stderr, "needs at least 2 ranks (1 receiver + K senders)\n");
    MPI_Finalize();
    return 2;
  }
  const int K = world - 1;
  envs::EnvOptions eo;
  eo.obs_dim = obs_dim;
  auto spec = envs::make_env("Synthetic", 0, eo)->spec();
  SeqLayout layout(spec, T);
  auto arrays = layout.arrays(E, true, 0);
  wire::Envelope env;
  env.kind = wire::Kind::Rollout;
  env.arrays = arrays;
  const size_t off = wire::natural_payload_offset(env) + 64;
  const size_t total = off + wire::payload_bytes(arrays);
  std::vector<char> buf[2] = {std::vector<char>(total), std::vector<char>(total)};
  std::mt19937 rng(static_cast<uint32_t>(rank));
  for (auto& b : buf) {
    env.sender = rank;
    wire::write_header(b.data(), off, env);
    for (size_t i = off; i < total; i += 4) b[i] = char(rng());
  }
  double results[2][2] = {};  // phase -> {seconds, bytes}
  for (int phase = 0; phase < 2; ++phase) {
    buffer::ReplayOptions ro;
    ro.capacity = capacity;
    ro.selector = "prioritized";
    ro.max_times_sampled = 0;
    std::unique_ptr<buffer::ReplayBuffer> rb;
    if (rank == 0 && phase == 1) rb = std::make_unique<buffer::ReplayBuffer>(layout, ro);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now();
    if (rank == 0) {
      std::vector<char> in(total);
      for (int m = 0; m < K * messages; ++m) {
        MPI_Status st;
        MPI_Recv(in.data(), int(total), MPI_BYTE, MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, &st);
        if (phase == 1) {
          auto msg = wire::decode(in.data(), total, st.MPI_SOURCE, {wire::Kind::Rollout});
          int64_t rows = layout.check(msg, st.MPI_SOURCE);
          for (int64_t i = 0; i < rows; ++i) rb->insert(msg.payload, rows, i);
        }
      }
      results[phase][0] = now() - t0;
      results[phase][1] = double(total) * K * messages;
    } else {
      MPI_Request req[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
      for (int m = 0; m < messages; ++m) {
        MPI_Wait(&req[m % 2], MPI_STATUS_IGNORE);
        MPI_Isend(buf[m % 2].data(), int(total), MPI_BYTE, 0, 7, MPI_COMM_WORLD, &req[m % 2]);
      }
      MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  if (rank == 0) {
    double raw = results[0][1] / results[0][0] / 1e9, ing = results[1][1] / results[1][0] / 1e9;
    double items = double(K) * messages * E / results[1][0];
    fmt::print("K={} actors, message {:.1f} KiB ({} sequences of T={}, obs {}), {} messages per actor\n", K,
               double(total) / 1024, E, T, obs_dim, messages);
    fmt::print("raw MPI      : {:.3f} GB/s\n", raw);
    fmt::print("replay ingest: {:.3f} GB/s, {:.0f} items/s ({:.0f} env steps/s)\n", ing, items, items * T);
    fmt::print("ratio        : {:.1f}% of raw MPI\n", 100 * ing / raw);
  }
  MPI_Finalize();
  return 0;
}
