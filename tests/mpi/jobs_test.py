#!/usr/bin/env python3
"""Jobs that finish, in mpi_test.py's style (real mpirun, real ranks), their counts adding up:
  default_job                   the default layout; curve.jsonl; `mpirl eval` of the run, a checkpoint, a model
  two_learners_identical        2 learners stay identical (normalisation and schedules too); labelled rates
  gaussian_appo                 Pendulum (Box actions, truncations bootstrapped) with APPO
  rollout_many_envs             32 envs per actor, back-pressure, parameters published every 4 updates
  prioritized_two_learners      one prioritized replay for 2 learners: priorities, stale updates, the ratio
  recurrent_appo                a scan core (LRU) with APPO, and `mpirl eval` of it
  policy_lag_drop               items too many updates old are dropped from the loss, and counted
  synchronous_actors            actor.synchronous: every sequence learned by the parameters that collected it
  openmp_spin_waits             2 torch threads: libgomp's idle threads spin 10,000 times, not 300,000, unless the user chose
Run one: jobs_test.py --mpirl build/mpirl CASE"""
import glob
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpi_test  # noqa: E402
from mpi_test import check, check_curve, config_of, finished_run, run  # noqa: E402


def case_default_job(args):
    p, dt, d = run(args, 4, ["run.total_env_steps=200000"], 240)
    s = finished_run(p, d, 200000)
    check_curve(d, s, 10000)
    check(s["learners"] == 1 and s["actors"] == 2, "default layout: 1 learner, 1 replay, 2 actors")
    e = subprocess.run([args.mpirl, "eval", d, "--episodes", "3"], capture_output=True, text=True, timeout=120)
    print(e.stdout, e.stderr)
    check(e.returncode == 0 and "mean return" in e.stdout, "mpirl eval plays the saved policy")
    check(not os.path.exists(os.path.join(d, "replay.pid")), "replay.pid removed at exit")
    # Every checkpoint holds the policy: eval takes a checkpoint directory, or a model file.
    ckpts = sorted(glob.glob(os.path.join(d, "checkpoints", "ckpt-*")))
    check(ckpts and os.path.exists(os.path.join(ckpts[-1], "model.pt")), "the final checkpoint holds model.pt")
    for what in (ckpts[-1], os.path.join(ckpts[-1], "model.pt")):
        e = subprocess.run([args.mpirl, "eval", what, "--episodes", "2"], capture_output=True, text=True, timeout=120)
        print(e.stdout, e.stderr)
        check(e.returncode == 0 and "mean return" in e.stdout, f"mpirl eval {os.path.relpath(what, d)}")
    e = subprocess.run([args.mpirl, "eval", os.path.join(d, "checkpoints")], capture_output=True, text=True, timeout=60)
    check(e.returncode == 2 and "checkpoint directory" in e.stderr, f"a directory without a policy: {e.stderr.strip()}")


def case_two_learners_identical(args):
    p, dt, d = run(args, 5, ["roles.learners=2", "run.total_env_steps=300000"], 240)
    s = finished_run(p, d, 300000)
    check(s["learners"] == 2 and s["actors"] == 2, "2 learners + 1 replay + 2 actors")
    check(s["learner_param_max_abs_diff"] == 0.0,
          f"learners end with identical parameters (max abs diff {s['learner_param_max_abs_diff']})")
    check("learner 0 (of 2)" in p.stdout and "samples/s" in p.stdout,
          "the status line says its samples/s are learner 0's, of 2 learners")
    # Labelled rates: learner 0's own (the unlabelled learner_samples_per_s kept beside it), an
    # estimate for all learners in each row, and the learners' real total in the final summary.
    rows = [json.loads(l) for l in open(os.path.join(d, "metrics.jsonl"))]
    check(all(r["learner0_samples_per_s"] == r["learner_samples_per_s"] and r["learners"] == 2
              and r["learners_samples_per_s_est"] == 2 * r["learner0_samples_per_s"] for r in rows),
          f"every metrics row has learner0_samples_per_s, learners = 2 and learners_samples_per_s_est ({len(rows)} rows)")
    total = s["learner_counts"]["trained"] * config_of(d)["actor"]["rollout_len"] / s["wall_time_s"]
    check(s["learner0_samples_per_s"] == s["learner_samples_per_s"] and "learners_samples_per_s_est" not in s
          and abs(s["learners_samples_per_s"] - total) <= 1e-6 * total and s["learners_samples_per_s"] > 0,
          f"summary.json: learner 0's {s['learner0_samples_per_s']:.0f} samples/s, the learners' total "
          f"{s['learners_samples_per_s']:.0f} = their {s['learner_counts']['trained']} sequences trained on / wall time")
    # Normalisation statistics and schedules keep the learners identical too: they average their
    # batch moments over MPI and agree on the env steps that drive the schedules.
    p, dt, d = run(args, 5, ["roles.learners=2", "run.total_env_steps=200000", "model.obs_norm=true",
                             "learner.lr_schedule=\"linear\"", "learner.lr_final=0.0001",
                             "learner.entropy_schedule=\"cosine\"", "run.log_interval_s=0.2"], 240)
    s = finished_run(p, d, 200000)
    check(s["learner_param_max_abs_diff"] == 0.0,
          f"with model.obs_norm, PopArt and schedules the learners stay identical, normalisation buffers included "
          f"(max abs diff {s['learner_param_max_abs_diff']})")
    import torch
    w = torch.jit.load(os.path.join(d, "model.pt"), map_location="cpu").state_dict()
    check(float(w["obs_shift"].abs().sum()) > 0 and bool((w["obs_scale"] != 1).any()) and float(w["value_scale"]) != 1.0,
          f"model.pt carries the observation statistics and PopArt's scale (value_scale {float(w['value_scale']):.3f})")
    rows = [json.loads(l) for l in open(os.path.join(d, "metrics.jsonl"))]
    lrs = [r["lr"] for r in rows if "lr" in r]
    check(len(lrs) >= 2 and lrs[0] > lrs[-1] >= 0.0001 * (1 - 1e-9) and all(a >= b for a, b in zip(lrs, lrs[1:])),
          f"the scheduled lr falls row by row ({lrs[0] if lrs else None} -> {lrs[-1] if lrs else None})")


def case_gaussian_appo(args):
    p, dt, d = run(args, 4, ["env.id=\"Pendulum-v1\"", "learner.algo=appo", "run.total_env_steps=60000",
                             "env.num_envs=8"], 240)
    s = finished_run(p, d, 60000)
    check(s["episodes"] > 0 and s["mean_length"] == 200, "Pendulum episodes are truncated at 200 steps")
    lc = s["learner_counts"]
    check(lc["bootstraps"] > 0, f"truncated episodes bootstrapped from the learner's values ({lc['bootstraps']})")


def case_rollout_many_envs(args):
    # Synthetic env, 3 actors, a small queue so back-pressure engages, publish every 4 updates,
    # 16 MPI_Test calls per test of the parameter broadcast (auto gives 1 for this small network).
    p, dt, d = run(args, 5, ["env.id=\"Synthetic\"", "env.num_envs=32", "actor.rollout_len=16",
                             "replay.capacity=64", "learner.publish_interval=4", "run.total_env_steps=150000",
                             "actor.param_tests=16"], 240)
    s = finished_run(p, d, 150000)
    pub = s["params_published"]
    check(pub["broadcasts"] >= 2 and pub["last_version"] >= s["learner_updates"] - 2 * 4,
          f"the newest parameters went out: last broadcast v{pub['last_version']} after {s['learner_updates']} updates "
          f"({pub['broadcasts']} broadcasts)")
    # Not timed: the first (it waits for the actors' start-up) and the last if still in flight.
    check(pub["completed"] >= pub["broadcasts"] - 2 and 0 < pub["broadcast_s_mean"] <= pub["broadcast_s_max"],
          f"each broadcast but the first and last is timed: {pub['completed']} of {pub['broadcasts']}, mean "
          f"{pub['broadcast_s_mean']} s, longest {pub['broadcast_s_max']} s")


def case_prioritized_two_learners(args):
    # One prioritized replay for 2 learners: both sample, priorities from both apply, stale
    # updates (items evicted since they were sampled) are dropped and counted, the ratio limiter
    # holds, and counters add up.
    p, dt, d = run(args, 5, ["roles.learners=2", "replay.selector=\"prioritized\"", "replay.max_times_sampled=0",
                             "replay.capacity=2048", "replay.samples_per_insert=2.0", "run.total_env_steps=300000"], 240)
    s = finished_run(p, d, 300000)
    r = s["replay"]
    check(min(r["sampled_by_learner"]) > 0, f"both learners sampled ({r['sampled_by_learner']})")
    applied, stale = r["priority_updates"], r["stale_priority_updates"]
    check(applied > 0 and stale > 0, f"priority updates applied {applied}, stale dropped {stale}")
    check(applied + stale <= r["sampled"], "no more updates than sampled items")
    check(r["sampled"] - (applied + stale) <= 2 * 2 * 32 * 2,
          f"every batch's update arrived except those in flight at the stop ({r['sampled'] - applied - stale})")
    check(r["evicted"] > 0 and r["consumed"] == 0, "a full buffer evicts its oldest items (none consumed)")
    ratio = r["sampled"] / r["inserted"]
    check(1.5 <= ratio <= 2.5, f"samples per insert {ratio:.2f} held near 2")
    check(r["max_priority"] > 1.0, f"priorities moved (max {r['max_priority']:.3f})")
    check(s["learner_param_max_abs_diff"] == 0.0, "learners stay identical")


def case_recurrent_appo(args):
    # A scan core through the whole path: actors in step mode carrying state across rollouts, the
    # state travelling with each sequence, APPO minibatches slicing it, eval in step mode.
    p, dt, d = run(args, 4, ["env.id=\"RepeatPreviousEasy\"", "model.core=\"lru\"", "learner.algo=appo",
                             "run.total_env_steps=100000"], 240)
    s = finished_run(p, d, 100000)
    check(s["episodes"] > 0 and s["mean_length"] == 51, "RepeatPreviousEasy episodes last 51 steps")
    e = subprocess.run([args.mpirl, "eval", d, "--episodes", "3"], capture_output=True, text=True, timeout=120)
    print(e.stdout, e.stderr)
    check(e.returncode == 0 and "mean return" in e.stdout, "mpirl eval plays the saved recurrent policy")


def case_policy_lag_drop(args):
    # Parameters go out every 8 updates and items more than 2 updates old are dropped from the
    # loss: some are dropped, the rest trained on, and the learners say how many.
    p, dt, d = run(args, 4, ["learner.publish_interval=8", "learner.max_policy_lag=2", "run.total_env_steps=100000"],
                   240)
    s = finished_run(p, d, 100000)
    lc = s["learner_counts"]
    check(lc["too_old"] > 0 and lc["trained"] > 0, f"dropped {lc['too_old']} too-old sequences, trained on {lc['trained']}")
    check(lc["lag_unknown"] == 0, "every item's lag is known in a run without a restore")


def case_synchronous_actors(args):
    # actor.synchronous: 2 actors x 8 envs share each 32-sequence batch (2 rollouts each per
    # parameter version), so every item is trained on at policy lag 0. Without the wait the actors
    # run a queue of 64 sequences ahead of the learner (lag 1-2 on this set-up).
    p, dt, d = run(args, 4, ["learner.algo=appo", "learner.batch_size=32", "env.num_envs=8", "actor.rollout_len=32",
                             "replay.capacity=64", "actor.synchronous=true", "run.total_env_steps=60000",
                             "run.log_interval_s=0.5"], 240)
    s = finished_run(p, d, 60000)
    rows = [json.loads(line) for line in open(os.path.join(d, "metrics.jsonl"))]
    lags = [r["policy_lag_max"] for r in rows if r.get("learner_updates", 0) > 0]
    check(lags and max(lags) == 0 and s["policy_lag_max"] == 0,
          f"every sequence trained at policy lag 0 ({len(lags)} rows, largest {max(lags) if lags else None})")
    lc = s["learner_counts"]
    check(lc["too_old"] == 0 and lc["trained"] == 32 * s["learner_updates"],
          f"{lc['trained']} sequences trained in {s['learner_updates']} updates of 32")


def spin_counts(p):
    """Every GOMP_SPINCOUNT that libgomp printed (OMP_DISPLAY_ENV=VERBOSE), one per process image."""
    return re.findall(r"GOMP_SPINCOUNT = '(\d+)'", p.stdout + p.stderr)


def case_openmp_spin_waits(args):
    # With learner.threads = 2, every rank executes itself again with GOMP_SPINCOUNT=10000 before
    # MPI_Init (app/omp_wait.h): libgomp, which reads it only when it is loaded, prints
    # (OMP_DISPLAY_ENV) its default spin count in each rank's first image and 10000 in its second.
    # A user's own OMP_WAIT_POLICY is kept, and a run with one thread per role is left alone: in
    # both, each rank runs once.
    env = dict(mpi_test.ENV, OMP_DISPLAY_ENV="VERBOSE")
    env.pop("OMP_WAIT_POLICY", None)
    env.pop("GOMP_SPINCOUNT", None)
    sets = ["learner.threads=2", "run.total_env_steps=5000"]
    p, dt, d = run(args, 3, sets, 240, env=env)
    finished_run(p, d, 5000)
    spins = spin_counts(p)
    check(sorted(spins) == ["10000"] * 3 + ["300000"] * 3,
          f"3 ranks, each started again with 10,000 spins: spin counts {spins}")
    # PASSIVE, not ACTIVE: an always-spinning thread would take a core from the other tests.
    p, dt, d = run(args, 3, sets, 240, env=dict(env, OMP_WAIT_POLICY="PASSIVE"))
    finished_run(p, d, 5000)
    spins = spin_counts(p)
    check(spins == ["0"] * 3, f"OMP_WAIT_POLICY=PASSIVE set by the user is kept: spin counts {spins}")
    p, dt, d = run(args, 3, ["run.total_env_steps=5000"], 240, env=env)
    finished_run(p, d, 5000)
    spins = spin_counts(p)
    check(spins == ["300000"] * 3, f"one thread per role: no rank started again, spin counts {spins}")


if __name__ == "__main__":
    mpi_test.main(globals())
