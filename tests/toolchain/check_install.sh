#!/bin/sh
# `cmake --install BUILD --prefix PREFIX`, then mpirl found on PATH alone, run from another
# directory with a minimal environment: --version, `mpirl envs`, and a tiny training run under
# mpirun (the default config is embedded; no source tree needed).
# Usage: check_install.sh CMAKE BUILD_DIR PREFIX
set -eu
cmake=$1 build=$2 prefix=$3
rm -rf "$prefix"
"$cmake" --install "$build" --prefix "$prefix" >/dev/null
for f in bin/mpirl share/mpirl/python/mpirl_policy/__init__.py share/mpirl/configs/default.toml \
         share/mpirl/slurm/train.sbatch; do
  [ -e "$prefix/$f" ] || { echo "FAILED: $prefix/$f not installed"; exit 1; }
done
work=$(mktemp -d)
cd "$work"
export PATH="$prefix/bin:/usr/bin:/bin"
v=$(env -i PATH="$PATH" HOME="$work" mpirl --version)
echo "$v"
case $v in mpirl*) ;; *) echo "FAILED: mpirl --version"; exit 1 ;; esac
env -i PATH="$PATH" HOME="$work" mpirl envs | grep -q CartPole-v1 || { echo "FAILED: mpirl envs"; exit 1; }
env -i PATH="$PATH" HOME="$work" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  mpirun -n 4 --oversubscribe mpirl train --set run.total_env_steps=20000 --set run.name=installed >/dev/null
[ -f runs/installed/summary.json ] && [ -f runs/installed/model.pt ] || { echo "FAILED: no run from the installed mpirl"; exit 1; }
echo "ok: installed mpirl on PATH ran a job in $work"
rm -rf "$work" "$prefix"
