#!/usr/bin/env python3
"""Learning tests, in mpi_test.py's style: a run must reach a mean return within an env-step budget.
  learn_cartpole_impala, learn_cartpole_appo   CartPole to a mean return >= 400 (learn)
  learn_pendulum, learn_synthetic_defaults     configs/pendulum.toml; the defaults on Synthetic (learn_to)
  learn_impala_holds_under_lag, learn_impala_eps_holds_long   IMPALA at a policy lag near 27 updates
  learn_repeat_previous                        memory: a scan core solves RepeatPreviousEasy, the MLP does not
tests/mpi/python_env_test.py uses learn and learn_to too. The cases read MPIRL_SEED (default 1).
Run one: learning_test.py --mpirl build/mpirl CASE"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpi_test  # noqa: E402
from mpi_test import check, finished_run, run  # noqa: E402


def learn(args, algo, env_sets=(), env="CartPole-v1"):
    """CartPole (or another env with the same bar, via env_sets) must reach a mean return >= 400."""
    seed = int(os.environ.get("MPIRL_SEED", "1"))
    p, dt, d = run(args, 4, [*env_sets, f"learner.algo={algo}", f"run.seed={seed}", "run.total_env_steps=30000000",
                             "run.max_wall_seconds=540", "run.stop_mean_return=450", "run.log_interval_s=10"], 660)
    s = finished_run(p, d, 1)
    print(f"{env} {algo} seed {seed}: mean return {s['final_mean_return']} over the last 100 episodes after "
          f"{s['env_steps']} env steps in {s['wall_time_s']:.1f} s ({s['stop_reason']}, {s['sps']:.0f} SPS)")
    check(s["final_mean_return"] is not None and s["final_mean_return"] >= 400,
          f"{env} mean return {s['final_mean_return']} >= 400")
    dec = s.get("stop_decision", {})
    check(dec.get("reason") == s["stop_reason"], f"stop_decision names the stop reason ({dec})")
    if s["stop_reason"] == "stop_mean_return":  # the run says it reached the threshold: it did
        check(dec["mean_return"] >= 450 and dec["window_episodes"] == 100,
              f"decision mean {dec['mean_return']:.2f} over {dec['window_episodes']} episodes >= 450 "
              f"(final window {s['final_mean_return']:.2f})")
    check(s["wall_time_s"] <= 600, f"within 10 minutes ({s['wall_time_s']:.0f} s)")


def case_learn_repeat_previous(args):
    # Memory is required: a scan core must solve RepeatPreviousEasy where the MLP stays near chance
    # (-0.5), with the same env-step budget. MPIRL_CORES adds more cores to the report.
    seed = int(os.environ.get("MPIRL_SEED", "1"))
    budget = int(os.environ.get("MPIRL_BUDGET", "2000000"))
    cores = os.environ.get("MPIRL_CORES", "lru none").split()
    results = {}
    for core in cores:
        # PopArt (the default) off: with it the LRU reached 0.76-0.83 instead of 0.86-0.87 at 2M
        # steps (seeds 1, 2); this test is about memory, not value normalisation.
        p, dt, d = run(args, 4, ["env.id=\"RepeatPreviousEasy\"", f"model.core=\"{core}\"", f"run.seed={seed}",
                                 "learner.value_norm=\"none\"",
                                 f"run.total_env_steps={budget}", "run.log_interval_s=10"], 900)
        s = finished_run(p, d, budget)
        results[core] = s
        print(f"core {core}: mean return {s['final_mean_return']:.3f} after {s['env_steps']} env steps in "
              f"{s['wall_time_s']:.1f} s ({s['sps']:.0f} SPS)")
    for core, s in results.items():
        print(f"RESULT RepeatPreviousEasy seed {seed} core {core}: {s['final_mean_return']:.3f} "
              f"({s['env_steps']} steps, {s['wall_time_s']:.1f} s)")
    if "lru" in results:
        check(results["lru"]["final_mean_return"] >= 0.8, f"lru reaches >= 0.8 ({results['lru']['final_mean_return']:.3f})")
    if "none" in results:
        check(results["none"]["final_mean_return"] <= -0.3,
              f"the MLP stays <= -0.3 with the same budget ({results['none']['final_mean_return']:.3f})")


CONFIGS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "configs")


def learn_to(args, label, sets, threshold, accept, budget, config=None):
    """Trains until the mean return of 100 episodes reaches `threshold` (run.stop_mean_return) or
    `budget` env steps; passes when the final mean return is >= `accept` (set below the measured
    seeds' results, with margin). The env-step budget decides, not the clock: the wall-clock limit
    only guards against a hang."""
    seed = int(os.environ.get("MPIRL_SEED", "1"))
    cfg = os.path.join(CONFIGS, config) if config else None
    p, dt, d = run(args, 4, [*sets, f"run.seed={seed}", f"run.total_env_steps={budget}", "run.max_wall_seconds=1500",
                             f"run.stop_mean_return={threshold}", "run.log_interval_s=5"], 1700, config=cfg)
    s = finished_run(p, d, 1)
    r = s["final_mean_return"]
    print(f"RESULT {label} seed {seed}: mean return {r} over the last 100 episodes after {s['env_steps']} env steps "
          f"in {s['wall_time_s']:.1f} s ({s['stop_reason']}, {s['sps']:.0f} SPS)")
    check(r is not None and r >= accept, f"{label}: mean return {r} >= {accept}")
    dec = s.get("stop_decision", {})
    check(dec.get("reason") == s["stop_reason"], f"stop_decision names the stop reason ({dec})")
    if s["stop_reason"] == "stop_mean_return":  # the run says it reached the threshold: it did
        check(dec["mean_return"] >= threshold and dec["window_episodes"] == 100,
              f"decision mean {dec['mean_return']:.2f} over {dec['window_episodes']} episodes >= {threshold}")
    return s


def case_learn_pendulum(args):
    # configs/pendulum.toml (APPO, observation normalisation, PopArt): -250 within 2M env steps.
    learn_to(args, "Pendulum-v1", [], -250, -400, 2000000, config="pendulum.toml")


def case_learn_synthetic_defaults(args):
    # The defaults (no config file) on the Synthetic contextual bandit: 4 actions, 200 steps, chance 50.
    # Runs are asynchronous, so seed 1 does not repeat itself: with one action dead (P < 0.01) a run
    # ends near 138, with two near 96 (96.45 once in CI, 97 in bench runs); 110-172 otherwise. The
    # bound, 80, is well above chance and below the two-dead-actions plateau.
    learn_to(args, "Synthetic (defaults)", ['env.id="Synthetic"'], 190, 80, 2000000)


def impala_under_lag(args, what, budget, extra):
    """CartPole with IMPALA at a policy lag near 27 updates (14 actors gave that lag on a 16-core
    machine), run past 475 to `budget` env steps; returns the metrics rows. The replay
    holds at least 23 batches before it samples (min_size_to_sample), so the lag does not depend on
    which of learner and actors is faster; the learner is pinned to the CPU all the same."""
    seed = int(os.environ.get("MPIRL_SEED", "1"))
    p, dt, d = run(args, 4, [f"run.seed={seed}", "replay.capacity=768", "replay.min_size_to_sample=736",
                             'learner.device="cpu"', f"run.total_env_steps={budget}", "run.max_wall_seconds=600",
                             "run.log_interval_s=0.5"] + extra, 700)
    s = finished_run(p, d, budget)
    with open(os.path.join(d, "metrics.jsonl")) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    lags = sorted(r["policy_lag_mean"] for r in rows if r.get("policy_lag_mean"))
    lag = lags[len(lags) // 2] if lags else 0.0
    r = s["final_mean_return"]
    print(f"RESULT IMPALA {what}, policy lag {lag:.1f} (median), seed {seed}: mean return {r} after "
          f"{s['env_steps']} env steps ({s['stop_reason']})")
    check(lag >= 20, f"the run had the policy lag it is about: median {lag:.1f} >= 20 updates")
    check(s["stop_reason"] == "total_env_steps", f"ran to its step budget ({s['stop_reason']})")
    best = max((x["mean_return"] for x in rows if x.get("mean_return") is not None), default=0)
    check(best >= 475, f"solved it at some point: best 100-episode mean {best} >= 475")
    # A collapse ends at about 9 (a deterministic policy).
    check(r is not None and r >= 100, f"not collapsed at the end: mean return {r} >= 100")
    return rows


def case_learn_impala_holds_under_lag(args):
    # The defaults, 6M steps. With the IMPALA paper's policy-gradient clip (learner.pg_rho_bar=1, the
    # old default) this run ended at a return of 9 (5 of 5 seeds without min_size_to_sample); with 10,
    # 4 of 4 seeds ended at 500, and a dip went no lower than 170, and recovered.
    impala_under_lag(args, "defaults", 6000000, [])


def case_learn_impala_eps_holds_long(args):
    # learner.eps=0.01, docs/algorithms.md's advice for long IMPALA runs at a high lag, 20M steps: the defaults
    # ended at 9 in 4 of 12 seeds and fell below 100 in 9; with eps 0.01 none of 12 fell below 100 after
    # its first 475 (lowest 161-488; seed 1: 478, from metrics every 0.05 s; this test reads them every
    # 0.5 s). Checks the lowest 100-episode mean after the first 475, too.
    rows = impala_under_lag(args, "eps 0.01", 20000000, ["learner.eps=0.01"])
    means = [x["mean_return"] for x in rows if x.get("mean_return") is not None]
    first = next(i for i, m in enumerate(means) if m >= 475)
    low = min(means[first:])
    print(f"RESULT lowest 100-episode mean after the first 475: {low}")
    check(low >= 100, f"never fell below 100 after solving it: lowest {low} >= 100")


def case_learn_cartpole_impala(args):
    learn(args, "impala")


def case_learn_cartpole_appo(args):
    learn(args, "appo")


if __name__ == "__main__":
    mpi_test.main(globals())
