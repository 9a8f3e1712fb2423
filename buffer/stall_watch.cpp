#include "buffer/stall_watch.h"

#include <algorithm>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "comm/protocol.h"
#include "core/clock.h"
#include "core/error.h"

namespace mpirl::buffer {

StallWatch::StallWatch(const Comms& comms, double timeout_s)
    : comms_(comms), timeout_s_(timeout_s), last_check_(now_seconds()),
      last_(size_t(comms.layout.actors()), now_seconds()), done_(size_t(comms.layout.actors()), 0) {
  // A replay shard watches the actors that send to it; the others are another shard's.
  const int shard = comms.layout.shard_index(comms.rank);
  if (shard < 0) return;
  for (int a = 0; a < comms.layout.actors(); ++a)
    if (comms.layout.shard_of(comms.layout.actor_rank(a)) != shard) done_[size_t(a)] = 1;
}

void StallWatch::heard(int rank) { last_[size_t(comms_.layout.actor_index(rank))] = now_seconds(); }

void StallWatch::done(int rank) { done_[size_t(comms_.layout.actor_index(rank))] = 1; }

void StallWatch::excuse_all() { std::fill(last_.begin(), last_.end(), now_seconds()); }

void StallWatch::check() {
  if (timeout_s_ <= 0) return;
  const double now = now_seconds();
  if (now - last_check_ < 0.5) return;
  last_check_ = now;
  std::vector<std::string> silent;
  for (size_t a = 0; a < last_.size(); ++a) {
    if (done_[a] || now - last_[a] <= timeout_s_) continue;
    const int rank = comms_.layout.actor_rank(int(a));
    int pending = 0;
    MPIRL_MPI(MPI_Iprobe(rank, kTagRollout, comms_.world, &pending, MPI_STATUS_IGNORE));
    if (pending) {  // it has sent; the replay has not taken it yet
      if (!excused_logged_)
        spdlog::info("replay: actor rank {} has waited {:.1f} s with a rollout sent (back-pressure: the buffer is full "
                     "until the learners sample); not a stall (said once)",
                     rank, now - last_[a]);
      excused_logged_ = true;
      last_[a] = now;
      continue;
    }
    silent.push_back(fmt::format("rank {} @ {} (silent for {:.1f} s)", rank, comms_.host(rank), now - last_[a]));
  }
  if (!silent.empty())
    throw Error(fmt::format("replay: no message from {} actor(s) for more than run.stall_timeout_s = {} s: {} -- a hung "
                            "env or a stalled rank; raise run.stall_timeout_s if one rollout legitimately takes longer",
                            silent.size(), timeout_s_, fmt::join(silent, ", ")));
}

}  // namespace mpirl::buffer
