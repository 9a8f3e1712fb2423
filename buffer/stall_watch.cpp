#include "buffer/stall_watch.h"

#include <algorithm>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "comm/protocol.h"
#include "core/clock.h"
#include "core/error.h"

namespace mpirl::buffer {
namespace {
constexpr int kStartupFactor = 10;  // start-up may take this many stall timeouts
}  // namespace

StallWatch::StallWatch(const Comms& comms, double timeout_s)
    : comms_(comms), timeout_s_(timeout_s), startup_from_(now_seconds()), last_check_(startup_from_),
      last_(size_t(comms.layout.actors()), now_seconds()), done_(size_t(comms.layout.actors()), 0) {
  // A replay shard watches the actors that send to it; the others are another shard's.
  const int shard = comms.layout.shard_index(comms.rank);
  if (shard < 0) return;
  for (int a = 0; a < comms.layout.actors(); ++a)
    if (comms.layout.shard_of(comms.layout.actor_rank(a)) != shard) done_[size_t(a)] = 1;
}

void StallWatch::start() {
  if (started_) return;
  started_ = true;
  excuse_all();
}

void StallWatch::heard(int rank) {
  start();
  last_[size_t(comms_.layout.actor_index(rank))] = now_seconds();
}

void StallWatch::done(int rank) { done_[size_t(comms_.layout.actor_index(rank))] = 1; }

void StallWatch::excuse_all() {
  startup_from_ = now_seconds();  // a start-up not yet over counts from here too (after a long restore)
  std::fill(last_.begin(), last_.end(), startup_from_);
}

void StallWatch::check() {
  if (timeout_s_ <= 0) return;
  const double now = now_seconds();
  if (now - last_check_ < 0.5) return;
  last_check_ = now;
  if (!started_) {
    if (now - startup_from_ <= kStartupFactor * timeout_s_) return;
    std::vector<std::string> learners;
    for (int r = 0; r < comms_.layout.world; ++r)
      if (comms_.layout.role_of(r) == Role::Learner) learners.push_back(fmt::format("rank {} @ {}", r, comms_.host(r)));
    throw Error(fmt::format("replay: no request from the learners ({}) and no rollout from any actor for {:.1f} s "
                            "after start-up, more than {} x run.stall_timeout_s = {} s: a start-up that does not "
                            "end (a learner hung in its self-check or first parameter broadcast, an env that never "
                            "resets); raise run.stall_timeout_s if start-up legitimately takes longer",
                            fmt::join(learners, ", "), now - startup_from_, kStartupFactor, timeout_s_));
  }
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
