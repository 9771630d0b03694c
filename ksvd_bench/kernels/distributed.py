"""Kernel passes on a Dask cluster (the public name of :mod:`.backends.dask`).

``connect(address)`` gives a client; ``KernelSource.from_points(..., client=client)`` and
``kernel_source(A, ..., client=client)`` give a :class:`DistributedKernelSource`.
"""

from .backends.dask import (
    DistributedKernelSource,
    check_client,
    connect,
    kernel_tiles,
    row_blocks,
    svd_compressed,
)

__all__ = [
    "DistributedKernelSource",
    "connect",
    "check_client",
    "kernel_tiles",
    "svd_compressed",
    "row_blocks",
]
