"""``StructuredKernelSource.compile_kernels``: the public warm-up the benchmarks call.

The parallel compiles of the structured products run only on large operators, so a solve
on a small graph leaves them uncompiled; ``compile_kernels`` compiles (or loads from Numba's
cache) both compiles of every product for the source's dtype, and leaves its answers as
they were.
"""

import numpy as np
import pytest

from ksvd_bench.datasets import make_directed_graph
from ksvd_bench.kernels import paper_gamma
from ksvd_bench.kernels.structured import StructuredKernelSource
from ksvd_bench.kernels.structured import _kernels as S

PRODUCTS = ("_spmv_lowrank", "_gram_lowrank", "_spmm_lowrank", "_project")


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_compile_kernels_compiles_both_compiles(dtype):
    A = make_directed_graph(300, random_state=0).adjacency
    src = StructuredKernelSource(A, "sne", gamma=paper_gamma(A, 1.0), center=True, dtype=dtype)
    X = np.random.default_rng(1).standard_normal((300, 3))
    before = src.matmat(X)
    assert src.compile_kernels() is src
    name = np.dtype(dtype).name
    for base in PRODUCTS:
        for kernel in (getattr(S, base), getattr(S, base + "_serial")):
            # compiled for arrays of the storage dtype (L, and the block operands)
            assert any(name in str(sig) for sig in kernel.signatures), (base, kernel)
    np.testing.assert_array_equal(src.matmat(X), before)
