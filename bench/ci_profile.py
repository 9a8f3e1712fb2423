#!/usr/bin/env python3
"""Where CI's time goes (a benchmark, not a test): runs every CTest test of a build directory
alone, one after the other, and records its wall time and the CPU time of everything it waited
for (os.wait4's rusage: its mpirun and ranks; not daemons it leaves to others, such as slurmd's
jobs or a namespace node's init). The CPU share (cpu / wall) says whether a test computes (near
the machine's core count) or waits (near 0): what ctest's PROCESSORS property should say.

    bench/ci_profile.py --build build --csv bench/results/ci_profile.csv [-L LABEL] [-R REGEX] [--merge]

Writes one CSV row a test (name, labels, wall_s, cpu_s, cpu_share, passed, machine) and prints a summary
per label: tests, wall s, CPU s. With --merge, the rows of the tests it ran replace theirs in the
CSV that is there, the others stay, and the rows of tests the build no longer has go: for a few
new or changed tests without a 40-minute run.
Run it on an otherwise idle machine; say which machine it was.
"""
import argparse
import csv
import json
import os
import platform
import subprocess
import sys
import time


def tests(build, extra):
    out = subprocess.run(["ctest", "--show-only=json-v1", *extra], cwd=build, capture_output=True, text=True,
                         check=True).stdout
    rows = []
    for t in json.loads(out)["tests"]:
        labels = []
        for p in t.get("properties", []):
            if p["name"] == "LABELS":
                labels = p["value"]
        rows.append((t["name"], labels))
    return rows


def run_one(build, name):
    t0 = time.monotonic()
    p = subprocess.Popen(["ctest", "-R", "^" + name.replace(".", "\\.") + "$", "--output-on-failure"], cwd=build,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    cpu = ru.ru_utime + ru.ru_stime
    return wall, cpu, os.waitstatus_to_exitcode(status) == 0, out.decode(errors="replace")


def machine():
    """The CPU model and core count: a row measured on an AMD EPYC VM and one on a Xeon VM differ."""
    model = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            model = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{model}, {os.cpu_count()} cores"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--csv", required=True)
    ap.add_argument("-L", dest="label")
    ap.add_argument("-R", dest="regex")
    ap.add_argument("--merge", action="store_true", help="update the rows of the tests run, keep the others")
    a = ap.parse_args()
    extra = (["-L", a.label] if a.label else []) + (["-R", a.regex] if a.regex else [])
    env_ok = os.environ.get("OMPI_ALLOW_RUN_AS_ROOT") == "1"
    if not env_ok and os.geteuid() == 0:
        os.environ.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    rows = []
    todo = tests(a.build, extra)
    print(f"# {len(todo)} tests on {platform.node()}, {os.cpu_count()} cores", flush=True)
    for name, labels in todo:
        wall, cpu, ok, out = run_one(a.build, name)
        rows.append(dict(name=name, labels=";".join(labels), wall_s=round(wall, 2), cpu_s=round(cpu, 2),
                         cpu_share=round(cpu / wall, 2) if wall > 0 else 0, passed=int(ok), machine=machine()))
        print(f"{name:58s} {wall:8.1f} s wall {cpu:8.1f} s cpu  {'ok' if ok else 'FAILED'}", flush=True)
        if not ok:
            print(out[-3000:], flush=True)
    os.makedirs(os.path.dirname(os.path.abspath(a.csv)), exist_ok=True)
    written = rows
    if a.merge and os.path.exists(a.csv):
        new = {r["name"]: r for r in rows}
        with open(a.csv, newline="") as f:
            old = list(csv.DictReader(f))
        # Rows of tests the build no longer has (renamed, removed, or gtest cases now run per suite) go.
        known = {name for name, _ in tests(a.build, [])}
        gone = [r["name"] for r in old if r["name"] not in known]
        if gone:
            print(f"# dropped {len(gone)} rows of tests this build does not have: {' '.join(gone[:5])} ...")
        written = [new.pop(r["name"], r) for r in old if r["name"] in known] + list(new.values())
    with open(a.csv, "w", newline="") as f:
        # Rows from before the machine column say "not recorded" (earlier 2-core VMs).
        w = csv.DictWriter(f, fieldnames=list(rows[0]), restval="not recorded")
        w.writeheader()
        w.writerows(written)
    per = {}
    for r in rows:
        for lab in (r["labels"] or "none").split(";"):
            n, wall, cpu = per.get(lab, (0, 0.0, 0.0))
            per[lab] = (n + 1, wall + r["wall_s"], cpu + r["cpu_s"])
    print(f"\n{'label':12s} {'tests':>6s} {'wall s':>9s} {'cpu s':>9s}")
    for lab, (n, wall, cpu) in sorted(per.items(), key=lambda kv: -kv[1][1]):
        print(f"{lab:12s} {n:6d} {wall:9.0f} {cpu:9.0f}")
    tw = sum(r["wall_s"] for r in rows)
    print(f"{'total':12s} {len(rows):6d} {tw:9.0f} {sum(r['cpu_s'] for r in rows):9.0f}")
    failed = [r["name"] for r in rows if not r["passed"]]
    if failed:
        print("failed:", " ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
