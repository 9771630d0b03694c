"""Fixed-order reductions and BLAS thread control shared by every kernel module.

Multithreaded BLAS rounds ``X @ Z.T``, ``v @ A`` and ``v @ v`` differently with each thread
count; these helpers sum in a fixed order (or hold BLAS to one thread around fixed-size
chunks), so results do not depend on the number of threads.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import prange

#: fastmath flags that never change a finite result. "reassoc", "contract", "arcp" and
#: "afn" let LLVM reorder sums, fuse a multiply into a later add or use reciprocals where
#: it sees fit, and it sees differently in each copy of a function: a callee is compiled
#: once on its own and once more inside each caller's module (inlined, other alias facts),
#: and which copy runs depends on what the process compiled or loaded from the cache. So
#: with them, a cold-cache run and a warm-cache run rounded some row sums differently.
EXACT_FASTMATH = {"nnan", "ninf", "nsz"}
_njit = numba.njit(fastmath=EXACT_FASTMATH, cache=True)
_pjit = numba.njit(parallel=True, fastmath=EXACT_FASTMATH, cache=True)


@_pjit
def dense_cross(X, Zt, chunk, out):
    """``out = X @ Zt`` by BLAS on fixed chunks of ``chunk`` rows, parallel over chunks.

    Multithreaded BLAS rounds ``X @ Z.T`` differently with each thread count; here every
    chunk is one single-threaded GEMM (the caller limits BLAS) whose size comes from the
    shape, so the result is the same for any number of BLAS or Numba threads.
    """
    n = X.shape[0]
    n_chunks = (n + chunk - 1) // chunk
    for c in prange(n_chunks):
        a = c * chunk
        b = min(a + chunk, n)
        np.dot(X[a:b], Zt, out[a:b])


@_njit
def ordered_sum_squares(v):
    """``v @ v`` summed serially in order (BLAS ddot splits long vectors over its threads)."""
    s = 0.0
    for i in range(v.shape[0]):
        s += v[i] * v[i]
    return s


@_njit
def ordered_dot(v, A):
    """``v @ A`` summed serially in row order (a fixed order, unlike BLAS gemv)."""
    out = np.zeros(A.shape[1])
    for i in range(A.shape[0]):
        for c in range(A.shape[1]):
            out[c] += v[i] * A[i, c]
    return out


@numba.njit(parallel=True, cache=True)  # no fastmath: it would fold isfinite to True
def count_nonfinite(A):
    """Number of non-finite entries of the 2-d array ``A`` (no temporary array)."""
    n = A.shape[0]
    bad = 0
    for i in prange(n):
        for v in A[i]:
            if not np.isfinite(v):
                bad += 1
    return bad


_BLAS = None


def one_blas_thread():
    """Context limiting BLAS to one thread (the Numba threads do the parallel work)."""
    global _BLAS
    if _BLAS is None:
        # Numba's np.dot calls SciPy's BLAS, which numpy alone does not load: import it
        # before threadpoolctl takes its inventory of BLAS libraries
        import scipy.linalg.cython_blas  # noqa: F401
        from threadpoolctl import ThreadpoolController

        _BLAS = ThreadpoolController()
    return _BLAS.limit(limits=1, user_api="blas")
