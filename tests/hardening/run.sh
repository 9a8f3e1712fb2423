#!/usr/bin/env bash
# The sanitizer job (CTest: hardening.build, hardening.sanitizers, hardening.fuzz; issue 33).
# Builds tests/hardening with clang into BUILD_DIR (ccache shared with the main build), then runs,
# each able to fail the job:
#   - the unit tests of the byte readers (envelopes, consumers' checks, configs, checkpoint
#     markers, TFRecord, run files, compressed observations and rollouts) under AddressSanitizer +
#     UndefinedBehaviorSanitizer;
#   - an MPI program on 2 ranks under the same (buffers of sends in flight when a rank dies), and
#     the replay rank's real loop on 3 (tests/mpi/replay_rank.cpp: learner and actor played over
#     the wire; dumps and a checkpoint part on its I/O thread; then with compressed image rollouts);
#   - the emulated CUDA scan kernel and the replay's I/O thread (a dump while the buffer's owner
#     samples) under ThreadSanitizer;
#   - each libFuzzer target (bench/fuzz.sh) over its seed corpus (tests/fuzz/corpus/TARGET) and its
#     regression inputs (tests/fuzz/regressions/TARGET), then FUZZ_RUNS more inputs (a count, not a
#     time: the same work on any machine; default 2000).
# Usage: tests/hardening/run.sh BUILD_DIR [FUZZ_RUNS [PART]]
#   PART: all (the default), or one of the three CTest tests: build (hardening.build: configure
#   and build the tree, both cores), sanitizers (hardening.sanitizers: the unit tests, MPI
#   programs and TSan runs) or fuzz (hardening.fuzz: every fuzz target). The two runs keep one core
#   each, so CTest lets them share the machine with other tests; only the build takes both
#   (docs/installing.md, the test budget).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
usage="usage: tests/hardening/run.sh BUILD_DIR [FUZZ_RUNS [all|build|sanitizers|fuzz]]"
build=${1:?$usage}
runs=${2:-2000}
part=${3:-all}
case $part in all | build | sanitizers | fuzz) ;; *) echo "hardening: unknown part '$part' ($usage)" >&2; exit 2 ;; esac
cxx=$(command -v clang++-14 || command -v clang++ || true)
[ -n "$cxx" ] || { echo "hardening: no clang++ (scripts/setup.sh installs clang-14 and libclang-rt-14-dev)"; exit 1; }
export CCACHE_BASEDIR="$root"
fuzzers=(envelope config tfrecord checkpoint dump state obs)
if [ "$part" = all ] || [ "$part" = build ]; then
  if [ ! -f "$build/build.ninja" ]; then
    cmake -S "$root/tests/hardening" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_C_COMPILER="${cxx/clang++/clang}" -DCMAKE_BUILD_TYPE=Debug >/dev/null
  fi
  # Only what this script runs (make_corpus, the seed corpus writer, is bench/fuzz.sh's).
  cmake --build "$build" -j "${MPIRL_JOBS:-$(nproc)}" --target sanitized_tests asan_in_flight_buffers asan_replay_rank \
    tsan_emulated_scan tsan_io_job "${fuzzers[@]/#/fuzz_}"
  [ "$part" = build ] && { echo "hardening: the tree in $build is built"; exit 0; }
fi
[ -x "$build/fuzz_obs" ] || { echo "hardening: $build is not built (run this script with PART build first)" >&2; exit 1; }
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export LSAN_OPTIONS=suppressions="$root/tests/hardening/lsan.supp":print_suppressions=0
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if [ "$part" = all ] || [ "$part" = sanitizers ]; then
  echo "== unit tests under ASan + UBSan"
  "$build/sanitized_tests" --gtest_brief=1
  echo "== an MPI program under ASan + UBSan (2 ranks)"
  # Leaks not checked here: the program leaves in-flight buffers to MPI on purpose (what it tests),
  # and Open MPI's plugins keep theirs; a use after free or an overflow still fails it.
  ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 mpirun -n 2 --oversubscribe -x ASAN_OPTIONS -x UBSAN_OPTIONS \
    "$build/asan_in_flight_buffers"
  echo "== the replay rank's loop, I/O thread, dumps and a checkpoint part under ASan + UBSan (3 ranks)"
  rr=$(mktemp -d)
  ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 mpirun -n 3 --oversubscribe -x ASAN_OPTIONS -x UBSAN_OPTIONS \
    "$build/asan_replay_rank" "$rr"
  rm -rf "$rr"
  echo "== the same with frame-stacked images sent compressed (the replay decodes them in its loop)"
  rr=$(mktemp -d)
  ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 mpirun -n 3 --oversubscribe -x ASAN_OPTIONS -x UBSAN_OPTIONS \
    "$build/asan_replay_rank" "$rr" pixels
  rm -rf "$rr"
  # Two of its four dtypes (float32 and complex128: the real and the complex path; the threads
  # synchronise the same way for each), 66 CPU-s for all four on the AMD VM. The unit tests run
  # all four without TSan.
  tsan_filter='EmulatedScanKernel/0.*:EmulatedScanKernel/3.*:EmulatedScanKernel.*'
  picked=$("$build/tsan_emulated_scan" --gtest_list_tests --gtest_filter="$tsan_filter")
  grep -q 'TypeParam = float$' <<<"$picked" && grep -q 'TypeParam = .*Cx<double>$' <<<"$picked" &&
    grep -q '^EmulatedScanKernel\.$' <<<"$picked" ||
    { echo "hardening: the TSan filter no longer picks float32, complex128 and the launch mapping: $picked" >&2; exit 1; }
  echo "== the emulated CUDA scan kernel under TSan (float32, complex128)"
  TSAN_OPTIONS=halt_on_error=1 "$build/tsan_emulated_scan" --gtest_brief=1 --gtest_filter="$tsan_filter"
  echo "== the replay's I/O thread under TSan (a dump while the owner samples)"
  TSAN_OPTIONS=halt_on_error=1 "$build/tsan_io_job" --gtest_brief=1
fi
[ "$part" = sanitizers ] && { echo "hardening: every sanitizer run passed"; exit 0; }
for t in "${fuzzers[@]}"; do
  echo "== fuzz_$t: the seed corpus and the regression inputs, then $runs more inputs"
  FUZZ_BUILD_DIR="$build" FUZZ_SEED=1 "$root/bench/fuzz.sh" "$t" 600 "$runs"
done
echo "hardening: every sanitizer run and fuzz target passed"
