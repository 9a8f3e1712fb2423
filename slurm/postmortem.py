#!/usr/bin/env python3
"""Why did mpirun fail? Reads what mpirun printed (Open MPI 4.x messages) and names the cause:
  node_lost HOST   mpirun lost its daemon on HOST (the node died, or its link went silent)
  rank_lost HOST   a rank on HOST died on a signal or exited before MPI_Finalize
  unknown          neither (a fatal error of mpirl's own is in the log, with its rank and host)
With --run DIR, appends the cause to DIR/postmortem.jsonl and records it in DIR/summary.json
(stop_reason, lost_host, lost_rank; the ranks' own reason stays as ranks_stop_reason) when that
summary was written by this launch (newer than --since, a Unix time) -- never one left by an
earlier segment, and none is made up when learner 0 could not write one.
  postmortem.py LAUNCHER_LOG [--run RUN_DIR [--since T]]   prints "<cause> <host> [rank N]" """
import argparse
import json
import os
import re
import sys
import time

NODE = [re.compile(p) for p in (r"lost communication with a remote daemon", r"daemon has unexpectedly failed",
                                r"ORTE does not know how to route a message", r"a daemon .* failed")]
REMOTE = re.compile(r"Remote daemon\s*:\s*\S+ on node (\S+)")
NOTICED = re.compile(r"process rank (\d+) with PID \d+ on node (\S+) exited on signal (\d+)")


def classify(text):
    if any(p.search(text) for p in NODE):
        m = REMOTE.search(text)
        return {"cause": "node_lost", "host": m.group(1) if m else None}
    m = NOTICED.search(text)
    if m:
        return {"cause": "rank_lost", "host": m.group(2), "rank": int(m.group(1)), "signal": int(m.group(3))}
    return {"cause": "unknown", "host": None}


def write_atomic(path, obj):
    tmp = path + ".tmp.postmortem"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=2)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def record(run_dir, c, since):
    """Returns what was done with summary.json (for the caller's log line)."""
    with open(os.path.join(run_dir, "postmortem.jsonl"), "a") as f:
        f.write(json.dumps({"time": time.time(), **c}) + "\n")
    path = os.path.join(run_dir, "summary.json")
    try:
        if since is not None and os.path.getmtime(path) < since:
            return "summary.json is from an earlier launch: left as it is"
        with open(path) as f:
            s = json.load(f)
    except FileNotFoundError:
        return "no summary.json (learner 0 wrote none)"
    except (OSError, ValueError) as e:
        return f"summary.json unreadable ({e}): left as it is"
    s.setdefault("ranks_stop_reason", s.get("stop_reason"))
    s["stop_reason"] = c["cause"]
    s["lost_host"] = c["host"]
    if "rank" in c:
        s["lost_rank"] = c["rank"]
    write_atomic(path, s)
    return "recorded in summary.json"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("--run")
    ap.add_argument("--since", type=float, help="Unix time the launch began")
    a = ap.parse_args()
    with open(a.log, errors="replace") as f:
        c = classify(f.read())
    done = None
    if a.run and c["cause"] != "unknown" and os.path.isdir(a.run):
        done = record(a.run, c, a.since)
    print(c["cause"], c["host"] or "?", *([f"rank {c['rank']}"] if "rank" in c else []))
    if done:
        print(done, file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
