"""Backends of the lazy kernel source: where its tile passes run.

``cpu`` (fused Numba tile passes, the reference), ``cuda`` (the same passes on one GPU;
``numba.cuda`` is imported from that module only, when ``device="cuda"`` is asked for) and
``dask`` (row-block tasks on a cluster, each running the cpu passes). The hooks a device
backend implements are described in :mod:`.base`. The source picks a backend; no backend
imports the source.
"""

from __future__ import annotations

__all__ = ["DEVICES", "check_device", "backend_class"]

DEVICES = ("cpu", "cuda")


def check_device(device):
    """``device`` if it names a backend ("cpu" or "cuda"), else a clear error."""
    if not isinstance(device, str) or device not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES}, got {device!r}")
    return device


def backend_class(device):
    """The backend class of ``device`` ("cpu" or "cuda"; cuda is imported only here)."""
    if check_device(device) == "cpu":
        from .cpu import CpuBackend

        return CpuBackend
    try:
        from .cuda import CudaBackend  # it raises a clear error without numba-cuda or a GPU
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.cuda":
            raise
        raise ImportError("device='cuda' needs the module ksvd_bench.kernels.backends.cuda, "
                          "which this installation lacks") from None
    return CudaBackend
