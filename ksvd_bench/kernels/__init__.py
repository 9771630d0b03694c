"""Kernel builders for KSVD: dense kernel matrices, compatibility maps and lazy sources.

``kernel_matrix`` builds ``G_ij = k(x_i, z_j)`` between two point sets (Numba, parallel over
rows, sparse inputs kept sparse); ``compat_data`` maps the row and column data of a data
matrix ``A`` into one space (the paper's Algorithm 2; ``compat_maps`` also returns the map,
for new rows); ``ksvd_kernel`` returns the dense G of
``A`` and ``kernel_source`` a lazy matrix source of it for the solvers: a ``KernelSource``
(``KernelSource.from_points(X, Z, ...)``: the lazy G of two point sets), the structured
source of a sparse graph, or a source on a Dask cluster. A lazy source never
stores G: ``matmat``, ``rmatmat`` and ``sketch`` (both products from one pass) are fused tile
passes that compute each tile of G in cache and multiply it at once, on the backend that
``device`` names (``backends``: "cpu", "cuda"; ``kernel_source(..., client=)`` runs them on a
Dask cluster).
``StructuredKernelSource`` (package ``structured``) is loaded on first attribute access.
"""

from .compat import compat_data, compat_maps
from .matrix import center_matrix, kernel_matrix
from .params import COMPATS, EXP_KERNELS, KERNELS, paper_gamma, softmax_gamma
from .source import KernelSource, kernel_source, ksvd_kernel

__all__ = [
    "KERNELS",
    "EXP_KERNELS",
    "COMPATS",
    "paper_gamma",
    "softmax_gamma",
    "kernel_matrix",
    "center_matrix",
    "compat_data",
    "compat_maps",
    "ksvd_kernel",
    "kernel_source",
    "KernelSource",
]
# StructuredKernelSource is not in __all__: ``import *`` must work before structured.py exists


def __getattr__(name):
    # structured.py is optional at import time: load it only when asked for
    if name == "StructuredKernelSource":
        from .structured import StructuredKernelSource

        return StructuredKernelSource
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
