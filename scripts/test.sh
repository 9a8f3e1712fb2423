#!/usr/bin/env bash
# Sets up, builds and runs every test: unit (gtest), MPI integration, bad-config, checkpoint/resume
# and replay-dump tests, the learning tests, and the Slurm tests (label slurm: they install and
# start a local Slurm with scripts/slurm-local.sh), and the cluster tests (label cluster: several
# nodes as namespaces on this machine, scripts/cluster-local.sh; needs root), and the documentation
# (label docs: the site built strictly by scripts/docs.sh, the getting-started page run as written).
# Extra arguments go to ctest (e.g. -L unit).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd "$root/build"
ctest --output-on-failure "$@"
