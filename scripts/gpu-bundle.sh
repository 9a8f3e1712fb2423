#!/usr/bin/env bash
# Runs binaries built here on a GPU machine that has CUDA, torch and Open MPI but not mpirl's other
# dependencies and no network (the tool library's device machine: torch 2.11.0+cu130 in its own
# Python, Open MPI 4.1.x): the GPU check (bench/gpu_check.sh) then spends its minutes measuring.
#
#   here:   scripts/gpu-bundle.sh pack            # .gpu-bundle/ (git-ignored, about 40 MiB):
#             bin/        mpirl, bench_scan, bench_learner, tests/mpirl_gpu_tests (stripped)
#             lib/        the shared libraries they need that such a machine lacks (HDF5, Boost,
#                         spdlog, toml++, protobuf, ...; never glibc, libstdc++, Open MPI or CUDA's)
#             python.tar.xz  the Python mpirl embeds (libpython, its standard library, numpy,
#                         gymnasium, ale-py, minatar), unpacked at the path the binaries were built
#                         against, whose site-packages gets the machine's own torch and nvidia/
#   there:  scripts/gpu-bundle.sh unpack && source <(scripts/gpu-bundle.sh env)
#           bench/gpu_check.sh .gpu-bundle/bin
# A device call carries `.gpu-bundle` (the run tool's carry list).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bundle="$root/.gpu-bundle"
build="${MPIRL_BUILD_DIR:-$root/build}"
# Libraries never carried: the C/C++ runtime, and what the machine's Open MPI, CUDA and torch bring
# (carrying those would shadow the machine's own).
SKIP='^(libc\.|libm\.|libdl\.|libpthread\.|librt\.|libresolv|libutil\.|libcrypt\.|libnsl|libanl|ld-linux|libstdc\+\+|libgcc_s|libmpi|libopen-(pal|rte)|libhwloc|libevent|libpmix|libfabric|libucx|libuc[mpst]|libibverbs|librdmacm|libnl-|libpsm|libcuda\.|libnvidia|libtorch|libc10|libcudart|libnccl|libcublas|libcudnn|libnvrtc|libnvJit|libcupti|libcufft|libcurand|libcusparse|libcusolver|libnvToolsExt|libcufile|libnvshmem|libgomp|libpython|libz\.|libudev|libsystemd|libcap\.)'

pack() {
  local py_prefix
  py_prefix=$(python3 -c 'import sys; print(sys.prefix)')
  rm -rf "$bundle" && mkdir -p "$bundle/bin/tests" "$bundle/lib"
  local bins=("$build/mpirl" "$build/bench_scan" "$build/bench_learner")
  [ -x "$build/tests/mpirl_gpu_tests" ] && bins+=("$build/tests/mpirl_gpu_tests")
  for b in "${bins[@]}"; do
    [ -x "$b" ] || { echo "[gpu-bundle] no $b: build it first (cmake --build build --target ${b##*/})" >&2; exit 2; }
    local dst="$bundle/bin/${b#$build/}"
    strip -o "$dst" "$b"
    ldd "$b" | awk '/=> \// {print $3}' | while read -r lib; do
      local name=${lib##*/}
      [[ $name =~ $SKIP ]] && continue
      [[ $lib == */site-packages/* ]] && continue  # torch's own libraries: the machine's torch
      [ -e "$bundle/lib/$name" ] || cp -L "$lib" "$bundle/lib/$name"
    done
  done
  strip --strip-unneeded "$bundle"/lib/*.so* 2>/dev/null || true
  # The embedded Python: libpython, the standard library without tests and GUIs, and the packages
  # the Atari and MinAtar envs import.
  local sp="lib/python3.11/site-packages"
  local pkgs=(numpy numpy.libs ale_py gymnasium cloudpickle farama_notifications typing_extensions.py minatar)
  [ -d "$py_prefix/$sp/ale_py.libs" ] && pkgs+=(ale_py.libs)
  # Their metadata too: ale_py asks importlib.metadata for its own version at import.
  local meta
  for meta in "$py_prefix/$sp"/{numpy,ale_py,gymnasium,cloudpickle,farama_notifications,typing_extensions,MinAtar}-*.dist-info; do
    [ -d "$meta" ] && pkgs+=("${meta##*/}")
  done
  local stage
  stage=$(mktemp -d)
  (cd "$py_prefix" && tar -cf - --exclude='__pycache__' --exclude='site-packages' --exclude='test' --exclude='tests' \
     --exclude='idlelib' --exclude='tkinter' --exclude='turtledemo' --exclude='ensurepip' --exclude='lib2to3' \
     --exclude='config-3.11*' bin/python3 bin/python3.11 lib/libpython3.11.so* lib/python3.11) | tar -xf - -C "$stage"
  mkdir -p "$stage/$sp"
  (cd "$py_prefix/$sp" && tar -cf - --exclude='__pycache__' --exclude='tests' "${pkgs[@]}") | tar -xf - -C "$stage/$sp"
  tar -cJf "$bundle/python.tar.xz" -C "$stage" .
  rm -rf "$stage"
  echo "$py_prefix" >"$bundle/python_prefix"
  echo "[gpu-bundle] $(du -sh "$bundle" | cut -f1) in $bundle: $(ls "$bundle/bin" "$bundle/bin/tests" | grep -vc ':$') binaries, $(ls "$bundle/lib" | wc -l) libraries, python $(du -h "$bundle/python.tar.xz" | cut -f1)"
}

unpack() {
  [ -f "$bundle/python_prefix" ] || { echo "[gpu-bundle] no $bundle: run '$0 pack' here and carry .gpu-bundle" >&2; exit 2; }
  local prefix sp torch_dir
  prefix=$(cat "$bundle/python_prefix")
  sp="$prefix/lib/python3.11/site-packages"
  mkdir -p "$prefix"
  tar -xJf "$bundle/python.tar.xz" -C "$prefix"
  # The machine's torch (its C++ libraries are what the binaries link) and the nvidia/ wheels
  # beside it (cuDNN, cuBLAS, NCCL: torch's libraries find them relative to themselves).
  torch_dir=$(python3 -c 'import torch, os; print(os.path.dirname(torch.__file__))')
  ln -sfn "$torch_dir" "$sp/torch"
  [ -d "$(dirname "$torch_dir")/nvidia" ] && ln -sfn "$(dirname "$torch_dir")/nvidia" "$sp/nvidia"
  echo "[gpu-bundle] python at $prefix, torch from $torch_dir ($(python3 -c 'import torch; print(torch.__version__)'))"
  command -v mpirun >/dev/null || echo "[gpu-bundle] no mpirun on PATH: this machine needs Open MPI 4.1" >&2
}

print_env() {
  echo "export LD_LIBRARY_PATH=\"$bundle/lib:\${LD_LIBRARY_PATH:-}\""
  echo "export GPU_CHECK_PYTHON=\"$(cat "$bundle/python_prefix" 2>/dev/null)/bin/python3.11\""
  echo "export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"
}

case "${1:-}" in
  pack) pack ;;
  unpack) unpack ;;
  env) print_env ;;
  *) echo "usage: $0 pack | unpack | env" >&2; exit 2 ;;
esac
