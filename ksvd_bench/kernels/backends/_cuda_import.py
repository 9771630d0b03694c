"""The one place that imports Numba's CUDA target.

The project pins ``numba-cuda`` (NVIDIA's CUDA target of Numba, the ``cuda`` extra). Its
successor, ``numba-cuda-mlir``, has no CUDA simulator, so the kernels keep to the plain
``cuda.jit`` subset both accept (shared memory, local arrays, ``syncthreads``); moving to
another CUDA package means changing :data:`PIN` and :func:`load_cuda` only.
"""

from __future__ import annotations

import importlib.util

__all__ = ["PIN", "CudaUnavailableError", "load_cuda", "simulated"]

#: the requirement of the ``cuda`` extra (pyproject.toml)
PIN = "numba-cuda==0.30.4"


class CudaUnavailableError(RuntimeError):
    """``device="cuda"`` was asked for where Numba's CUDA target or a GPU is missing."""


def simulated():
    """True when Numba runs CUDA kernels on its CPU simulator (``NUMBA_ENABLE_CUDASIM=1``)."""
    from numba.core import config

    return bool(config.ENABLE_CUDASIM)


def load_cuda():
    """``numba.cuda`` (from ``numba-cuda``), with a usable GPU or the simulator.

    Raises
    ------
    ImportError
        ``numba-cuda`` is not installed (the message says how to install the extra).
    CudaUnavailableError
        It is installed but finds no usable GPU (no driver, or no device), and the
        simulator is off; the message carries the driver's reason.
    """
    if importlib.util.find_spec("numba_cuda") is None:
        raise ImportError(
            f"device='cuda' needs Numba's CUDA target, which is not installed: "
            f"pip install 'ksvd-bench[cuda]' (it pins {PIN})"
        )
    from numba import cuda

    if simulated():
        return cuda
    reason = cuda.cuda_error()  # the driver's own words (library missing, no device, ...)
    if reason is None and len(cuda.gpus) == 0:
        reason = "the driver sees no CUDA device"
    if reason is None and cuda.is_available():
        return cuda
    reason = " ".join(str(reason or "NVVM, CUDA's compiler library, is unavailable").split())
    reason = reason.rstrip(".")
    raise CudaUnavailableError(
        f"device='cuda' found no usable GPU ({PIN} is installed): {reason}. Run on a "
        f"machine with an NVIDIA GPU and driver, use device='cpu', or set "
        f"NUMBA_ENABLE_CUDASIM=1 before Numba is imported to run the kernels on Numba's "
        f"CUDA simulator (slow; for tests)"
    )
