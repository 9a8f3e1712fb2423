#!/usr/bin/env bash
# Soak (issue 33; a command, not a CI test): a long Synthetic run with everything that writes files
# or holds resources switched on -- checkpoints every minute (keep 2), a replay dump every 2
# minutes, evaluation every 2 minutes (a child process each time), TensorBoard -- while a sampler
# records every rank's VmRSS and open file descriptors and the run directory's disk use every 10 s
# into soak.csv, then checks them and plots soak.png.
#
# Pass/fail, after a 10-minute warm-up (buffers fill, allocator pools settle):
#   - RSS: no rank's VmRSS rises above its value at 10 minutes by more than 5% + 16 MiB;
#   - fds: no rank holds more than 4 descriptors above its count at 10 minutes;
#   - disk: the run's state (checkpoints/, replay.h5, eval/) stays within 1.5x the most it took in
#     the first 10 minutes (prune keeps 2 checkpoints; a seal briefly holds a third); the logs that
#     grow by design (metrics.jsonl, eval.jsonl, TensorBoard events, *.log) are reported with their
#     growth rate, not bounded.
#
# Usage: bench/soak.sh HOURS [OUT_DIR=bench/out/soak] [extra --set overrides...]
# Environment: SOAK_RANKS (default 4: learner, replay, 2 actors), MPIRL_BUILD_DIR (default build/),
# SOAK_WARMUP_S (default 600; shorter only to try the command).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
hours=${1:?usage: bench/soak.sh HOURS [OUT_DIR] [--set ...]}
shift
out=bench/out/soak
if [ $# -gt 0 ] && [[ "$1" != --* ]]; then out=$1; shift; fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
bin="${MPIRL_BUILD_DIR:-$root/build}"
ranks=${SOAK_RANKS:-4}
secs=$(python3 -c "print(int(float('$hours') * 3600))")
name="soak-$(date +%Y%m%d-%H%M%S)"
run_dir="$out/$name"
csv="$out/soak.csv"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "soak: $hours h, $ranks ranks on $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)) -> $run_dir"

# 1 ms sleep-mode env steps keep the 2-core machine usable beside it; the learner still trains on
# every batch (a 7056-float observation: Atari-sized messages through the replay and the dumps).
mpirun -n "$ranks" --oversubscribe "$bin/mpirl" train \
  --set 'env.id="Synthetic"' --set env.obs_dim=7056 --set env.num_envs=8 --set env.step_cost_us=1000 \
  --set 'env.cost_mode="sleep"' --set actor.rollout_len=32 --set learner.batch_size=8 --set replay.capacity=128 \
  --set 'replay.selector="uniform"' --set replay.max_times_sampled=0 --set replay.samples_per_insert=2 \
  --set run.max_wall_seconds="$secs" --set run.total_env_steps=9000000000000000 --set run.out_dir="\"$out\"" --set run.name="\"$name\"" \
  --set run.checkpoint_interval_s=60 --set run.keep_checkpoints=2 \
  --set replay.dump_interval_s=120 --set eval.interval_s=120 --set eval.episodes=4 --set run.tensorboard=true \
  --set run.log_interval_s=60 "$@" >"$out/train.log" 2>&1 &
launcher=$!

echo "t_s,rank,role,pid,rss_kib,fds,state_bytes,log_bytes" >"$csv"
t0=$SECONDS
sample() {  # one row per rank: its VmRSS and open fds, and the run directory's disk use
  set +e +o pipefail  # files and processes come and go between listing and reading them
  local t=$((SECONDS - t0)) state=0 logs=0
  if [ -d "$run_dir" ]; then
    state=$(du -sb "$run_dir"/checkpoints "$run_dir"/replay.h5 "$run_dir"/eval 2>/dev/null | awk '{s += $1} END {print s + 0}')
    logs=$(du -sbc "$run_dir"/metrics.jsonl "$run_dir"/eval.jsonl "$run_dir"/*.log "$run_dir"/events.out.tfevents.* 2>/dev/null | tail -1 | cut -f1)
  fi
  for p in $(pgrep -f "$name" 2>/dev/null); do
    [ -r "/proc/$p/environ" ] || continue
    local rank role rss fds
    rank=$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')
    [ -n "$rank" ] || continue  # mpirun itself, the sampler's own pgrep
    role=rank
    tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q " eval " && role=eval
    rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$p/status" 2>/dev/null || echo 0)
    fds=$(ls "/proc/$p/fd" 2>/dev/null | wc -l)
    echo "$t,$rank,$role,$p,${rss:-0},$fds,${state:-0},${logs:-0}" >>"$csv"
  done
  set -e -o pipefail
}
while kill -0 "$launcher" 2>/dev/null; do
  sample
  sleep 10
done
wait "$launcher" && rc=0 || rc=$?
echo "soak: mpirun exited $rc after $((SECONDS - t0)) s; the run's last lines:"
tail -4 "$out/train.log"

python3 - "$csv" "$out/soak.png" "$rc" <<'PY'
import csv, os, sys
from collections import defaultdict
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["role"] == "rank"]
rc = int(sys.argv[3])
warm = int(os.environ.get("SOAK_WARMUP_S", "600"))  # a shorter one only to try the command
by_rank = defaultdict(list)
for r in rows:
    by_rank[int(r["rank"])].append((int(r["t_s"]), int(r["rss_kib"]), int(r["fds"])))
disk = sorted({(int(r["t_s"]), int(r["state_bytes"]), int(r["log_bytes"])) for r in rows})
fails = []
print(f"{'rank':>4} {'RSS@warm':>10} {'RSS max':>10} {'RSS end':>9} {'fds@warm':>8} {'fds max':>7} {'fds end':>7}  (MiB; after the warm-up)")
for rank, s in sorted(by_rank.items()):
    base = [x for x in s if x[0] >= warm]
    if not base:
        fails.append(f"rank {rank}: no sample after {warm} s (the run ended too soon)")
        continue
    rss0, fd0 = base[0][1], base[0][2]
    rss_max = max(x[1] for x in base); fd_max = max(x[2] for x in base)
    print(f"{rank:>4} {rss0 / 1024:>10.1f} {rss_max / 1024:>10.1f} {base[-1][1] / 1024:>9.1f} {fd0:>8} {fd_max:>7} {base[-1][2]:>7}")
    if rss_max > rss0 * 1.05 + 16 * 1024:
        fails.append(f"rank {rank}: VmRSS rose from {rss0 / 1024:.1f} MiB at {base[0][0]} s to {rss_max / 1024:.1f} MiB")
    if fd_max > fd0 + 4:
        fails.append(f"rank {rank}: open fds rose from {fd0} to {fd_max}")
first = [d for d in disk if d[0] < warm]
later = [d for d in disk if d[0] >= warm]
if first and later:
    cap = max(d[1] for d in first)
    hi = max(d[1] for d in later)
    span_h = max((later[-1][0] - later[0][0]) / 3600, 1e-9)
    print(f"disk: run state at most {cap / 2**20:.1f} MiB in the first 10 min, {hi / 2**20:.1f} MiB after "
          f"(end {later[-1][1] / 2**20:.1f}); logs {later[0][2] / 2**20:.2f} -> {later[-1][2] / 2**20:.2f} MiB "
          f"({(later[-1][2] - later[0][2]) / 2**20 / span_h:.2f} MiB/h)")
    if hi > 1.5 * cap:
        fails.append(f"disk: the run's state reached {hi / 2**20:.1f} MiB, over 1.5 x {cap / 2**20:.1f} MiB")
if rc != 0:
    fails.append(f"the run exited {rc}")
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(3, 1, figsize=(9, 8), sharex=True)
    for rank, s in sorted(by_rank.items()):
        ax[0].plot([x[0] / 60 for x in s], [x[1] / 1024 for x in s], label=f"rank {rank}")
        ax[1].plot([x[0] / 60 for x in s], [x[2] for x in s], label=f"rank {rank}")
    ax[2].plot([d[0] / 60 for d in disk], [d[1] / 2**20 for d in disk], label="state (checkpoints, replay.h5, eval/)")
    ax[2].plot([d[0] / 60 for d in disk], [d[2] / 2**20 for d in disk], label="logs (metrics, events, eval.jsonl)")
    ax[0].set_ylabel("VmRSS (MiB)"); ax[1].set_ylabel("open fds"); ax[2].set_ylabel("disk (MiB)")
    ax[2].set_xlabel("minutes")
    for a in ax:
        a.axvline(warm / 60, color="grey", lw=0.5); a.legend(fontsize=7)
    fig.suptitle("mpirl soak: " + sys.argv[1])
    fig.tight_layout(); fig.savefig(sys.argv[2], dpi=90)
    print(f"plot: {sys.argv[2]}")
except ImportError:
    print("plot: skipped (no matplotlib)")
for f in fails:
    print("FAIL:", f)
print("soak: " + ("FAILED" if fails else "passed"))
sys.exit(1 if fails else 0)
PY
