"""Backends of the lazy kernel source: where its tile passes run.

``cpu`` (fused Numba tile passes, the reference), ``cuda`` (the same passes on one GPU;
``numba.cuda`` is imported from that module only, when ``device="cuda"`` is asked for) and
``dask`` (row-block tasks on a cluster, each running the cpu passes). The hooks a device
backend implements are described in :mod:`.base`. The source picks a backend; no backend
imports the source.

For benchmarks and tools: :func:`cuda_simulated` (is the CUDA backend on Numba's simulator?)
and :func:`cuda_kernel_resources` (every CUDA kernel compiled for a GPU architecture without
a GPU: registers, spills, shared memory); :class:`CudaUnavailableError` is the error of a
missing GPU or a broken CUDA target.
"""

from __future__ import annotations

from solvers import check_choice

from ._cuda_import import CudaUnavailableError, simulated  # numpy only: imports no CUDA target

__all__ = [
    "DEVICES",
    "check_device",
    "backend_class",
    "cuda_simulated",
    "cuda_kernel_resources",
    "CudaUnavailableError",
]

DEVICES = ("cpu", "cuda")


def check_device(device):
    """The backend ``device`` names ("cpu" or "cuda", any case), else a clear error."""
    return check_choice("device", device, DEVICES)


def backend_class(device):
    """The backend class of ``device`` ("cpu" or "cuda"; cuda is imported only here)."""
    if check_device(device) == "cpu":
        # start-up: the CPU kernels are compiled (or loaded from Numba's cache) on import
        from .cpu import CpuBackend

        return CpuBackend
    try:
        from .cuda import CudaBackend  # it raises a clear error without numba-cuda or a GPU
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.cuda":
            raise
        raise ImportError(
            "device='cuda' needs the module ksvd_bench.kernels.backends.cuda, "
            "which this installation lacks"
        ) from None
    return CudaBackend


def cuda_simulated():
    """True when ``device="cuda"`` runs on Numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``,
    read when Numba is first imported): its timings mean nothing."""
    return simulated()


def cuda_kernel_resources(arch="sm_90", *, kernel=None, dtype=None, cy=None):
    """Every kernel variant of the CUDA backend compiled for ``arch``, without a GPU.

    One dict per variant: ``name``, ``dtype``, ``cy`` (operand width, in units of the block's
    thread columns), ``ptx``, and from ``ptxas -v`` (or nvJitLink) ``registers``,
    ``spill_stores``, ``spill_loads`` (bytes), ``stack_bytes``, ``shared_bytes``,
    ``assembler`` and ``cubin`` (the machine code, bytes). ``kernel`` (e.g.
    ``"row_pass"``), ``dtype`` (``"float32"``, ``"float64"``) and ``cy`` keep only the
    variants they match (None: all; a ValueError where none does). Needs CUDA's NVVM and
    NVRTC libraries and ``ptxas`` or nvJitLink, not a GPU; raises
    :class:`CudaUnavailableError` naming what is missing.
    """
    # numba-cuda: an optional dependency (ksvd-bench[cuda]), loaded only here
    from ._cuda_ptx import kernel_resources

    return kernel_resources(arch, kernel=kernel, dtype=dtype, cy=cy)
