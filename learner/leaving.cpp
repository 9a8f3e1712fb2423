#include "learner/leaving.h"

#include <cstdio>
#include <cstdlib>

#include <spdlog/spdlog.h>

#include "core/clock.h"
#include "core/signals.h"

namespace mpirl::learner {

void leave_if_launcher_ends_job(const LeavingContext& c) {
  if (!launcher_ending_job()) return;
  if (c.lead) {
    // No CRC check of the checkpoint here (ckpt::latest would read it all): the one this run
    // sealed, else the one it resumed from, is complete by construction.
    const std::string last = !c.checkpoints.last_sealed().empty() ? c.checkpoints.last_sealed() : c.start.resume_from;
    const bool interrupted = stop_signal() == StopSignal::Interrupt;
    spdlog::error("{} (SIGTERM from orted/mpirun at update {}){}. No final checkpoint; {}",
                  interrupted ? "interrupted (Ctrl-C): Open MPI's launcher is ending the job"
                              : "Open MPI's launcher is ending the job",
                  c.version,
                  interrupted ? "" : ": a consequence of another rank's fatal error (printed first), of a lost "
                                     "node, or of mpirun itself being stopped -- mpirun's message names which. "
                                     "Not a preemption",
                  last.empty() ? "there is no complete checkpoint to resume from" : "a resume continues from " + last);
    spdlog::default_logger()->flush();
    try {  // the summary first: it is small, and the SIGKILL may come before model.pt is written
      nlohmann::json why = {{"stop_note", interrupted
                                              ? "Ctrl-C on mpirun's terminal; Open MPI's launcher then ended the job "
                                                "(SIGTERM): no final checkpoint"
                                              : "Open MPI's launcher ended the job (SIGTERM from orted/mpirun): a "
                                                "rank or node was lost, or mpirun was stopped; see mpirun's message"}};
      if (!last.empty()) why["checkpoint"] = last;
      const double t0 = now_seconds();
      c.run.write_summary(stop_reason_of(stop_signal()), why, false);
      c.run.save_model(c.policy, c.spec);
      spdlog::info("summary.json and model.pt written in {:.2f} s", now_seconds() - t0);
    } catch (const std::exception& e) {
      spdlog::error("could not save the summary and model before leaving: {}", e.what());
    }
  }
  spdlog::default_logger()->flush();
  std::fflush(nullptr);
  std::_Exit(stop_signal() == StopSignal::Interrupt ? kExitInterrupted : kExitAborted);
}

void save_on_error(const LeavingContext& c, const std::exception& e) {
  if (!c.lead) return;
  spdlog::error("learner 0 failed at update {}: {}; saving model.pt and summary.json before the job ends", c.version,
                e.what());
  const std::string last = !c.checkpoints.last_sealed().empty() ? c.checkpoints.last_sealed() : c.start.resume_from;
  nlohmann::json why = {{"error", e.what()}, {"update", c.version}};
  if (!last.empty()) why["checkpoint"] = last;
  try {
    c.run.write_summary("error", why, false);
    c.run.save_model(c.policy, c.spec);
  } catch (const std::exception& e2) {
    spdlog::error("could not save after the error: {}", e2.what());
  }
  spdlog::default_logger()->flush();
}

}  // namespace mpirl::learner
