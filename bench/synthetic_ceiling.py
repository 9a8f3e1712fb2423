#!/usr/bin/env python3
"""What the Synthetic env's defaults can reach, and where a trained policy falls short.

Synthetic (envs/synthetic.cpp): observations are 64 uniform features in [-1, 1]; the reward is 1
when the action is the argmax of the first 4 features, 0 otherwise; 200 steps, so the optimum is
200 and chance is 50. A policy's expected return is 200 * mean P(right action).

  --ceiling   trains the default network (64-64 tanh MLP, Adam lr 5e-4 eps 1e-5, batches of
              32 x 32 = 1024 steps) on the *exact* expected reward, sum_a pi(a|x) r(x, a): no
              sampled actions, no returns, no value function. No RL run with the same network,
              optimizer and batch can do better per env step, so it bounds what the defaults can
              reach within a step budget.
  RUN_DIR...  loads trained Synthetic policies (runs/NAME, through python/mpirl_policy) and prints
              each action's mean probability and P(right action) per right action: an action the
              policy never takes shows up as a 0 (a "dead" action; the defaults end with one).

Not a test: numbers depend on seeds. Examples:
  bench/synthetic_ceiling.py --ceiling --steps 2000000
  bench/synthetic_ceiling.py --ceiling --hidden 128 128 --lr 1e-3
  PYTHONPATH=python bench/synthetic_ceiling.py runs/synthetic-*/
"""
import argparse
import os
import sys

import torch

OBS, RELEVANT, LENGTH = 64, 4, 200


def sample(n, gen):
    x = torch.rand(n, OBS, generator=gen) * 2 - 1
    return x, x[:, :RELEVANT].argmax(1)


def ceiling(args):
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed + 1)
    act = {"tanh": torch.nn.Tanh, "relu": torch.nn.ReLU}[args.activation]
    layers, width = [], OBS
    for h in args.hidden:
        layers += [torch.nn.Linear(width, h), act()]
        width = h
    net = torch.nn.Sequential(*layers, torch.nn.Linear(width, RELEVANT))
    opt = torch.optim.Adam(net.parameters(), lr=args.lr, eps=1e-5)
    updates = args.steps // args.batch
    test_x, test_y = sample(20000, gen)
    print(f"network {args.hidden} {args.activation}, Adam lr {args.lr}, {args.batch} steps per update, "
          f"exact expected-reward gradient; expected return (of {LENGTH}) on 20000 fresh observations:")
    for u in range(1, updates + 1):
        x, y = sample(args.batch, gen)
        p = net(x).softmax(1)
        loss = -p.gather(1, y[:, None]).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if u % max(1, updates // 10) == 0 or u == updates:
            with torch.no_grad():
                right = net(test_x).softmax(1).gather(1, test_y[:, None]).mean().item()
            print(f"  {u * args.batch:>9} env steps: {LENGTH * right:6.1f}", flush=True)


def inspect(run_dirs):
    from mpirl_policy import load_policy, read_config
    gen = torch.Generator().manual_seed(0)
    x, y = sample(20000, gen)
    for run in run_dirs:
        policy = load_policy(run)  # names a missing or unreadable run directory
        env = read_config(os.path.join(run, "config.toml"))["env"]
        if (env["id"], env["obs_dim"], env["num_actions"]) != ("Synthetic", OBS, RELEVANT):
            sys.exit(f"{run}: env {env['id']} (obs_dim {env['obs_dim']}, num_actions {env['num_actions']}) is not "
                     f"the default Synthetic env (obs_dim {OBS}, num_actions {RELEVANT}) this script knows")
        with torch.no_grad():
            logits, _ = policy(x)
        p = logits.softmax(1)
        right = p.gather(1, y[:, None]).squeeze(1)
        mean_p = " ".join(f"{v:.3f}" for v in p.mean(0).tolist())
        per = " ".join(f"{right[y == k].mean().item():.2f}" for k in range(RELEVANT))
        print(f"{os.path.normpath(run)}: expected return {LENGTH * right.mean().item():.1f}; "
              f"mean P(action) {mean_p}; P(right | right action = 0..3) {per}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="*", help="run directories of trained Synthetic policies")
    ap.add_argument("--ceiling", action="store_true")
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--hidden", type=int, nargs="+", default=[64, 64])
    ap.add_argument("--activation", choices=["tanh", "relu"], default="tanh")
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if not args.ceiling and not args.runs:
        ap.error("give --ceiling or run directories")
    if args.ceiling:
        ceiling(args)
    if args.runs:
        inspect(args.runs)


if __name__ == "__main__":
    sys.exit(main())
