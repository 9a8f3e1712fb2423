"""mpirl's reset-aware linear scan for any PyTorch code: ``torch.ops.mpirl.linear_scan``.

    import torch, mpirl_ops
    h = mpirl_ops.linear_scan(a, b, h0=None, reverse=False)   # or torch.ops.mpirl.linear_scan(a, b, h0, reverse)

computes h_t = a_t * h_{t-1} + b_t over dim 0 of time-major [T, ...] tensors, with h_{-1} = h0 (zeros
when None); ``reverse`` runs h_t = a_t * h_{t+1} + b_t from the end (returns, V-trace). A reset at t
is a_t = 0, so one call covers sequences of any lengths packed end to end: no padding, no
splitting. float32, float64, complex64 and complex128, on CPU and (when mpirl was built with CUDA
kernels) CUDA. Gradients flow to a, b and h0 (the backward is itself a scan run the other way);
fake tensors have a Meta kernel, so ``torch.compile(fullgraph=True)`` takes it (tested).

The operator lives in mpirl's build (``libmpirl_ops.so``). Importing this package loads it unless
it is registered already (a second copy would abort the process). Where it looks, first match wins:
``$MPIRL_OPS_LIBRARY`` (the file), ``$MPIRL_BUILD_DIR``, the source tree's ``build/`` beside
``python/``, and an install prefix's ``lib/`` (``share/mpirl/python`` -> ``lib``).
"""
import os
from typing import List, Optional

import torch

__all__ = ["linear_scan", "library_path"]

_LIB = "libmpirl_ops.so"


def _candidates() -> List[str]:
    here = os.path.dirname(os.path.abspath(__file__))
    out = []
    if os.environ.get("MPIRL_OPS_LIBRARY"):
        out.append(os.environ["MPIRL_OPS_LIBRARY"])
    if os.environ.get("MPIRL_BUILD_DIR"):
        out.append(os.path.join(os.environ["MPIRL_BUILD_DIR"], _LIB))
    out.append(os.path.normpath(os.path.join(here, "..", "..", "build", _LIB)))          # source tree
    out.append(os.path.normpath(os.path.join(here, "..", "..", "..", "..", "lib", _LIB)))  # install prefix
    return out


def _registered() -> bool:
    try:
        torch.ops.mpirl.linear_scan
        return True
    except (AttributeError, RuntimeError):
        return False


def library_path() -> Optional[str]:
    """The library that was loaded, or None when the operator was registered already."""
    return _loaded


def _load() -> Optional[str]:
    if _registered():
        return None
    tried = _candidates()
    for path in tried:
        if os.path.isfile(path):
            # A second copy from another path would register the namespace again and abort.
            torch.ops.load_library(os.path.realpath(path))
            return path
    raise ImportError(f"mpirl_ops: {_LIB} not found; build it (scripts/build.sh mpirl_ops) or set "
                      f"MPIRL_OPS_LIBRARY to its path. Looked in: " + ", ".join(tried))


_loaded = _load()


def linear_scan(a: torch.Tensor, b: torch.Tensor, h0: Optional[torch.Tensor] = None,
                reverse: bool = False) -> torch.Tensor:
    """h_t = a_t * h_{t-1} + b_t over dim 0 (see the module's docstring)."""
    return torch.ops.mpirl.linear_scan(a, b, h0, reverse)
