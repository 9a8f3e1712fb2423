#pragma once
// What the parts of bench_replay_load share (private to it, bench/replay_load.cpp says what it does):
// MPI waits without busy-polling, the emulated actors (bench/replay_load_actors.cpp) and learners
// (bench/replay_load_learners.cpp).
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "comm/protocol.h"
#include "comm/rollout_codec.h"
#include "comm/seq_layout.h"
#include "comm/wire.h"
#include "core/config.h"

namespace mpirl::replay_load {

inline double now() { return MPI_Wtime(); }
inline void nap() { ::usleep(20); }

// Receives the next message with `tag` from `src` (MPI_ANY_SOURCE allowed) without busy-polling.
inline wire::Message recv(std::vector<char>& buf, int src, int tag, int* from = nullptr) {
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

inline void wait(MPI_Request& r) {
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

// bench/replay_load_actors.cpp
Frames rollout_frames(const Config& cfg, const SeqLayout& layout, int64_t E, int rank, int record, ObsCodec* codec);
double raw_phase(const Frames& f, size_t max_bytes, int n, int dest, bool receiver, bool sender, int senders);
void actor(const Frames& f, int replay, int64_t steps_per_rollout, double rate, double seconds);

struct LearnerResult {
  std::vector<double> latency;
  ReplayStatus first, last, final_status;
  double t_first = 0, t_last = 0;
  int64_t reply_bytes = 0;
};

// bench/replay_load_learners.cpp
LearnerResult learner(const SeqLayout& layout, const std::vector<int>& shards, int rank, int64_t B, double seconds,
                      double warmup);

}  // namespace mpirl::replay_load
