#!/usr/bin/env bash
# Sets up, builds and runs every test: unit (gtest), MPI integration, bad-config, checkpoint/resume
# and replay-dump tests, the learning tests, and the Slurm tests (label slurm: they install and
# start a local Slurm with scripts/slurm-local.sh), and the cluster tests (label cluster: several
# nodes as namespaces on this machine, scripts/cluster-local.sh; needs root), and the documentation
# (label docs: the site built strictly by scripts/docs.sh, the getting-started page run as written).
# Tests run cores + 1 at a time, 3 on a 2-core machine (tests/CMakeLists.txt says which need two
# cores and which must run alone; MPIRL_TEST_JOBS=1 runs them one after the other). Extra
# arguments go to ctest (e.g. -L unit).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd "$root/build"
ctest --output-on-failure -j "${MPIRL_TEST_JOBS:-$(($(nproc) + 1))}" "$@"
