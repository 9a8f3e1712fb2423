#include "learner/learner.h"
#include "learner/evaluator.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "core/checkpoint.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/fault.h"
#include "core/signals.h"
#include "core/test_hooks.h"
#include "envs/registry.h"
#include "kernels/scan.h"
#include "learner/batch_source.h"
#include "learner/exit_code.h"
#include "learner/learner_checkpoint.h"
#include "learner/learner_collectives.h"
#include "learner/leaving.h"
#include "learner/nonfinite_guard.h"
#include "learner/placement.h"
#include "learner/publisher.h"
#include "learner/reducer_choice.h"
#include "learner/run_controller.h"
#include "learner/self_check.h"
#include "learner/schedule.h"
#include "learner/trainer.h"

namespace mpirl::learner {
int run_learner(const Config& cfg, const Comms& comms, const RunStart& start) {
  torch::set_num_threads(cfg.learner.threads);
  const bool lead = comms.rank == 0;
  int picked_gpu = -1;
  const ReducerRequest where = pick_device(cfg, comms, &picked_gpu);
  const nlohmann::json ranks = rank_table(comms, picked_gpu);
  if (lead) spdlog::info("placement on {} host(s): {}", comms.num_hosts(), comms.placement());
  const torch::Device device = where.device;
  const envs::EnvSpec spec = envs::env_spec(cfg);
  const SeqLayout layout(spec, cfg.actor.rollout_len, models::state_size(cfg, spec), seq_layout_priority(cfg));
  torch::manual_seed(cfg.run.seed);
  std::string reducer_why;
  auto reducer = make_gradient_reducer(comms.learners, comms.layout.learners, where, &reducer_why);
  std::vector<CheckResult> checks = start_checks(cfg, comms, device, reducer, &reducer_why);
  Trainer trainer(cfg, spec, device, *reducer, agreed_step_mode(cfg, comms, device), learner_average(comms),
                  comms.layout.learners);
  models::Policy& policy = trainer.policy();
  MPIRL_CHECK(policy->state_size() == layout.state_size(), "core state size {} != layout's {}", policy->state_size(),
              layout.state_size());
  LearnerState resumed;
  if (!start.resume_from.empty()) resumed = load_checkpoint(start.resume_from, trainer, comms);
  {  // every learner starts from learner 0's parameters
    std::vector<float> flat(size_t(models::num_params(policy)));
    models::write_flat(policy, flat.data());
    MPIRL_MPI(MPI_Bcast(flat.data(), int(flat.size()), MPI_FLOAT, 0, comms.learners));
    models::read_flat(policy, flat.data());
  }
  step_check(checks, trainer, cfg, spec, comms);
  if (lead)
    spdlog::info("learners on {}, {}; gradients averaged by {} ({})", device.str(), trainer.describe(), reducer->name(),
                 reducer_why);

  BatchSource source(cfg, comms, layout, spec, device);
  RunController run(cfg, comms, lead ? start.run_dir : "");
  run.set_best_source(&policy, &spec);
  {
    nlohmann::json fields = {{"hosts", comms.num_hosts()}, {"ranks", ranks}, {"segment", start.segment},
                             {"scan_backend", kernels::scan_backend_name(kernels::scan_backend())},
                             {"test_hooks", test_hooks_set()}};
    for (const auto& c : checks) fields["self_check"].push_back(to_json(c));
    if (!start.resume_from.empty()) fields["resumed_from"] = start.resume_from;
    run.set_summary_fields(fields);
  }
  InferenceMonitor inference(comms);  // central inference: the inference ranks' statistics (learner 0)
  run.set_inference(&inference);
  if (lead && cfg.learner.frozen)
    spdlog::warn("learner.frozen = true: batches are received and counted but never trained on; the parameters stay "
                 "as initialised (a sampling-throughput benchmark)");
  Checkpointer checkpoints(cfg, comms, start, trainer, run, source);
  std::unique_ptr<Publisher> publisher;
  run.start();
  int64_t version = 0;  // = updates so far; what learner 0 publishes
  if (!start.resume_from.empty()) {
    run.resume(resumed.window, resumed.elapsed_s, resumed.counts[0], resumed.replay);
    version = resumed.version;
    if (lead) {
      spdlog::info("resumed at update {} ({:.1f} s, {} episodes so far) from {}", version, resumed.elapsed_s,
                   resumed.window.episodes, start.resume_from);
      append_json_line(start.run_dir + "/resumed.jsonl",
                       {{"role", "learner"}, {"segment", start.segment}, {"checkpoint", start.resume_from},
                        {"version", version}, {"updates", resumed.counts[0].updates},
                        {"episodes", resumed.window.episodes}, {"elapsed_s", resumed.elapsed_s},
                        {"recent_returns", resumed.window.returns.size()}});
    }
  }
  if (lead) {  // actors wait for the first parameters before stepping
    test_start_delay();
    publisher = std::make_unique<Publisher>(comms, policy, cfg.actor.param_tests);
    publisher->due();
    publisher->poll(version);
    publisher->wait();
  }
  const LeavingContext leaving{lead, checkpoints, start, run, policy, spec, version};
  auto leave_if_launcher_ends_job = [&] { learner::leave_if_launcher_ends_job(leaving); };
  Evaluator evaluator(cfg, lead ? start.run_dir : "");
  checkpoints.start_at(version);
  source.start();
  double last_batch = now_seconds();  // or the last ReplayBusy: the replay is alive and its file work progresses
  source.on_replay_busy = [&] { last_batch = now_seconds(); };
  auto while_waiting = [&] {
    if (publisher) publisher->poll(version);
    run.poll_inference(version);
    run.maybe_log();
    // Twice the timeout: a silent actor is reported first by the replay, which knows which one.
    const double silent = now_seconds() - last_batch;
    if (cfg.run.stall_timeout_s > 0 && silent > 2 * cfg.run.stall_timeout_s)
    {
      std::vector<std::string> replays;
      for (int r : comms.layout.replay_ranks()) replays.push_back(fmt::format("rank {} @ {}", r, comms.host(r)));
      throw Error(fmt::format("learner rank {}: no batch from the replay ({}) and no sign of its file work "
                              "progressing for {:.1f} s, more than twice run.stall_timeout_s = {} s: a stalled "
                              "replay, a hung file system under it, or no actor delivering",
                              comms.rank, fmt::join(replays, ", "), silent, cfg.run.stall_timeout_s));
    }
    leave_if_launcher_ends_job();
    return !run.wall_limit_reached() && stop_signal() == StopSignal::None;
  };
  std::string reason, nonfinite_stop;
  NonFiniteGuard nonfinite(cfg, lead);
  std::string refreshed;  // the checkpoint model.pt and the running summary were last written after
  try {
    for (;;) {
      fault_point();
      leave_if_launcher_ends_job();
      const double t0 = now_seconds();
      Batch* b = source.next(version, while_waiting);
      run.add_wait(now_seconds() - t0);
      if (b) {
        last_batch = now_seconds();
        run.on_reply(*b);  // the replay's counters and finished episodes: what the stop depends on
      }
      leave_if_launcher_ends_job();  // never into the collective below: a peer may be gone
      reason = run.stop_reason();
      if (reason.empty()) reason = nonfinite_stop;  // the same on every learner, at the same update
      if (!b && reason.empty()) reason = "max_wall_seconds";
      const Agreed a = agree(comms, reason, b && b->kept > 0, checkpoints.due(version), run.status().env_steps);
      if (a.stop == 2) reason = "preempted";
      if (a.stop == 3) reason = "interrupted";
      if (a.stop) run.note_stop_decision(reason.empty() ? "max_wall_seconds" : reason, version);
      if (a.stop) break;
      if (a.checkpoint) checkpoints.begin(version, false);  // before this batch: the state after `version` updates
      run.on_trained(*b);  // counted only for batches that are trained on (or all masked out)
      if (!a.update) continue;  // every sequence of every learner too old: no step on zero gradients
      if (cfg.learner.frozen) {  // a benchmark of sampling: the batch is counted, the parameters stay
        source.progress();
        run.maybe_log();
        continue;
      }
      trainer.set_progress(progress_of(a.env_steps, cfg.run.total_env_steps));
      auto r = trainer.update(b->train, b->boot);
      source.send_priorities(*b, r.priorities);
      run.on_update(r);
      test_update_delay();
      ++version;
      if (nonfinite_stop.empty()) nonfinite_stop = nonfinite.after_update(trainer, version);
      if (publisher && version % cfg.learner.publish_interval == 0) publisher->due();
      if (publisher) publisher->poll(version);
      source.progress();
      run.poll_inference(version);
      run.maybe_log();
      for (const auto& row : evaluator.poll(policy, spec, version, run.status().env_steps, run.elapsed()))
        run.on_eval(row);
      if (evaluator.enabled()) run.set_best(evaluator.best());
      if (lead && checkpoints.last_sealed() != refreshed) {
        // model.pt and a summary ("running") after each checkpoint: a learner 0 ended silently has both
        refreshed = checkpoints.last_sealed();
        run.save_model(policy, spec);
        run.write_running_summary({{"checkpoint", refreshed}});
      }
    }
  } catch (const std::exception& e) {  // a stall, an I/O error, a bad message
    save_on_error(leaving, e);
    throw;
  }
  leave_if_launcher_ends_job();  // "aborted" never takes the graceful shutdown below
  if (reason.empty()) reason = "max_wall_seconds";  // another learner reached its wall-clock limit
  if ((reason == "preempted" || reason == "interrupted") && lead)
    spdlog::warn("{} (signal {}): stopping at update {} after a final checkpoint", reason, stop_signal_number(),
                 version);

  // Shutdown (comm/protocol.h): actors stop; the model and a first summary are written before
  // the replay's final dump, so they never depend on it; then the replay says goodbye with its
  // final counters and the summary is written again.
  if (publisher) publisher->stop();
  nlohmann::json extra = {{"learner_device", device.str()},
                          {"gradient_reducer", reducer->name()},
                          {"learner_step", trainer.describe()},
                          {"num_params", models::num_params(policy)},
                          {"learner_param_max_abs_diff", param_difference(comms, policy)},
                          {"nonfinite", nonfinite.summary(trainer)}};
  if (publisher)
    extra["params_published"] = {{"broadcasts", publisher->schedule().published()},
                                 {"last_version", publisher->schedule().last_version()},
                                 {"completed", publisher->schedule().completed()},
                                 {"broadcast_s_mean", publisher->schedule().mean_seconds()},
                                 {"broadcast_s_max", publisher->schedule().max_seconds()}};
  if (publisher && lead)
    spdlog::info("parameter broadcasts: {} to the {}, {:.3f} s on average from start to completion (longest "
                 "{:.3f} s)", publisher->schedule().published(),
                 comms.layout.central() ? "inference ranks" : "actors", publisher->schedule().mean_seconds(),
                 publisher->schedule().max_seconds());
  if (lead && evaluator.enabled()) {
    for (const auto& row : evaluator.finished()) run.on_eval(row);  // one that ended since the last update
    extra["eval"] = evaluator.counts();
    run.set_best(evaluator.best());
  }
  // The final checkpoint's learner part first (a full disk then costs model.pt, not the
  // checkpoint), then model.pt and the summary, all before the replay's goodbye.
  if (checkpoints.enabled()) checkpoints.begin(version, true);
  if (lead) {
    run.save_model(policy, spec);
    run.write_summary(reason, extra, false);
  }
  ReplayStatus final_status = source.leave([&](const std::vector<float>& r, const std::vector<int32_t>& l,
                                               const ReplayStatus& s) {
    run.set_status(s);
    run.on_episodes(r, l);
  });
  if (lead) run.set_status(final_status);
  if (inference.enabled())  // each inference rank's last report comes after its actors' goodbyes
    inference.wait_finals([&] { leave_if_launcher_ends_job(); }, cfg.run.stall_timeout_s);
  const std::string sealed = checkpoints.enabled() ? checkpoints.finish_final(final_status) : "";
  run.counts().received += source.items_received();
  LearnerCounts totals = sum_counts(comms, run.counts());
  if (lead) {
    if (!checkpoints.last_sealed().empty()) extra["checkpoint"] = checkpoints.last_sealed();
    extra["final_checkpoint_written"] = !sealed.empty();
    run.set_totals(totals);
    run.write_summary(reason, extra, true);
    if (final_status.dump.failures > 0)
      spdlog::error("replay dump failed {} time(s); last error: {}", final_status.dump.failures,
                    final_status.dump.last_error);
  }
  return lead ? exit_code(reason, final_status, checkpoints, start) : 0;
}

}  // namespace mpirl::learner
