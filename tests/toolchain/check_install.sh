#!/bin/sh
# `cmake --install BUILD --prefix PREFIX`, then mpirl found on PATH alone, run from another
# directory with a minimal environment: --version, `mpirl envs`, and a tiny training run under
# mpirun (the default config is embedded; no source tree needed); and the scan operator loaded by
# plain Python from the install (share/mpirl/python/mpirl_ops finding lib/libmpirl_ops.so).
# Usage: check_install.sh CMAKE BUILD_DIR PREFIX PYTHON
set -eu
cmake=$1 build=$2 prefix=$3 python=$4
rm -rf "$prefix"
"$cmake" --install "$build" --prefix "$prefix" >/dev/null
for f in bin/mpirl share/mpirl/python/mpirl_policy/__init__.py share/mpirl/configs/default.toml \
         share/mpirl/slurm/train.sbatch lib/libmpirl_ops.so share/mpirl/python/mpirl_ops/__init__.py; do
  [ -e "$prefix/$f" ] || { echo "FAILED: $prefix/$f not installed"; exit 1; }
done
work=$(mktemp -d)
cd "$work"
lib=$(env -u MPIRL_OPS_LIBRARY -u MPIRL_BUILD_DIR "$python" -c "import sys; sys.path.insert(0, '$prefix/share/mpirl/python')
import torch, mpirl_ops
h = mpirl_ops.linear_scan(torch.full((3, 2), 0.5), torch.ones(3, 2))
assert h[:, 0].tolist() == [1.0, 1.5, 1.75], h
print(mpirl_ops.library_path())")
case $lib in "$prefix"/lib/libmpirl_ops.so) ;; *) echo "FAILED: mpirl_ops loaded '$lib', not the installed library"; exit 1 ;; esac
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
