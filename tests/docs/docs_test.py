#!/usr/bin/env python3
"""The documentation site (docs/, built by scripts/docs.sh) cannot lie about the first run.
  site              the site builds strictly (a broken link or anchor, a page in no table of
                    contents fails: scripts/docs.sh runs Sphinx with -W -n); every page of docs/
                    became a page of the site; the configuration page lists every key of
                    configs/default.toml with its default (it is generated from that file);
                    docs/results.md and README.md's learning row are what bench/results_page.py
                    writes from the committed suite results
  troubleshooting   every message quoted in a `### ` heading of docs/troubleshooting.md occurs in
                    the source: each piece between `...` markers verbatim, all in one source file (a few
                    marked "(Open MPI)" or "(Slurm)" are those tools' own)
  getting_started   every ```sh block of docs/getting-started.md runs, in order, in one bash
                    session (set -e), from a directory laid out as a clone of the repository (links
                    to its folders, its own runs/), and exits 0; then the runs it made are there:
                    the default job solved or finished, the APPO, own-env, two-node and Slurm runs
                    wrote their summaries, the own env's run used py:my_env:make, the two-node
                    run's ranks were on n1 and n2; and docs/replay.md's h5py example, as written,
                    reads the first run's replay.h5
  readme            README.md stays short (at most 150 lines) and its links into docs/ exist
Run one: docs_test.py --repo DIR [--build DIR] --workdir DIR CASE"""
import argparse
import glob
import html
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import tomllib


def check(cond, what):
    if not cond:
        raise SystemExit(f"FAILED: {what}")
    print(f"ok: {what}")


def case_site(args):
    p = subprocess.run(["bash", os.path.join(args.repo, "scripts", "docs.sh")], capture_output=True,
                       text=True, timeout=900)
    sys.stdout.write(p.stdout[-4000:] + p.stderr[-4000:])
    check(p.returncode == 0, f"scripts/docs.sh built the site strictly (exit {p.returncode})")
    site = os.path.join(args.repo, "build", "site")
    pages = sorted(os.path.splitext(f)[0] for f in os.listdir(os.path.join(args.repo, "docs"))
                   if f.endswith(".md"))
    missing = [p for p in pages if not os.path.exists(os.path.join(site, p + ".html"))]
    check(len(pages) >= 15 and not missing, f"{len(pages)} pages of docs/ in the site, missing {missing}")
    text = html.unescape(re.sub(r"<[^>]+>", "", open(os.path.join(site, "configuration.html")).read()))
    defaults = tomllib.load(open(os.path.join(args.repo, "configs", "default.toml"), "rb"))
    keys = [f"{s}.{k}" for s, t in defaults.items() for k in t]
    absent = [k for k in keys if k not in text]
    check(len(keys) > 100 and not absent,
          f"configuration page lists all {len(keys)} keys of default.toml (absent: {absent})")
    lr = str(defaults["learner"]["lr"])
    check(re.search(r"learner\.lr\s*0\.0005", text) is not None and lr == "0.0005",
          "configuration page shows learner.lr with its default 0.0005")
    p = subprocess.run([sys.executable, os.path.join(args.repo, "bench", "results_page.py"), "--check"],
                       capture_output=True, text=True)
    sys.stdout.write(p.stdout + p.stderr)
    check(p.returncode == 0, "docs/results.md and README.md's learning row are what bench/results_page.py "
          "writes from bench/results/suites/")


SOURCE_EXT = (".cpp", ".h", ".inc", ".cu", ".cuh", ".py", ".sh", ".sbatch", ".toml", ".cmake",
              "CMakeLists.txt")


def source_files(repo):
    skip = {"build", ".git", "runs", "docs", "tests"}
    for top in sorted(os.listdir(repo)):
        path = os.path.join(repo, top)
        if top in skip or top.startswith("build"):
            continue
        if os.path.isfile(path):
            if top.endswith(SOURCE_EXT):
                yield path
            continue
        for d, _, files in os.walk(path):
            for f in files:
                if f.endswith(SOURCE_EXT):
                    yield os.path.join(d, f)


def case_troubleshooting(args):
    page = open(os.path.join(args.repo, "docs", "troubleshooting.md")).read()
    messages = re.findall(r"^### `([^`]+)`\s*$", page, flags=re.M)
    # Messages printed by Open MPI or Slurm themselves, not by mpirl: marked, and only a few.
    external = re.findall(r"^### `([^`]+)` \((?:Open MPI|Slurm)\)\s*$", page, flags=re.M)
    headings = re.findall(r"^### ", page, flags=re.M)
    check(len(messages) >= 30 and len(messages) + len(external) == len(headings) and len(external) <= 3,
          f"{len(messages)} messages of mpirl's and {len(external)} of Open MPI's or Slurm's; "
          "every ### heading is one quoted message")
    check(len(set(messages + external)) == len(messages) + len(external), "no message is listed twice")
    texts = [open(f, encoding="utf-8", errors="replace").read() for f in source_files(args.repo)]
    bad = []
    for m in messages:
        pieces = [p for p in m.split("...") if p.strip()]  # spaces included, as shown
        if not pieces:
            bad.append((m, "no text"))
            continue
        short = [p for p in pieces if len(p) < 8]
        if short:
            bad.append((m, f"pieces under 8 characters: {short}"))
        elif not any(all(p in t for p in pieces) for t in texts):
            alone = [p for p in pieces if not any(p in t for t in texts)]
            bad.append((m, f"pieces in no source file: {alone}" if alone else
                        "no one source file has every piece"))
    for m, why in bad:
        print(f"  {m}\n    {why}")
    check(not bad, f"every piece of every message occurs in the source ({len(bad)} do not)")


def sh_blocks(path):
    return re.findall(r"^```sh\n(.*?)^```\s*$", open(path).read(), flags=re.M | re.S)


def case_getting_started(args):
    blocks = sh_blocks(os.path.join(args.repo, "docs", "getting-started.md"))
    check(len(blocks) >= 6, f"{len(blocks)} shell blocks on the getting-started page")
    # A directory that looks like the root of a clone: the repository's folders linked in (build/
    # too, so the build is reused), its own runs/ and files. Under the repository (build/), since
    # the namespace nodes share that file system but not /tmp.
    work = os.path.join(args.workdir, "getting-started")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    for name in os.listdir(args.repo):
        if name not in (".git", "runs", "build") and not name.startswith("."):
            os.symlink(os.path.join(args.repo, name), os.path.join(work, name))
    os.symlink(args.build, os.path.join(work, "build"))
    script = ["set -euo pipefail"]
    for i, b in enumerate(blocks, 1):
        script += [f"echo '### getting-started block {i} of {len(blocks)}'", b.rstrip("\n")]
    script.append("echo '### getting-started: every block ran'")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_"))}
    p = subprocess.Popen(["bash", "-c", "\n".join(script)], cwd=work, env=env, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    # A hang bound below ctest's, so that the nodes are still taken down: the whole session goes.
    watchdog = threading.Timer(args.timeout, lambda: os.killpg(p.pid, signal.SIGKILL))
    watchdog.start()
    out = []
    try:
        for line in p.stdout:
            sys.stdout.write(line)
            out.append(line)
        p.wait()
    finally:
        watchdog.cancel()
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        # A block that failed between `up` and `down` must not leave the nodes behind.
        subprocess.run(["bash", os.path.join(args.repo, "scripts", "cluster-local.sh"), "down"],
                       capture_output=True, timeout=120)
    text = "".join(out)
    reached = re.findall(r"### getting-started block (\d+)", text)
    check(p.returncode == 0 and "every block ran" in text,
          f"every block ran and exited 0 (exit {p.returncode}, last block started: "
          f"{reached[-1] if reached else 'none'} of {len(blocks)})")
    summaries = {}
    for s in glob.glob(os.path.join(work, "runs", "*", "summary.json")):
        summaries[os.path.basename(os.path.dirname(s))] = json.load(open(s))
    print("runs:", {k: v.get("stop_reason") for k, v in summaries.items()})
    first_names = [k for k in summaries if k.startswith("cartpole-")]
    first = [summaries[k] for k in first_names]
    first_dir = os.path.join(work, "runs", first_names[0] if first_names else "none")
    ends = ("stop_mean_return", "total_env_steps", "max_wall_seconds")  # cartpole.toml has all three
    check(len(first) == 1 and first[0]["stop_reason"] in ends,
          f"scripts/train.sh's run finished ({first[0]['stop_reason'] if first else 'no run'})")
    check(re.search(r"^(solved|at the end).*mean return", text, flags=re.M) is not None,
          "scripts/train.sh printed the return")
    cfgs = {k: tomllib.load(open(os.path.join(work, "runs", k, "config.toml"), "rb")) for k in summaries}
    own = [k for k, c in cfgs.items() if c["env"]["id"] == "py:my_env:make"]
    check(len(own) == 1 and summaries[own[0]]["env_steps"] >= 200000,
          f"the own env's run trained py:my_env:make to its budget: {own}")
    appo = [k for k, c in cfgs.items() if c["learner"]["algo"] == "appo"]
    check(len(appo) == 1, f"the APPO run: {appo}")
    hosts = [sorted({r["host"] for r in v.get("ranks", [])}) for v in summaries.values()]
    check(["n1", "n2"] in hosts, f"a run placed its ranks on n1 and n2: {hosts}")
    # docs/replay.md's h5py example, as written, on the first run's dump.
    example = re.findall(r"^```python\n(.*?)^```\s*$", open(os.path.join(args.repo, "docs", "replay.md")).read(),
                         flags=re.M | re.S)
    check(len(example) == 1 and "runs/NAME/replay.h5" in example[0], "docs/replay.md has one h5py example")
    code = example[0].replace("runs/NAME/", os.path.relpath(first_dir, work) + "/")
    p = subprocess.run([sys.executable, "-c", code], cwd=work, capture_output=True, text=True, timeout=120)
    sys.stdout.write(p.stdout[-2000:] + p.stderr[-2000:])
    check(p.returncode == 0 and "episodes ended" in p.stdout,
          f"docs/replay.md's example reads the dump (exit {p.returncode})")
    outs = glob.glob(os.path.join(work, "first-*.out"))
    check(len(outs) == 1, f"the Slurm job's output {outs}")
    job = re.search(r"first-(\d+)\.out", outs[0]).group(1)
    slurm_runs = [k for k in summaries if k.endswith("-" + job)]
    check(len(slurm_runs) == 1 and summaries[slurm_runs[0]]["stop_reason"] in ends,
          f"the Slurm job's run finished: {slurm_runs}")


def case_readme(args):
    text = open(os.path.join(args.repo, "README.md")).read()
    lines = text.count("\n")
    check(lines <= 150, f"README.md has {lines} lines (at most 150)")
    links = re.findall(r"\]\((docs/[^)#]+)(?:#[^)]*)?\)", text)
    missing = [l for l in links if not os.path.exists(os.path.join(args.repo, l))]
    check(len(links) >= 5 and not missing, f"README links {len(links)} docs pages, missing {missing}")
    for cmd in ("scripts/train.sh", "scripts/test.sh"):
        check(re.search(rf"^```sh\n{re.escape(cmd)}\n```", text, flags=re.M) is not None,
              f"README gives `{cmd}` as a command block of its own")
    ci = open(os.path.join(args.repo, ".ci", "run")).read()
    check("scripts/test.sh" in ci, ".ci/run runs the README's test command")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", required=True)
    ap.add_argument("--build", help="the build directory (default: REPO/build)")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--timeout", type=float, default=1500, help="getting_started: seconds before "
                    "the blocks are killed (a hang bound; every block normally ends by itself)")
    ap.add_argument("case")
    args = ap.parse_args()
    args.build = os.path.abspath(args.build or os.path.join(args.repo, "build"))
    os.makedirs(args.workdir, exist_ok=True)
    globals()["case_" + args.case](args)


if __name__ == "__main__":
    main()
