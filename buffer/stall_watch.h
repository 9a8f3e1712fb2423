#pragma once
// Stalls MPI cannot see: an actor whose env hangs, or a rank that stops without dying. The replay
// (each replay shard) hears from every actor that sends to it; an actor it has heard nothing from for run.stall_timeout_s ends the job
// with an error naming the silent ranks and their hosts. An actor whose rollout is waiting at the
// replay (back-pressure: the buffer may not take it yet) is not silent. The clock starts once the
// actors can step: at the first learner request or the first rollout, whichever comes first
// (learner 0 requests nothing before its first parameters have reached every actor; another
// learner may be that one broadcast ahead). Until then a slow start (the learners' self-checks, a
// long model load, a loaded machine) is not an actor's silence; a start-up that takes more than
// 10 x run.stall_timeout_s (a learner hung in its self-check or first broadcast, an env that never
// resets) ends the job with an error that says so.
#include <vector>

#include "comm/ranks.h"

namespace mpirl::buffer {

class StallWatch {
 public:
  StallWatch(const Comms& comms, double timeout_s);
  void start();          // the actors can step now: every actor's clock starts (once; later calls do nothing)
  void heard(int rank);  // a message from this actor arrived (starts the clocks if not yet started)
  void done(int rank);   // ActorDone: no longer watched
  void excuse_all();     // every actor counts as heard from now (after the replay's own long wait)
  // Twice a second at most: throws mpirl::Error naming every actor silent for longer than the
  // timeout (0 = off).
  void check();

 private:
  const Comms& comms_;
  double timeout_s_, startup_from_, last_check_ = 0;
  std::vector<double> last_;   // per actor index: when it was last heard from
  std::vector<char> done_;
  bool started_ = false;
  bool excused_logged_ = false;  // the first back-pressure wait beyond the timeout is logged
};

}  // namespace mpirl::buffer
