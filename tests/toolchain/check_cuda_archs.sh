#!/bin/sh
# The CUDA kernels are compiled for every architecture of TORCH_CUDA_ARCH_LIST: machine code
# (code=sm_XY) for each entry and PTX (code=compute_XY) for those marked +PTX, read from the
# compile command Ninja runs for kernels/cuda/scan_cuda.cu. (LibTorch's CMake replaces
# CMAKE_CUDA_ARCHITECTURES, which once made the project's own arch setting dead code and left
# sm_90 alone, without PTX: "no kernel image" on any other GPU.)
# usage: check_cuda_archs.sh NINJA BUILD_DIR "7.5;8.0;...;12.0+PTX"
set -eu
ninja=$1 build=$2 archs=$3
cmd=$("$ninja" -C "$build" -t commands mpirl_kernels | grep 'scan_cuda\.cu' | head -n 1)
[ -n "$cmd" ] || { echo "FAILED: no compile command for scan_cuda.cu"; exit 1; }
fail=0
for a in $(echo "$archs" | tr ';' ' '); do
  num=$(echo "${a%+PTX}" | tr -d '.')
  if echo "$cmd" | grep -q "code=sm_$num"; then echo "ok: machine code for sm_$num"
  else echo "FAILED: no code=sm_$num"; fail=1; fi
  case $a in *+PTX)
    if echo "$cmd" | grep -q "code=compute_$num"; then echo "ok: PTX for compute_$num"
    else echo "FAILED: no code=compute_$num (PTX)"; fail=1; fi ;;
  esac
done
n=$(echo "$cmd" | grep -o 'code=sm_[0-9]*' | sort -u | wc -l)
echo "the command has $n machine-code target(s)"
exit $fail
