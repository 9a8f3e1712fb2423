#!/usr/bin/env python3
"""Score the final policies of a bench/learning.py run the way a test-rollout reference does.

CleanRL's metric, the one bench/learning.py reports, is the mean return of the last 100 training
episodes. Some references (gymnax-blines' PPO checkpoints) report instead the final policy's mean
return over N fresh test episodes. This plays each run's saved policy (learning.py with
--set 'run.checkpoint="end"', so that runs/NAME/model.pt exists) with `mpirl eval`, sampled (as
gymnax-blines' evaluation does: it samples from the policy) and greedy (the mode), and writes
OUT/eval.csv beside the training metric from OUT/results.csv:

    bench/learning.py --tasks classic_pendulum --seeds 1 2 3 4 5 6 --set 'run.checkpoint="end"' --out DIR
    bench/eval_final.py --mpirl build/mpirl --out DIR
"""
import argparse
import csv
import json
import os
import pathlib
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import learning  # noqa: E402


def play(mpirl, run, episodes, seed, greedy):
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "eval.json"
        cmd = [mpirl, "eval", str(run), "--episodes", str(episodes), "--seed", str(seed), "--threads", "1",
               "--json", str(out)] + (["--greedy"] if greedy else [])
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"eval_final: {' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}{p.stderr}")
        return json.loads(out.read_text())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mpirl", default=str(pathlib.Path(__file__).resolve().parent.parent / "build" / "mpirl"))
    ap.add_argument("--out", required=True, help="a bench/learning.py --out directory (results.csv, runs/)")
    ap.add_argument("--episodes", type=int, default=1000,
                    help="test episodes per run and mode (gymnax-blines plays 164; more give a tighter mean)")
    ap.add_argument("--seed", type=int, default=10000,
                    help="the test episodes' env seed is this plus the run's training seed, so that runs do not "
                         "share one set of start states (a shared set moves every run's mean the same way)")
    args = ap.parse_args()
    out = pathlib.Path(args.out)
    results = out / "results.csv"
    if not results.exists():
        sys.exit(f"eval_final: {results} not found: run bench/learning.py --out {out} first")
    table = []
    for r in learning.read_results(str(out)):
        run = pathlib.Path(r["run_dir"])
        name = run.name
        if not (run / "model.pt").exists():
            sys.exit(f"eval_final: {run}/model.pt not found: the runs need --set 'run.checkpoint=\"end\"'")
        seed = args.seed + r["seed"]
        sampled = play(args.mpirl, run, args.episodes, seed, greedy=False)
        greedy = play(args.mpirl, run, args.episodes, seed, greedy=True)
        table.append({"task": r["task"], "seed": r["seed"], "train_last100": r["final_mean_return"],
                      "env_steps": r["env_steps"], "episodes": args.episodes, "eval_seed": seed,
                      "sampled_mean": f"{sampled['mean_return']:.2f}", "sampled_std": f"{sampled['std_return']:.2f}",
                      "greedy_mean": f"{greedy['mean_return']:.2f}", "greedy_std": f"{greedy['std_return']:.2f}"})
        t = table[-1]
        print(f"{name}: training (last 100) {t['train_last100']}, sampled {t['sampled_mean']} +- {t['sampled_std']}, "
              f"greedy {t['greedy_mean']} +- {t['greedy_std']} ({args.episodes} episodes each)", flush=True)
    with (out / "eval.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(table[0]))
        w.writeheader()
        w.writerows(table)
    print(f"wrote {out / 'eval.csv'}")


if __name__ == "__main__":
    main()
