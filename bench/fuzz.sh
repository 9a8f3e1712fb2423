#!/usr/bin/env bash
# Runs one libFuzzer target (issue 33; a command, not a CI test: CI runs each target over its corpus
# and 2,000 more inputs in hardening.fuzz). Builds tests/hardening (clang, ASan + UBSan +
# libFuzzer) into build/hardening if needed, fuzzes from the seed corpus in the repo for SECONDS
# (or until RUNS executions), and then:
#   - a crash, leak, timeout or out-of-memory input is kept in tests/fuzz/regressions/TARGET/
#     (the sanitizer job replays every file there; fix the code, keep the input);
#   - with FUZZ_MERGE=1, the inputs that add coverage are merged into tests/fuzz/corpus/TARGET
#     (libFuzzer's -merge=1 keeps the smallest set that covers what the corpus and the new ones do).
# Prints the executions, their rate and the coverage libFuzzer reports.
# Usage: bench/fuzz.sh TARGET SECONDS [RUNS]   TARGET: envelope, config, tfrecord, checkpoint, dump, state, obs
# Environment: FUZZ_BUILD_DIR (default build/hardening), FUZZ_JOBS (parallel fuzzing processes,
# default 1), FUZZ_MERGE (default 0), FUZZ_SEED (default 0: a new one each run; the CTest fixes it,
# so CI replays the same inputs every time).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target=${1:?usage: bench/fuzz.sh TARGET SECONDS [RUNS]}
secs=${2:?usage: bench/fuzz.sh TARGET SECONDS [RUNS]}
runs=${3:--1}
build=${FUZZ_BUILD_DIR:-$root/build/hardening}
jobs=${FUZZ_JOBS:-1}
cxx=$(command -v clang++-14 || command -v clang++ || true)
[ -n "$cxx" ] || { echo "fuzz: no clang++ (scripts/setup.sh installs clang-14 and libclang-rt-14-dev)" >&2; exit 1; }
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root/tests/hardening" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_C_COMPILER="${cxx/clang++/clang}" -DCMAKE_BUILD_TYPE=Debug >/dev/null
fi
case $target in envelope | config | tfrecord | checkpoint | dump | state | obs) ;; *) echo "fuzz: unknown target $target" >&2; exit 2 ;; esac
corpus="$root/tests/fuzz/corpus/$target"
regress="$root/tests/fuzz/regressions/$target"
mkdir -p "$corpus" "$regress"
cmake --build "$build" --target "fuzz_$target" >/dev/null
if [ -z "$(ls -A "$corpus")" ]; then  # the seed corpus writer, only when there is no corpus (the repo ships one)
  cmake --build "$build" --target make_corpus >/dev/null
  "$build/make_corpus" "$root/tests/fuzz/corpus"
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export ASAN_OPTIONS=detect_leaks=1:strict_string_checks=1
# -malloc_limit_mb: an input that makes the code allocate more than this is a finding (ASan needs
# terabytes of address space, so RLIMIT_AS cannot bound it).
limit=1024
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export LSAN_OPTIONS=suppressions="$root/tests/hardening/lsan.supp":print_suppressions=0
echo "fuzz_$target: $secs s (runs ${runs/#-1/unbounded}), $jobs process(es), corpus $corpus ($(ls "$corpus" | wc -l) files)"
set +e
par=()
((jobs > 1)) && par=(-jobs="$jobs" -workers="$jobs")  # (each worker then logs to fuzz-N.log in the working directory)
"$build/fuzz_$target" -max_total_time="$secs" -runs="$runs" -seed="${FUZZ_SEED:-0}" "${par[@]}" \
  -malloc_limit_mb="$limit" -rss_limit_mb=2048 -max_len=65536 -timeout=10 -print_final_stats=1 -close_fd_mask=2 \
  -artifact_prefix="$regress/" "$work" "$corpus" "$regress" >"$work/log" 2>&1
rc=$?
set -e
if ((jobs > 1)); then cat fuzz-*.log >>"$work/log" 2>/dev/null; rm -f fuzz-*.log; fi
grep -E "^#[0-9]+.*(DONE|pulse)|stat::number_of_executed_units|stat::average_exec_per_sec|stat::peak_rss_mb|cov:" "$work/log" | tail -4
if ((rc != 0)); then
  grep -E "ERROR|SUMMARY|Test unit written|==[0-9]+==" "$work/log" | head -12
  echo "fuzz_$target: FINDING (exit $rc): the input is in $regress/ (replayed by hardening.fuzz)"
  exit 1
fi
if [ "${FUZZ_MERGE:-0}" = 1 ]; then
  merged=$(mktemp -d)
  "$build/fuzz_$target" -merge=1 -max_len=65536 -malloc_limit_mb="$limit" "$merged" "$corpus" "$work" >/dev/null 2>&1
  rm -rf "$corpus" && mv "$merged" "$corpus"
  echo "fuzz_$target: corpus merged to $(ls "$corpus" | wc -l) files ($(du -sh "$corpus" | cut -f1))"
fi
echo "fuzz_$target: no finding"
