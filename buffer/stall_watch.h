#pragma once
// Stalls MPI cannot see: an actor whose env hangs, or a rank that stops without dying. The replay
// (each replay shard) hears from every actor that sends to it; an actor it has heard nothing from for run.stall_timeout_s ends the job
// with an error naming the silent ranks and their hosts. An actor whose rollout is waiting at the
// replay (back-pressure: the buffer may not take it yet) is not silent.
#include <vector>

#include "comm/ranks.h"

namespace mpirl::buffer {

class StallWatch {
 public:
  StallWatch(const Comms& comms, double timeout_s);
  void heard(int rank);  // a message from this actor arrived
  void done(int rank);   // ActorDone: no longer watched
  void excuse_all();     // every actor counts as heard from now (after the replay's own long wait)
  // Twice a second at most: throws mpirl::Error naming every actor silent for longer than the
  // timeout (0 = off).
  void check();

 private:
  const Comms& comms_;
  double timeout_s_, last_check_ = 0;
  std::vector<double> last_;   // per actor index: when it was last heard from
  std::vector<char> done_;
  bool excused_logged_ = false;  // the first back-pressure wait beyond the timeout is logged
};

}  // namespace mpirl::buffer
