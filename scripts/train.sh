#!/usr/bin/env bash
# Sets up, builds and runs the default training job (CartPole-v1, IMPALA, 1 learner + 1 replay +
# 2 actors). Extra arguments go to `mpirl train`, e.g. --set learner.algo=appo.
# MPIRL_RANKS sets the number of ranks (default 4).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
exec mpirun -n "${MPIRL_RANKS:-4}" --oversubscribe "$root/build/mpirl" train "$@"
