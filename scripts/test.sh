#!/usr/bin/env bash
# Sets up, builds and runs every test but those labelled long (MPIRL_LONG_TESTS=1 adds them):
# unit (gtest), MPI integration, bad-config, checkpoint/resume
# and replay-dump tests, the learning tests, and the Slurm tests (label slurm: they install and
# start a local Slurm with scripts/slurm-local.sh), and the cluster tests (label cluster: several
# nodes as namespaces on this machine, scripts/cluster-local.sh; needs root), and the documentation
# (label docs: the site built strictly by scripts/docs.sh, the getting-started page run as written).
# Tests run cores + 1 at a time, 3 on a 2-core machine (tests/CMakeLists.txt says which need two
# cores and which must run alone; MPIRL_TEST_JOBS=1 runs them one after the other). Extra
# arguments go to ctest (e.g. -L unit).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# The three phases' seconds, printed last (also on failure): what CI's 35-minute budget went on.
phase=setup; declare -A took=()
started=$SECONDS
report() { took[$phase]=$((SECONDS - started)); echo "test.sh: setup ${took[setup]:-0} s, build ${took[build]:-0} s, ctest ${took[ctest]:-0} s"; }
trap report EXIT
next() { took[$phase]=$((SECONDS - started)); started=$SECONDS; phase=$1; }
"$root/scripts/setup.sh"
next build
"$root/scripts/build.sh" all   # not the benchmarks (CMakeLists.txt: no test runs them)
next ctest
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# ctest runs 3 tests on 2 cores, so every test shares its cores: idle OpenMP threads (LibTorch's,
# in mpirl's ranks, the gtest binaries and the Python tests) sleep at once instead of spinning on
# cores another test needs (docs/running.md: two runs at once went 2x faster each with this). A
# user's own OMP_WAIT_POLICY or GOMP_SPINCOUNT is kept; mpi.openmp_spin_waits clears both itself.
if [ -z "${OMP_WAIT_POLICY:-}" ] && [ -z "${GOMP_SPINCOUNT:-}" ]; then export OMP_WAIT_POLICY=PASSIVE; fi
cd "$root/build"
# Label long: learning claims over many millions of env steps (tests/CMakeLists.txt), run by
# MPIRL_LONG_TESTS=1 scripts/test.sh or ctest -L long; CI's 35 minutes leave them out.
# --no-tests=error: a selection of long tests alone (-R, -L) fails, rather than passing with none run.
skip_long=(-LE long); [ "${MPIRL_LONG_TESTS:-0}" = 1 ] && skip_long=()
ctest --output-on-failure --no-tests=error -j "${MPIRL_TEST_JOBS:-$(($(nproc) + 1))}" "${skip_long[@]}" "$@"
