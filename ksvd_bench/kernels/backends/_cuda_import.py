"""The one place that imports a Numba CUDA target.

Two packages provide one: ``numba-cuda`` (NVIDIA's CUDA target of Numba, pinned by the
``cuda`` extra, with a CUDA simulator) and its successor ``numba-cuda-mlir`` (module
``numba_cuda_mlir``; standalone, no simulator). :func:`import_cuda` takes ``numba-cuda``
when it imports, else ``numba-cuda-mlir`` when that is installed; the kernels keep to the
plain ``cuda.jit`` subset both accept (shared memory, local arrays, ``syncthreads``) and take
their types from the module returned (``cuda.types``), so either serves them.

``numba-cuda`` 0.30.4 registers an overload of ``numpy.row_stack`` unconditionally, and numpy
2.5 removed it: with numpy 2.5 its CUDA target fails with ``AttributeError``
(NVIDIA/numba-cuda#907, closed as won't-fix) when it loads its registries, which it does
lazily, at the first compile. So "importing" here means importing the module and loading its
target's registries (:func:`_initialise`): a broken install fails here, at once. Hence the
``numpy<2.5`` bound next to the pin in pyproject.toml, and hence every failure of an
installed package's import becomes a :class:`CudaUnavailableError` that names its cause,
never a traceback from deep inside it.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util

import numpy as np
from numba.core import config

__all__ = [
    "PIN",
    "NUMPY_BOUND",
    "PACKAGES",
    "CudaUnavailableError",
    "import_cuda",
    "load_cuda",
    "simulated",
]

#: the requirement of the ``cuda`` extra (pyproject.toml)
PIN = "numba-cuda==0.30.4"
#: the numpy bound that goes with :data:`PIN` (its import fails with numpy 2.5)
NUMPY_BOUND = "numpy<2.5"
#: ``(distribution, module holding cuda)``, in the order :func:`import_cuda` tries them
PACKAGES = (("numba-cuda", "numba.cuda"), ("numba-cuda-mlir", "numba_cuda_mlir.cuda"))
#: the module that tells whether each distribution is installed
_TOP = {"numba-cuda": "numba_cuda", "numba-cuda-mlir": "numba_cuda_mlir"}

_loaded = {}  # the first outcome of import_cuda: the module, or the error it raised


class CudaUnavailableError(RuntimeError):
    """``device="cuda"`` was asked for where a CUDA target of Numba or a GPU is unusable."""


def simulated():
    """True when Numba runs CUDA kernels on its CPU simulator (``NUMBA_ENABLE_CUDASIM=1``)."""
    return bool(config.ENABLE_CUDASIM)


def _installed(dist):
    return _installed_module(_TOP[dist])


def _version(dist):
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "(version unknown)"


def _failure(dist, exc):
    """Why ``dist`` failed to import, in one line, with the fix where it is known."""
    cause = " ".join(f"{type(exc).__name__}: {exc}".split())
    line = f"{dist} {_version(dist)} is installed but its import failed ({cause})"
    if dist == "numba-cuda" and isinstance(exc, AttributeError) and "row_stack" in str(exc):
        line += (
            f"; numba-cuda 0.30.4 does not support numpy >= 2.5 (numpy {np.__version__} "
            f"is installed): pip install '{NUMPY_BOUND}', as the cuda extra asks, or "
            f"install numba-cuda-mlir"
        )
    return line


def _initialise(dist):
    """Load the CUDA target's typing and lowering registries, which ``numba-cuda`` defers to
    the first compile (and where numpy 2.5 breaks 0.30.4); nothing for the others."""
    if dist != "numba-cuda" or not _installed_module("numba.cuda.descriptor"):
        return
    # numba-cuda: an optional dependency (ksvd-bench[cuda]), checked installed above
    from numba.cuda.descriptor import cuda_target

    cuda_target.typing_context.refresh()
    cuda_target.target_context.refresh()


def _installed_module(name):
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _import():
    sim = simulated()
    tried = []
    for dist, module in PACKAGES[:1] if sim else PACKAGES:
        if not _installed(dist):
            continue
        try:
            cuda = importlib.import_module(module)
            if not sim:
                _initialise(dist)
            return cuda
        except Exception as exc:  # noqa: BLE001 -- any failure inside the package: say so
            tried.append(_failure(dist, exc))
    if not tried:
        which = (
            "the simulator (NUMBA_ENABLE_CUDASIM=1) needs numba-cuda"
            if sim
            else "neither numba-cuda nor numba-cuda-mlir is installed"
        )
        raise ImportError(
            f"device='cuda' needs Numba's CUDA target, which is not installed "
            f"({which}): pip install 'ksvd-bench[cuda]' (it pins {PIN})"
        )
    raise CudaUnavailableError("device='cuda' is unavailable: " + "; ".join(tried))


def import_cuda():
    """The ``cuda`` module of a Numba CUDA target, imported without looking for a GPU.

    ``numba.cuda`` from ``numba-cuda``; where that is missing or its import fails,
    ``numba_cuda_mlir.cuda`` from ``numba-cuda-mlir`` (never under the simulator, which
    only ``numba-cuda`` has). Enough to compile kernels (:func:`load_cuda` also checks the
    device). The first outcome is kept: a later call returns the same module or raises the
    same error.

    Raises
    ------
    ImportError
        Neither package is installed (the message says how to install the extra).
    CudaUnavailableError
        A package is installed but its import fails, for whatever reason (the message names
        the package, its version and the exception, and the fix where one is known, such
        as numba-cuda 0.30.4 under numpy 2.5).
    """
    if "outcome" not in _loaded:
        try:
            _loaded["outcome"] = _import()
        except (ImportError, CudaUnavailableError) as exc:
            _loaded["outcome"] = exc
    outcome = _loaded["outcome"]
    if isinstance(outcome, Exception):
        raise type(outcome)(*outcome.args)
    return outcome


def load_cuda():
    """The ``cuda`` module (:func:`import_cuda`), with a usable GPU or the simulator.

    Raises
    ------
    ImportError, CudaUnavailableError
        As :func:`import_cuda`; also :class:`CudaUnavailableError` where the package
        imports but finds no usable GPU (no driver, or no device) and the simulator is off;
        the message carries the driver's reason.
    """
    cuda = import_cuda()
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
        f"device='cuda' found no usable GPU ({_package_of(cuda)} is installed): {reason}. Run "
        f"on a machine with an NVIDIA GPU and driver, use device='cpu', or set "
        f"NUMBA_ENABLE_CUDASIM=1 before Numba is imported to run the kernels on Numba's "
        f"CUDA simulator (slow; for tests)"
    )


def _package_of(cuda):
    dist = "numba-cuda-mlir" if cuda.__name__.startswith("numba_cuda_mlir") else "numba-cuda"
    return f"{dist} {_version(dist)}"
