#!/usr/bin/env bash
# The GPU machine (tool library: device) has nvcc, CMake, ninja and torch 2.11.0+cu130 but no Open
# MPI, HDF5, Boost or the small C++ libraries mpirl builds against, and no network. This script
# carries them there as Debian 12 packages:
#
#   here:   scripts/gpu-machine-deps.sh download   # .gpu-deps/debs/*.deb (about 25 MiB, git-ignored)
#   there:  scripts/gpu-machine-deps.sh build      # unpack into .gpu-deps/root, configure and build
#                                                  # build-gpu/ with the GPU tests registered
#           source <(scripts/gpu-machine-deps.sh env)   # PATH, LD_LIBRARY_PATH, OPAL_PREFIX for runs
#
# A device call then carries `.gpu-deps/debs` (the `run` tool's carry list) and runs e.g.
#   scripts/gpu-machine-deps.sh build && source <(scripts/gpu-machine-deps.sh env) &&
#   cd build-gpu && ctest -L gpu --output-on-failure && ctest -L unit
# The packages are Debian 12's; they need a glibc at least as new (the image's Ubuntu has one).
set -euo pipefail
root_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
deps="$root_dir/.gpu-deps"
debs="$deps/debs"
sysroot="$deps/root"

# What mpirl's CMakeLists finds (scripts/setup.sh's list, without the compilers and tools the
# image has), plus their library dependencies.
WANT=(openmpi-bin libopenmpi-dev libhdf5-dev libboost-serialization-dev libtomlplusplus-dev libcli11-dev
      libspdlog-dev libfmt-dev nlohmann-json3-dev libgtest-dev libbenchmark-dev libcurl4)
# Never carried: the toolchain, the C/C++ runtimes, Python and the base system (the image has its
# own), and what the -dev packages drag in without the build needing it.
SKIP='^(gcc|g\+\+|cpp|gfortran|flang|clang|llvm|libllvm|libclang|libmlir|libflang|binutils|libbinutils|libctf|libgprofng|lib[alt]san|libubsan|libhwasan|libitm|libquadmath|libgcc|libstdc|libc6|libc-dev|linux-libc-dev|libcrypt|perl|libperl|libicu|libssl|python3|libpython|libz3|zlib1g|libgfortran|libgomp|libatomic|libcc1|libisl|libmpc|libmpfr|libgmp|libjansson|libzstd|liblzma|libbz2|libselinux|libpcre|debconf|dpkg|tar|coreutils|libtinfo|libncurses|libedit|libbsd|libmd|libffi|libxml2|libexpat|libsqlite|libreadline|readline|libdb5|libgdbm|media-types|tzdata|libuuid|libudev|libsystemd|libcap|libgcrypt|libgpg|liblz4|libkrb|libk5crypto|libgssapi|libkeyutils|libcom-err|libidn|libunistring|libnettle|libhogweed|libtasn1|libp11|libgnutls|libnghttp|librtmp|libssh|libbrotli|libldap|libsasl|libpsl|netbase|sensible-utils|ucf|lsb-base|libaudit|libsemanage|libsepol|libpam|libnsl|libtirpc|libevent-openssl|libjs-|libdebuginfod|libelf|libdw|libdpkg|adduser|autoconf|automake|autotools-dev|catch2|cdebconf|debianutils|install-info|libcurl4-.*-dev|libcurl3-|nss-plugin|libnss3|libnspr4|passwd|openssh-client|m4|libnewt|libslang|libtextwrap|libdebian-installer|libjpeg|libx11|libxau|libxcb|libxdmcp|libxext|rpcsvc-proto|ocl-icd|libfido2|libcbor|libacl1|libhdf5-.*fortran|libhdf5-cpp|libhdf5-hl-cpp)'
LIMIT_MIB=56  # the device tool carries at most 64 MiB with the working tree

download() {
  command -v apt-get >/dev/null || { echo "download runs on the Debian 12 dev machine (apt-get)" >&2; exit 2; }
  mkdir -p "$debs"
  local pkgs
  pkgs=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces \
           --no-enhances "${WANT[@]}" | grep -v '^[ <]' | sort -u | grep -Ev "$SKIP")
  (cd "$debs" && rm -f ./*.deb && apt-get download -qq $pkgs)
  local mib
  mib=$(du -sm "$debs" | cut -f1)
  echo "[gpu-deps] $(ls "$debs" | wc -l) packages, ${mib} MiB in $debs"
  if ((mib > LIMIT_MIB)); then echo "[gpu-deps] more than ${LIMIT_MIB} MiB: the device tool would refuse it" >&2; exit 1; fi
}

unpack() {
  [ -d "$debs" ] && ls "$debs"/*.deb >/dev/null 2>&1 || { echo "no $debs/*.deb: run '$0 download' here and carry .gpu-deps/debs" >&2; exit 2; }
  if [ -f "$sysroot/.done" ] && [ "$sysroot/.done" -nt "$debs" ]; then return; fi
  rm -rf "$sysroot" && mkdir -p "$sysroot"
  for d in "$debs"/*.deb; do dpkg-deb -x "$d" "$sysroot" 2>/dev/null || (cd "$sysroot" && ar p "$d" data.tar.xz | tar xJ); done
  # Absolute links (Debian's /usr/lib/... targets) point into the unpacked tree instead.
  find "$sysroot" -type l | while read -r l; do
    t=$(readlink "$l")
    case "$t" in /*) ln -sfn "$sysroot$t" "$l" ;; esac
  done
  # What update-alternatives would have made: the Open MPI and HDF5 entry points.
  local bin="$sysroot/usr/bin" lib="$sysroot/usr/lib/x86_64-linux-gnu"
  for w in mpicc mpicxx mpic++ mpirun mpiexec; do
    [ -e "$bin/$w.openmpi" ] && ln -sfn "$w.openmpi" "$bin/$w"
  done
  [ -e "$bin/h5cc.serial" ] && ln -sfn h5cc.serial "$bin/h5cc"
  # HDF5's compiler wrappers (what CMake's FindHDF5 asks) have their prefix written in.
  for w in "$bin"/h5cc "$bin"/h5c++; do
    [ -f "$w" ] && sed -i "s|^prefix=\"/usr\"|prefix=\"$sysroot/usr\"|" "$(readlink -f "$w")"
  done
  [ -d "$lib/hdf5/serial" ] && for f in "$lib"/hdf5/serial/libhdf5*.so; do ln -sfn "hdf5/serial/$(basename "$f")" "$lib/$(basename "$f")"; done
  mkdir -p "$lib/pkgconfig"
  [ -e "$lib/pkgconfig/hdf5-serial.pc" ] && ln -sfn hdf5-serial.pc "$lib/pkgconfig/hdf5.pc"
  touch "$sysroot/.done"
  echo "[gpu-deps] unpacked $(ls "$debs" | wc -l) packages into $sysroot"
}

print_env() {
  local lib="$sysroot/usr/lib/x86_64-linux-gnu"
  echo "export PATH=\"$sysroot/usr/bin:\$PATH\""
  echo "export LD_LIBRARY_PATH=\"$lib:$lib/openmpi/lib:$lib/hdf5/serial:\${LD_LIBRARY_PATH:-}\""
  echo "export OPAL_PREFIX=\"$sysroot/usr\""  # Open MPI finds its components and help files here
  echo "export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"
}

configure() {
  unpack
  eval "$(print_env)"
  local lib="$sysroot/usr/lib/x86_64-linux-gnu"
  local py
  py=$(python3 -c 'import sys; print(sys.executable)')
  cmake -S "$root_dir" -B "$root_dir/build-gpu" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMPIRL_GPU_TESTS=ON \
    -DCMAKE_PREFIX_PATH="$sysroot/usr;$lib/cmake;$(python3 -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')" \
    -DPython3_EXECUTABLE="$py" \
    -DMPI_CXX_COMPILER="$sysroot/usr/bin/mpicxx.openmpi" -DMPIEXEC_EXECUTABLE="$sysroot/usr/bin/mpirun.openmpi" \
    -DHDF5_C_COMPILER_EXECUTABLE="$sysroot/usr/bin/h5cc" \
    -DBoost_ROOT="$sysroot/usr" -DCMAKE_INCLUDE_PATH="$sysroot/usr/include" -DCMAKE_LIBRARY_PATH="$lib"
}

build() {
  configure
  cmake --build "$root_dir/build-gpu" -j "$(nproc)" --target all benchmarks
}

case "${1:-}" in
  download) download ;;
  unpack) unpack ;;
  env) print_env ;;
  configure) configure ;;
  build) build ;;
  *) echo "usage: $0 download | unpack | env | configure | build" >&2; exit 2 ;;
esac
