#!/usr/bin/env python3
"""CPU seconds per ctest test in a parallel run, from the kernel's process accounting (acct(2)).

bench/ci_profile.py times each test alone and counts only its own children; this counts every
process of a real `ctest -j` run, also the ranks that the cluster tests start inside namespace
nodes (they are not descendants of the test: their share is reported as "outside any test").

  bench/ctest_cpu.py run [--acct FILE] [--log FILE] -- ctest -j3 ...   (root; Debian package acct)
  bench/ctest_cpu.py report ACCT_FILE CTEST_LOG [--top N]
  bench/ctest_cpu.py compare OLD_LOG NEW_LOG [--top N]

`compare` sets two ctest (or whole `.ci/run`) logs side by side: the summed seconds of the tests
both ran, so that a change in the test set is told apart from the machine's speed that day (a VM
of the same kind ran the same tests 1.46x slower on one day than on another), the tests only one
ran, the largest changes, and each log's `test.sh: setup .. build .. ctest ..` line.

`run` turns accounting on into FILE, runs the command in build/, turns it off and reports. Each
test is the process ctest started for it, matched by its elapsed time to the log's "Passed N sec";
a process belongs to the test whose process it descends from (pids are reused: a parent is the
process with that pid alive when the child started).
"""
import argparse
import collections
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def records(acct_file):
    """dump-acct's records: command, CPU seconds, elapsed seconds, pid, ppid, start (epoch s)."""
    try:
        out = subprocess.run(["dump-acct", acct_file], capture_output=True, text=True, check=True).stdout
    except FileNotFoundError:
        sys.exit("ctest_cpu: dump-acct not found (apt-get install -y acct)")
    except subprocess.CalledProcessError as e:
        sys.exit(f"ctest_cpu: dump-acct {acct_file} failed: {e.stderr.strip()}")
    recs = []
    for n, line in enumerate(out.splitlines(), 1):
        f = [x.strip() for x in line.split("|")]
        if len(f) < 15:
            continue
        try:
            start = time.mktime(time.strptime(f[14], "%a %b %d %H:%M:%S %Y"))
            recs.append(dict(comm=f[0], cpu=(float(f[2]) + float(f[3])) / 100.0, et=float(f[4]) / 100.0,
                             pid=int(f[9]), ppid=int(f[10]), start=start))
        except ValueError as e:
            sys.exit(f"ctest_cpu: {acct_file}: record {n} unreadable ({e}): {line[:120]}")
    if not recs:
        sys.exit(f"ctest_cpu: {acct_file} holds no process records")
    return recs


def test_times(log_file, text=None):
    """{test name: seconds} of every finished test in a ctest log (TEXT: the log, already read)."""
    if text is None:
        with open(log_file, errors="replace") as f:
            text = f.read()
    times = {n: float(t) for n, t in re.findall(r"Test\s+#\d+: (\S+) \.+\s+\S+\s+([\d.]+) sec", text)}
    if not times:
        sys.exit(f"ctest_cpu: {log_file} names no finished test ('Test #N: name .... Passed S sec')")
    return times


def compare(old_log, new_log, top):
    logs = []
    for f in (old_log, new_log):
        with open(f, errors="replace") as fh:
            text = fh.read()
        times = test_times(f, text)
        phases = re.findall(r"test\.sh: setup \d+ s, build \d+ s, ctest \d+ s", text)
        print(f"{f}: {len(times)} tests; {phases[-1] if phases else 'no test.sh line'}")
        logs.append(times)
    old, new = logs
    both = set(old) & set(new)
    so, sn = sum(old[n] for n in both), sum(new[n] for n in both)
    print(f"the {len(both)} tests both ran: {so:.0f} s -> {sn:.0f} s (x{sn / so:.2f})")
    for name, only, log in (("old", set(old) - set(new), old), ("new", set(new) - set(old), new)):
        if only:
            print(f"only in {name}: " + ", ".join(f"{n} {log[n]:.0f} s" for n in sorted(only, key=lambda n: -log[n])))
    print("largest changes (old s, new s, new/old):")
    for n in sorted(both, key=lambda n: -abs(new[n] - old[n]))[:top]:
        print(f"  {n:50s} {old[n]:7.1f} {new[n]:7.1f}  x{new[n] / max(old[n], 0.01):.2f}")


def report(acct_file, log_file, top):
    recs = records(acct_file)
    runs = [r for r in recs if r["comm"] == "ctest"]
    if not runs:
        sys.exit(f"ctest_cpu: no ctest process in {acct_file}")
    ctest = max(runs, key=lambda r: r["et"])
    # Only what ran while ctest did (an accounting file of a whole .ci/run also holds the build).
    recs = [r for r in recs if ctest["start"] - 1 <= r["start"] <= ctest["start"] + ctest["et"] + 1]
    times = [(t, n) for n, t in test_times(log_file).items()]
    by_pid = collections.defaultdict(list)
    for r in recs:
        by_pid[r["pid"]].append(r)

    def parent(r):
        alive = [q for q in by_pid.get(r["ppid"], []) if q["start"] - 1 <= r["start"] <= q["start"] + q["et"] + 1]
        return min(alive, key=lambda q: q["et"]) if alive else None

    kids = [r for r in recs if r["ppid"] == ctest["pid"] and r["start"] >= ctest["start"] - 1]
    test_of = {}
    for k in sorted(kids, key=lambda k: -k["et"]):  # longest first: they are the least ambiguous
        if not times:
            break
        best = min(times, key=lambda x: abs(x[0] - k["et"]))
        test_of[id(k)] = best[1]
        times.remove(best)
    owner = dict(test_of)  # id(record) -> test name, filled in as ancestor chains are walked

    def owner_of(r):
        chain, q, name = [], r, None
        while q is not None and len(chain) < 64:
            if id(q) in owner:
                name = owner[id(q)]
                break
            chain.append(q)
            q = parent(q)
        name = name or "(outside any test: cluster nodes, daemons)"
        for c in chain:  # a test's processes share their ancestors: each chain is walked once
            owner[id(c)] = name
        return name

    cpu, comms, ranks = collections.Counter(), collections.defaultdict(collections.Counter), collections.Counter()
    for r in recs:
        name = owner_of(r)
        cpu[name] += r["cpu"]
        comms[name][r["comm"]] += r["cpu"]
        ranks[name] += r["comm"] == "mpirl"
    total = sum(cpu.values())
    mpirl = [r["cpu"] for r in recs if r["comm"] == "mpirl"]
    print(f"{total:.0f} CPU-s in {len(recs)} processes over {ctest['et']:.0f} s of ctest; "
          f"{len(mpirl)} mpirl processes, {sum(mpirl):.0f} CPU-s, median "
          f"{sorted(mpirl)[len(mpirl) // 2] if mpirl else 0:.2f} CPU-s each")
    print(f"{'CPU-s':>8} {'share':>6} {'mpirl':>5}  test (largest commands)")
    for name, c in cpu.most_common(top):
        what = ", ".join(f"{k} {v:.0f}" for k, v in comms[name].most_common(3))
        print(f"{c:8.1f} {100 * c / total:5.1f}% {ranks[name]:5d}  {name} ({what})")


def run(acct_file, log_file, cmd):
    if os.geteuid() != 0:
        sys.exit("ctest_cpu: run needs root (accton)")
    if not cmd:
        sys.exit("ctest_cpu: run needs a command after --, e.g. -- ctest -j3")
    open(acct_file, "w").close()
    subprocess.run(["accton", acct_file], check=True)
    try:
        with open(log_file, "w") as log:
            rc = subprocess.run(cmd, cwd=os.path.join(ROOT, "build"), stdout=log, stderr=subprocess.STDOUT).returncode
    finally:
        subprocess.run(["accton", "off"], check=True)
    print(f"ctest_cpu: {' '.join(cmd)} exited with {rc}; log {log_file}, accounting {acct_file}")
    return rc


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="mode", required=True)
    r = sub.add_parser("run")
    r.add_argument("--acct", default="/var/log/mpirl-ctest.acct")
    r.add_argument("--log", default="/tmp/mpirl-ctest.log")
    r.add_argument("--top", type=int, default=60)
    r.add_argument("cmd", nargs=argparse.REMAINDER)
    p = sub.add_parser("report")
    p.add_argument("acct")
    p.add_argument("log")
    p.add_argument("--top", type=int, default=60)
    c = sub.add_parser("compare")
    c.add_argument("old")
    c.add_argument("new")
    c.add_argument("--top", type=int, default=15)
    a = ap.parse_args()
    if a.mode == "compare":
        files = (a.old, a.new)
    elif a.mode == "report":
        files = (a.acct, a.log)
    else:
        files = ()
    for f in files:
        if not os.path.isfile(f):
            sys.exit(f"ctest_cpu: {f}: no such file")
    if a.mode == "compare":
        compare(a.old, a.new, a.top)
        return
    if a.mode == "run":
        cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
        rc = run(a.acct, a.log, cmd)
        report(a.acct, a.log, a.top)
        sys.exit(rc)
    report(a.acct, a.log, a.top)


if __name__ == "__main__":
    main()
