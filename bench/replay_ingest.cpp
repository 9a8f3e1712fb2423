// Replay ingest throughput with K actor ranks next to raw MPI bandwidth for the same messages,
// measured in the same run:  mpirun -n K+1 bench_replay_ingest [--obs-dim 64 --envs 16 --T 32]
// Rank 0 receives; ranks 1..K each send --messages rollout frames of the real wire format with
// two sends in flight. Phase "raw": rank 0 only receives, into one buffer. Phase "replay": rank 0
// receives each frame into a reserved chunk of a prioritized ReplayBuffer (evicting the oldest
// chunk once full), decodes it, checks the layout and commits its sequences: the replay rank's
// ingest path without acknowledgements. --copy inserts by copying instead (the pre-chunk path).
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <random>

#include "buffer/replay_buffer.h"
#include "envs/registry.h"
#include "comm/seq_layout.h"
#include "comm/wire.h"

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
  int obs_dim = 64, E = 16, T = 32, messages = 300, capacity = 0;
  app.add_option("--obs-dim", obs_dim);
  app.add_option("--envs", E);
  app.add_option("--T", T);
  app.add_option("--messages", messages, "messages per sender per phase");
  app.add_option("--capacity", capacity, "items (0: 65536, or fewer so that the storage stays under 2 GiB)");
  bool copy = false;
  app.add_flag("--copy", copy, "insert by copying each sequence from a receive buffer");
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
  // Phases: 0 raw MPI into one buffer; 1 replay ingest; 2 raw MPI into rotating buffers as large
  // as the replay's storage (what any receiver that keeps the data pays for cold memory).
  if (capacity <= 0)  // 65536 Atari-sized items would be 61 GB (bad_alloc); the rate does not need them
    capacity = int(std::max<int64_t>(E, std::min<int64_t>(65536, int64_t((size_t(2) << 30) / total) * E)));
  double results[3][2] = {};  // phase -> {seconds, bytes}
  std::vector<char> rotating;
  for (int phase = 0; phase < 3; ++phase) {
    buffer::ReplayOptions ro;
    ro.capacity = capacity;
    ro.selector = "prioritized";
    ro.max_times_sampled = 0;
    ro.chunk_rows = copy ? 1 : E;
    ro.chunk_bytes = copy ? 0 : total;
    std::unique_ptr<buffer::ReplayBuffer> rb;
    if (rank == 0 && phase == 1) rb = std::make_unique<buffer::ReplayBuffer>(layout, ro);
    if (rank == 0 && phase == 2) rotating.assign(size_t(capacity / E) * total, 1);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now();
    if (rank == 0) {
      std::vector<char> in(total);
      for (int m = 0; m < K * messages; ++m) {
        MPI_Status st;
        const bool chunk = phase == 1 && !copy;
        char* dst = chunk ? rb->reserve_chunk() : in.data();
        if (phase == 2) {
          const size_t slots = rotating.size() / total;
          dst = rotating.data() + (size_t(m) % slots) * total;
        }
        MPI_Recv(dst, int(total), MPI_BYTE, MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, &st);
        if (phase == 1) {
          auto msg = wire::decode(dst, total, st.MPI_SOURCE, {wire::Kind::Rollout});
          int64_t rows = layout.check(msg, st.MPI_SOURCE);
          if (chunk) {
            rb->commit_chunk(size_t(msg.payload - dst), rows);
          } else {
            for (int64_t i = 0; i < rows; ++i) rb->insert(msg.payload, rows, i);
          }
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
    double cold = results[2][1] / results[2][0] / 1e9;
    double items = double(K) * messages * E / results[1][0];
    fmt::print("K={} actors, message {:.1f} KiB ({} sequences of T={}, obs {}), {} messages per actor\n", K,
               double(total) / 1024, E, T, obs_dim, messages);
    fmt::print("raw MPI      : {:.3f} GB/s\n", raw);
    fmt::print("replay ingest ({}): {:.3f} GB/s, {:.0f} items/s ({:.0f} env steps/s)\n", copy ? "copy" : "in place", ing, items, items * T);
    fmt::print("raw MPI into rotating buffers of the storage's size: {:.3f} GB/s\n", cold);
    fmt::print("ratio        : {:.1f}% of raw MPI ({:.1f}% of raw MPI into rotating buffers)\n", 100 * ing / raw,
               100 * ing / cold);
  }
  MPI_Finalize();
  return 0;
}
