#!/usr/bin/env bash
# Installs everything mpirl needs on a fresh Debian 12 machine, idempotently: a second run only
# checks and returns in seconds. Debian packages via apt, LibTorch via the pinned torch wheel.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"

APT_PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config
  openmpi-bin libopenmpi-dev
  libhdf5-dev hdf5-tools libzstd-dev
  libboost-serialization-dev
  libtomlplusplus-dev libcli11-dev libspdlog-dev libfmt-dev nlohmann-json3-dev
  libgtest-dev libbenchmark-dev
  protobuf-compiler libprotobuf-dev
  ffmpeg
  clang-14 libclang-rt-14-dev lld
)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "[setup] installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi

PY=${PYTHON:-python3}
have_torch=$($PY - <<PYEOF 2>/dev/null || true
import torch
v = torch.__version__.split('+')[0]
cuda = (torch.version.cuda or '').split('.')[0]
print('ok' if v == '$TORCH_VERSION' and cuda in ('', '$TORCH_CUDA_MAJOR') else 'bad ' + torch.__version__)
PYEOF
)
# MPIRL_TORCH=cpu: the CPU-only torch wheel (about 200 MB instead of about 4 GB of CUDA wheels), from
# PyTorch's own index (download.pytorch.org must be reachable); mpirl then builds without its CUDA
# kernels and trains on the CPU. Default: PyPI's wheel, which carries CUDA $TORCH_CUDA_MAJOR.
if [ "$have_torch" != "ok" ]; then
  echo "[setup] installing torch==$TORCH_VERSION${MPIRL_TORCH:+ ($MPIRL_TORCH)} (found: ${have_torch:-none})"
  if [ "${MPIRL_TORCH:-}" = "cpu" ]; then
    $PY -m pip install -q "torch==$TORCH_VERSION" --index-url https://download.pytorch.org/whl/cpu
  else
    $PY -m pip install -q "torch==$TORCH_VERSION"
  fi
fi
for mod in numpy h5py matplotlib; do
  $PY -c "import $mod" 2>/dev/null || { echo "[setup] installing $mod"; $PY -m pip install -q "$mod"; }
done
# Python envs: mpirl embeds this interpreter (CMake finds its libpython and pybind11 from its pip).
# Versions are compared by distribution name (pip's), not by the module's own __version__.
for pin in "gymnasium:$GYMNASIUM_VERSION" "pybind11:$PYBIND11_VERSION" "ale-py:$ALE_PY_VERSION" \
           "envpool:$ENVPOOL_VERSION" "minatar:$MINATAR_VERSION" "popgym:$POPGYM_VERSION" \
           "tensorboard:$TENSORBOARD_VERSION" "pygame:$PYGAME_VERSION" "mujoco:$MUJOCO_VERSION" \
           "imageio:$IMAGEIO_VERSION"; do
  dist=${pin%%:*} want=${pin#*:}
  have=$($PY -c "import importlib.metadata as m; print(m.version('$dist'))" 2>/dev/null || true)
  if [ "$have" != "$want" ]; then
    echo "[setup] installing $dist==$want (found: ${have:-none})"
    $PY -m pip install -q "$dist==$want"
  fi
done
$PY -c "import sysconfig, os, sys; d = sysconfig.get_config_var('LIBDIR'); l = sysconfig.get_config_var('LDLIBRARY'); \
sys.exit(0 if os.path.exists(os.path.join(d, l)) and l.endswith('.so') else \
'[setup] $PY has no shared libpython ' + os.path.join(d, l) + ': mpirl embeds it (pyenv: PYTHON_CONFIGURE_OPTS=--enable-shared)')"
echo "[setup] ok: torch $($PY -c 'import torch; print(torch.__version__)'), $(mpirun --version | head -1), $(cmake --version | head -1), gymnasium $GYMNASIUM_VERSION, pybind11 $PYBIND11_VERSION, ale-py $ALE_PY_VERSION, envpool $ENVPOOL_VERSION, minatar $MINATAR_VERSION, popgym $POPGYM_VERSION, tensorboard $TENSORBOARD_VERSION, pygame $PYGAME_VERSION, mujoco $MUJOCO_VERSION, $(ffmpeg -version | head -1 | cut -d' ' -f1-3)"
