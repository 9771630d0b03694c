"""Exact KSVD in O(nnz) for a sparse square data matrix: the structured kernel operator.

For a sparse square ``A`` with row data ``x_i = A[i, :]`` and column data ``z_j = A[:, j]``,

    ``|x_i - z_j|^2 = r_i + c_j - 2 P_ij``,  ``r_i = |A[i, :]|^2``, ``c_j = |A[:, j]|^2``,
    ``P = A @ A`` (sparse),

so ``exp(-|x_i - z_j|^2 / gamma^2) = e^{-r_i/gamma^2} e^{-c_j/gamma^2} (1 + S_ij)`` with
``S_ij = expm1(2 P_ij / gamma^2)`` non-zero only on the pattern of ``P``. The RBF matrix is
``D_a (1 1^T + S) D_b`` and the SNE matrix ``D_rho^-1 (1 1^T + S) D_b`` (row sums ``rho``);
centring ``H_N G H_M`` adds rank-one terms. :class:`StructuredKernelSource` stores ``G`` exactly
as a sparse matrix plus a rank-``q`` term (``q = 1`` uncentred, ``3`` centred),

    ``G = T + L R^T``,  ``T`` with the pattern of ``P``,  ``L`` (N x q),  ``R`` (M x q),

and :func:`structured_svd` computes its exact top singular triplets after an exact compression
of the duplicated rows and columns of ``G`` (when it pays; otherwise on ``G`` itself). The
source offers it to ``solvers.tsvd`` as the optional protocol member
:meth:`StructuredKernelSource.exact_svd`, so ``solvers.svd(source, r, method="tsvd")`` takes
this path.
"""

from __future__ import annotations

import hashlib
import numbers
import time
import types

import numba
import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
from numba import prange
from scipy.sparse.linalg import LinearOperator, eigsh

from solvers import SVDResult  # solvers imports nothing from ksvd_bench: no cycle
from solvers._source import check_index

from ._numba import compile_twice
from ._params import EXP_KERNELS, check_gamma

__all__ = [
    "MAX_CONDITION",
    "StructureIllConditioned",
    "StructuredKernelSource",
    "structured_svd",
    "supports_structure",
]

#: Largest conditioning of the rank-one-plus-sparse form accepted by
#: :class:`StructuredKernelSource`: entries then carry at most about
#: ``MAX_CONDITION * eps ~ 2e-13`` rounding relative to their row's largest entry.
MAX_CONDITION = 1e3


class StructureIllConditioned(ValueError):
    """The sparse-plus-rank-one form of this kernel matrix would lose accuracy.

    Raised by :class:`StructuredKernelSource` when, for some row, the rank-one base
    ``a_i b_j`` exceeds the row's largest true entry by more than :data:`MAX_CONDITION`
    (or the SNE normaliser cancels by as much), which happens only when ``A @ A`` has
    negative entries. ``KernelSource(..., structured="auto")`` then falls back to the
    general lazy source. Attributes ``row`` (the worst row) and ``condition`` (its factor,
    possibly ``inf``).
    """

    def __init__(self, message, *, row, condition):
        super().__init__(message)
        self.row = row
        self.condition = condition

_NJIT = {"parallel": True, "fastmath": True, "cache": True}
#: multiply-adds below which kernels run on one thread (a few milliseconds of work: a
#: parallel launch on a loaded 2-core machine can cost as much)
_PARALLEL_WORK = 1 << 22


# ---------------------------------------------------------------------------------------------
# Numba kernels (prange over output rows, serial inner loops: thread-count independent)
# ---------------------------------------------------------------------------------------------


@numba.njit(**_NJIT)
def _row_min_distance(indptr, indices, pdata, r, c, small, big):
    """``delta_i = min_j |x_i - z_j|^2`` over all M columns in ``O(nnz(P_i) log nnz(P_i))``.

    Off the pattern of row ``i`` the distance is ``r_i + c_j``: its minimum is ``r_i`` plus
    the smallest ``c_j`` among the columns not in the pattern, found by walking ``small`` (the
    ``max_i nnz(P_i) + 1`` columns of smallest ``c``, ascending) until a column is missing
    from the row's sorted indices. ``big`` is a finite upper bound of every distance
    (fastmath assumes no infinities).
    """
    n = indptr.shape[0] - 1
    out = np.empty(n, dtype=np.float64)
    for i in prange(n):
        lo = indptr[i]
        hi = indptr[i + 1]
        best = big
        for k in range(small.shape[0]):
            j = small[k]
            a = lo
            b = hi
            while a < b:
                mid = (a + b) // 2
                if indices[mid] < j:
                    a = mid + 1
                else:
                    b = mid
            if a == hi or indices[a] != j:
                best = r[i] + c[j]
                break
        for p in range(lo, hi):
            d = max(r[i] + c[indices[p]] - 2.0 * pdata[p], 0.0)
            if d < best:
                best = d
        out[i] = best
    return out


@numba.njit(**_NJIT)
def _sparse_part(indptr, indices, pdata, r, c, c_min, t, sne, bsum, b, delta):
    """Entries of ``T`` (on the pattern of ``P``) and the row factor ``a`` of ``G = T + a b^T``.

    ``b_j = exp(-t (c_j - c_min)) <= 1`` is the column factor (as stored) and
    ``delta[i]`` the smallest distance of row ``i`` (:func:`_row_min_distance`). SNE rows are
    shifted by ``delta_i`` (log-sum-exp), so every entry of ``G`` is an exponential of a
    non-positive argument; the base ``a_i b_j`` is at most ``kappa_i`` times the row's
    largest entry, and the caller has checked ``kappa_i`` (no overflow). Also returns
    ``rho_i``, the amplification of rounding in the SNE normaliser computed as
    ``(off-pattern sum of b) = sum(b) - (on-pattern sum of b)`` (0 for RBF).
    """
    n = indptr.shape[0] - 1
    tdata = np.empty(pdata.shape[0], dtype=np.float64)
    a = np.empty(n, dtype=np.float64)
    rho = np.zeros(n, dtype=np.float64)
    for i in prange(n):
        lo = indptr[i]
        hi = indptr[i + 1]
        base = r[i] + c_min  # smallest off-pattern distance of row i (up to rank-one columns)
        if sne:
            shift = delta[i]
            on_b = 0.0
            on_g = 0.0
            for p in range(lo, hi):
                j = indices[p]
                on_b += b[j]
                d = max(r[i] + c[j] - 2.0 * pdata[p], 0.0)
                on_g += np.exp(-t * (d - shift))
            off = max(bsum - on_b, 0.0)
            s0 = np.exp(-t * (base - shift))  # kappa_i: the largest base entry / the row max
            # The term of the smallest distance is exp(0) = 1, so the true sum is >= 1; the
            # floor only removes rounding (and keeps the log finite when rho flags the row).
            z = max(s0 * off + on_g, 1.0)
            rho[i] = s0 * bsum / z
            logz = np.log(z)
        else:
            logz = 0.0
            shift = 0.0
        a[i] = np.exp(-t * (base - shift) - logz)
        for p in range(lo, hi):
            j = indices[p]
            x = 2.0 * t * pdata[p]
            if x > 0.0:
                # T = G_ij (1 - e^{-x}): G_ij <= 1 is formed directly, no overflow of expm1(x).
                d = max(r[i] + c[j] - 2.0 * pdata[p], 0.0)
                tdata[p] = np.exp(-t * (d - shift) - logz) * (-np.expm1(-x))
            else:
                # T = a_i b_j expm1(x) from the stored a_i, b_j, so that a_i b_j + T_ij =
                # a_i b_j e^x cancels only the final roundings (kappa_i eps), not the
                # t eps |x|^2 of separately rounded exponents.
                tdata[p] = (a[i] * b[j]) * np.expm1(x)
    return tdata, a, rho


def _spmm_lowrank_py(indptr, indices, data, X, L, W, out):
    """``out = T @ X + L @ W`` for CSR ``T`` (rows of ``out`` are independent)."""
    n = out.shape[0]
    k = out.shape[1]
    q = L.shape[1]
    for i in prange(n):
        for col in range(k):
            acc = 0.0
            for s in range(q):
                acc += L[i, s] * W[s, col]
            out[i, col] = acc
        for p in range(indptr[i], indptr[i + 1]):
            v = data[p]
            j = indices[p]
            for col in range(k):
                out[i, col] += v * X[j, col]


_spmm_lowrank, _spmm_lowrank_serial = compile_twice(_spmm_lowrank_py)


class _Threads:
    """Run Numba with one thread (and BLAS with one thread) when the work is small.

    A parallel launch costs more than a millisecond of work, and far more on a loaded
    machine; kernels parallelise over output rows only, so the bits do not change.
    """

    _controller = None

    def __init__(self, work=0, blas=False):
        self.serial = work < _PARALLEL_WORK
        self.blas = blas

    def __enter__(self):
        self._numba = numba.get_num_threads()
        if self.serial:
            numba.set_num_threads(1)
        if self.blas:
            if _Threads._controller is None:
                from threadpoolctl import ThreadpoolController

                _Threads._controller = ThreadpoolController()
            self._limit = _Threads._controller.limit(limits=1, user_api="blas")
        return self

    def __exit__(self, *exc):
        numba.set_num_threads(self._numba)
        if self.blas:
            self._limit.restore_original_limits()
        return False


#: fastmath without "reassoc". With it LLVM turns a sparse row's dot product into AVX-512
#: gathers, which are slower than scalar loads (2x on the AMD EPYC this was measured on);
#: without it every row is summed in storage order, by the serial and the parallel compile.
_FASTMATH_ORDERED = {"nnan", "ninf", "nsz", "arcp", "contract", "afn"}


def _compile_ordered(func):
    """``(parallel, serial)`` compiles of ``func`` with :data:`_FASTMATH_ORDERED`.

    As :func:`~ksvd_bench.kernels._numba.compile_twice` (a renamed twin, so that Numba's disk
    cache keeps the two apart) with the ordered fastmath flags.
    """
    twin = types.FunctionType(func.__code__, func.__globals__, func.__name__ + "_serial",
                              func.__defaults__, func.__closure__)
    twin.__qualname__ = func.__qualname__ + "_serial"
    twin.__doc__ = func.__doc__
    return (numba.njit(parallel=True, fastmath=_FASTMATH_ORDERED, cache=True)(func),
            numba.njit(fastmath=_FASTMATH_ORDERED, cache=True)(twin))


def _spmv_lowrank_py(indptr, indices, data, x, L, w, out):
    """One-vector ``out = T x + L w`` (``w = R^T x``): the inner loop of a Krylov solver.

    Each row is summed in storage order (sparse terms, then the ``q`` low-rank terms) into a
    float64 accumulator, so float32 storage gives float64 products and the bits do not depend
    on the number of threads.
    """
    q = L.shape[1]
    for i in prange(out.shape[0]):
        acc = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            acc += data[p] * x[indices[p]]
        for s in range(q):
            acc += L[i, s] * w[s]
        out[i] = acc


_spmv_lowrank, _spmv_lowrank_serial = _compile_ordered(_spmv_lowrank_py)


@numba.njit(fastmath=_FASTMATH_ORDERED, cache=True)
def _project_vector(R, x, w):
    """``w = R^T x``, one serial sum per entry (thread-count independent)."""
    for s in range(R.shape[1]):
        acc = 0.0
        for j in range(x.shape[0]):
            acc += R[j, s] * x[j]
        w[s] = acc


def _lowrank_matvec(parts, L, R, x, out):
    """``out = T x + L (R^T x)`` for one vector; big products use the parallel compile.

    The choice depends on the size of the operator only, and both compiles sum every entry in
    the same order, so the bits never depend on the number of threads.
    """
    w = np.empty(R.shape[1], dtype=np.float64)
    _project_vector(R, x, w)
    if parts[2].shape[0] + (L.shape[0] + R.shape[0]) * L.shape[1] >= _PARALLEL_WORK:
        _spmv_lowrank(parts[0], parts[1], parts[2], x, L, w, out)
    else:
        _spmv_lowrank_serial(parts[0], parts[1], parts[2], x, L, w, out)
    return out


def _gram_lowrank_py(a_parts, at_parts, L, R, x, u, w, z):
    """``z = A (A^T x)`` for ``A = T + L R^T`` (``a_parts``: T in CSR, ``at_parts``: T^T in
    CSR); ``u`` (A^T x) and ``w`` (q numbers) are workspace. One call per step of ARPACK on
    the Gram matrix: a Python call and its allocations cost as much as the products on
    small cores. Rows are summed in storage order, as in :func:`_spmv_lowrank_py`.
    """
    q = L.shape[1]
    for s in range(q):
        acc = 0.0
        for i in range(x.shape[0]):
            acc += L[i, s] * x[i]
        w[s] = acc
    indptr, indices, data = at_parts
    for j in prange(u.shape[0]):
        acc = 0.0
        for p in range(indptr[j], indptr[j + 1]):
            acc += data[p] * x[indices[p]]
        for s in range(q):
            acc += R[j, s] * w[s]
        u[j] = acc
    for s in range(q):
        acc = 0.0
        for j in range(u.shape[0]):
            acc += R[j, s] * u[j]
        w[s] = acc
    indptr, indices, data = a_parts
    for i in prange(z.shape[0]):
        acc = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            acc += data[p] * u[indices[p]]
        for s in range(q):
            acc += L[i, s] * w[s]
        z[i] = acc


_gram_lowrank, _gram_lowrank_serial = _compile_ordered(_gram_lowrank_py)


def _lowrank_product(parts, L, R, X, dtype):
    """``T @ X + L @ (R^T @ X)``; small products run serially (a parallel launch costs more
    than the work, and far more on a loaded machine). The path depends on the size of the
    product only, and every path sums each output entry in a fixed order, so the bits never
    depend on the number of threads."""
    out = np.empty((L.shape[0], X.shape[1]), dtype=dtype)
    if X.shape[1] == 1:  # Krylov solvers: one vector at a time
        col = np.empty(L.shape[0], dtype=np.float64) if dtype != np.float64 else out[:, 0]
        _lowrank_matvec(parts, L, R, np.ascontiguousarray(X[:, 0]), col)
        out[:, 0] = col
        return out
    W = np.empty((R.shape[1], X.shape[1]), dtype=dtype)
    work = X.shape[1] * (parts[2].shape[0] + (L.shape[0] + R.shape[0]) * L.shape[1])
    if work >= _PARALLEL_WORK:
        _project(R, X, W)
        _spmm_lowrank(parts[0], parts[1], parts[2], X, L, W, out)
    else:
        _project_serial(R, X, W)
        _spmm_lowrank_serial(parts[0], parts[1], parts[2], X, L, W, out)
    return out


def _project_py(R, X, W):
    """``W = R^T @ X`` with one serial sum per output entry (thread-count independent)."""
    q = R.shape[1]
    k = X.shape[1]
    m = X.shape[0]
    for e in prange(q * k):
        s = e // k
        col = e - s * k
        acc = 0.0
        for j in range(m):
            acc += R[j, s] * X[j, col]
        W[s, col] = acc


_project, _project_serial = compile_twice(_project_py)


@numba.njit(**_NJIT)
def _gather_rows(indptr, indices, data, L, R, ridx, out):
    """``out[k, :] = G[ridx[k], :]`` for ``G = T + L R^T`` (T in CSR)."""
    m = R.shape[0]
    q = R.shape[1]
    for k in prange(ridx.shape[0]):
        i = ridx[k]
        for j in range(m):
            acc = 0.0
            for s in range(q):
                acc += L[i, s] * R[j, s]
            out[k, j] = acc
        for p in range(indptr[i], indptr[i + 1]):
            out[k, indices[p]] += data[p]


@numba.njit(**_NJIT)
def _gather_block(indptr, indices, data, L, R, ridx, cidx, cstart, cpos, out):
    """``out = G[ridx][:, cidx]``; ``cpos[cstart[j]:cstart[j + 1]]`` lists where column j goes."""
    q = R.shape[1]
    for k in prange(ridx.shape[0]):
        i = ridx[k]
        for h in range(cidx.shape[0]):
            j = cidx[h]
            acc = 0.0
            for s in range(q):
                acc += L[i, s] * R[j, s]
            out[k, h] = acc
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            for e in range(cstart[j], cstart[j + 1]):
                out[k, cpos[e]] += data[p]


@numba.njit(fastmath=True, cache=True)
def _row_hashes(indptr, indices, data_bits, L_bits):
    """A 64-bit FNV-1a hash of each row's pattern, values and low-rank coefficients."""
    n = indptr.shape[0] - 1
    q = L_bits.shape[1]
    out = np.empty(n, dtype=np.uint64)
    prime = np.uint64(1099511628211)
    for i in range(n):
        h = np.uint64(14695981039346656037)
        for p in range(indptr[i], indptr[i + 1]):
            h = (h ^ np.uint64(indices[p])) * prime
            h = (h ^ np.uint64(data_bits[p])) * prime
        h = (h ^ np.uint64(indptr[i + 1] - indptr[i])) * prime
        for s in range(q):
            h = (h ^ np.uint64(L_bits[i, s])) * prime
        out[i] = h
    return out


@numba.njit(fastmath=True, cache=True)
def _rows_equal(indptr, indices, data, L, rows, reps, ok):
    """``ok[k]`` is True iff row ``rows[k]`` equals row ``reps[k]`` bit for bit."""
    q = L.shape[1]
    for k in range(rows.shape[0]):
        i = rows[k]
        j = reps[k]
        same = indptr[i + 1] - indptr[i] == indptr[j + 1] - indptr[j]
        if same:
            off = indptr[j] - indptr[i]
            for p in range(indptr[i], indptr[i + 1]):
                if indices[p] != indices[p + off] or data[p] != data[p + off]:
                    same = False
                    break
        if same:
            for s in range(q):
                if L[i, s] != L[j, s]:
                    same = False
                    break
        ok[k] = same


# ---------------------------------------------------------------------------------------------
# validation helpers
# ---------------------------------------------------------------------------------------------


def supports_structure(A, kernel, compat=None):
    """Whether :class:`StructuredKernelSource` applies: sparse square ``A``, SNE/RBF, no compat.

    Parameters
    ----------
    A : array-like or sparse matrix
    kernel : str
    compat : str or None, default=None
        The compatibility map; the structure needs the identity (``None``).

    Returns
    -------
    ok : bool
        Whether the structured form exists. Construction can still raise
        :class:`StructureIllConditioned` when ``A @ A`` has negative entries (signed data);
        for non-negative ``A`` it never does.
    """
    shape = getattr(A, "shape", None)
    return (
        sp.issparse(A)
        and shape is not None
        and len(shape) == 2
        and shape[0] == shape[1]
        and kernel in EXP_KERNELS
        and compat is None
    )


def _check_square_sparse(A):
    if isinstance(A, StructuredKernelSource):
        raise TypeError("A must be a data matrix, got a StructuredKernelSource")
    if sp.issparse(A):
        A = sp.csr_matrix(A, dtype=np.float64, copy=True)
    else:
        A = np.asarray(A)
        if A.ndim != 2:
            raise ValueError(f"A must be 2-d, got ndim={A.ndim}")
        if not (np.issubdtype(A.dtype, np.number) or A.dtype == bool):
            raise TypeError(f"A must be numeric, got dtype {A.dtype}")
        A = sp.csr_matrix(A.astype(np.float64))
    n, m = A.shape
    if n == 0 or m == 0:
        raise ValueError(f"A must be non-empty, got shape {A.shape}")
    if n != m:
        raise ValueError(
            f"A must be square (row data and column data in the same space, compat=None), "
            f"got shape {A.shape}"
        )
    A.sum_duplicates()
    if not np.all(np.isfinite(A.data)):
        raise ValueError("A contains NaN or Inf")
    A.eliminate_zeros()
    A.sort_indices()
    return A


def _check_dtype(dtype):
    try:
        dtype = np.dtype(dtype)
    except TypeError as exc:
        raise TypeError(f"dtype must be float32 or float64, got {dtype!r}") from exc
    if dtype not in (np.float32, np.float64):
        raise ValueError(f"dtype must be float32 or float64, got {dtype}")
    return dtype


def _index(idx, n, name):
    return np.ascontiguousarray(check_index(idx, n, name), dtype=np.int64)


def _dense_operand(X, n, name, dtype):
    X = np.asarray(X)
    vector = X.ndim == 1
    if vector:
        X = X[:, None]
    if X.ndim != 2 or X.shape[0] != n:
        raise ValueError(f"{name} must have shape ({n},) or ({n}, k), got {np.shape(X)}")
    return np.ascontiguousarray(X, dtype=dtype), vector


# ---------------------------------------------------------------------------------------------
# the matrix source
# ---------------------------------------------------------------------------------------------


class StructuredKernelSource:
    """Exact SNE/RBF kernel matrix of a sparse square ``A`` as sparse plus rank-few.

    ``G_ij = k(x_i, z_j)`` with ``x_i = A[i, :]``, ``z_j = A[:, j]`` (the square case of
    ``ksvd_kernel(A, kernel, gamma=gamma, compat=None, center=center)``), stored as
    ``G = T + L R^T`` with ``T`` on the pattern of ``A @ A``. Implements the solvers' matrix
    source protocol without ever forming ``G``.

    Parameters
    ----------
    A : sparse matrix or array-like of shape (N, N)
        Data matrix; finite. Dense input is converted to CSR.
    kernel : {"sne", "rbf"}, default="sne"
        ``"rbf"``: ``exp(-|x - z|^2 / gamma^2)``; ``"sne"``: the same normalised to sum 1 over
        the columns of each row.
    gamma : float
        Bandwidth, finite and > 0 (keyword-only, required; the paper's rule is
        ``ksvd_bench.kernels.paper_gamma(A, factor)``).
    center : bool, default=True
        Return ``H_N G H_M`` (zero row and column means).
    dtype : {float64, float32}, default=float64
        Storage and product dtype. Construction is always in float64.

    Attributes
    ----------
    shape : tuple of int
    dtype : numpy.dtype
    kernel : str
    gamma : float
    center : bool
    compat : None
        Always None (the structure needs row and column data in the same space).
    nnz : int
        Stored entries of the sparse part ``T`` (at most ``nnz(A @ A)``).
    n_entries : int
        Entries of G returned by ``rows``, ``cols`` and ``block`` so far.
    n_matmat : int
        Number of ``matmat`` plus ``rmatmat`` calls so far.
    rank_one_terms : int
        Columns ``q`` of the low-rank factors (1, or 3 when centred).
    cache_key : str
        sha256 of the class, parameters and ``A``: equal keys mean equal matrices.
    build_seconds : float
        Wall time of the construction.
    condition : float
        ``max_i max(kappa_i, rho_i)`` (see Notes), at most :data:`MAX_CONDITION`.

    Raises
    ------
    StructureIllConditioned
        When ``condition`` would exceed :data:`MAX_CONDITION` (only possible when ``A @ A``
        has negative entries); use ``KernelSource(A, ..., structured=False)`` instead.

    Notes
    -----
    *Stability.* With ``t = 1 / gamma^2``: ``b_j = exp(-t (c_j - min c)) <= 1``, RBF
    ``a_i = exp(-t (r_i + min c)) <= 1``, SNE rows shifted by their smallest distance
    ``delta_i`` (log-sum-exp) so that ``a_i = exp(-t (r_i + min c - delta_i)) / Z_i <= kappa_i``
    (below). On the pattern, ``T_ij = G_ij (1 - e^{-2 t P_ij})`` for ``P_ij > 0`` (``G_ij``
    formed directly, never ``expm1(2 t P_ij)``, which overflows for small gamma) and
    ``a_i b_j expm1(2 t P_ij)`` from the stored ``a_i``, ``b_j`` for ``P_ij < 0``. Each entry
    therefore carries a rounding error of a few ulps (times ``kappa_i``, at most
    :data:`MAX_CONDITION`, of the storage dtype) of the row's largest entry for every gamma;
    entries below the smallest float relative to it flush to zero, as in the dense
    computation.

    *Conditioning.* Off the pattern of ``P`` the entries of ``G`` are exactly the base
    ``a_i b_j``; on it, ``P_ij < 0`` makes the distance larger than the base's
    ``r_i + c_j``, so ``G_ij = a_i b_j + T_ij`` cancels. With ``delta_i`` the row's smallest
    distance, ``kappa_i = max_j a_i b_j / max_j G_ij = exp((delta_i - r_i - min c) /
    gamma^2)`` bounds that cancellation, and for SNE ``rho_i`` (the sum of the row's base
    divided by its normaliser) bounds the one in the normaliser's off-pattern sum
    ``sum(b) - sum_pattern(b)``. Entries carry about ``max(kappa_i, rho_i) * eps`` rounding
    relative to the row's largest entry; both are computed in the log domain in
    ``O(nnz(P) log + N + M)`` and construction raises :class:`StructureIllConditioned`
    above :data:`MAX_CONDITION`. For ``P >= 0`` (non-negative ``A``) both are <= 1. The base
    cannot be rescaled out of the problem: it must equal ``G`` on every off-pattern entry,
    which fixes the rank-one term (up to a per-row factor that leaves ``kappa_i`` unchanged).

    *Cost.* Construction ``O(nnz(A) + nnz(A @ A) + N)`` time and memory (one sparse product
    by scipy, then Numba); ``matmat``/``rmatmat`` with ``k`` columns ``O(k (nnz(T) + q N))``;
    ``rows``/``cols`` ``O(len(idx) (N q) + nnz)``. Nothing of size N x N is allocated
    except by :meth:`dense`.

    Products do not check their input for NaN/Inf (they sit in the inner loop of iterative
    solvers); ``A`` is checked once.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> A = sp.random(50, 50, density=0.05, random_state=0, format="csr")
    >>> G = StructuredKernelSource(A, "sne", gamma=0.5)
    >>> G.shape
    (50, 50)
    >>> res = structured_svd(G, 5)
    >>> res.s.shape
    (5,)
    """

    def __init__(self, A, kernel="sne", *, gamma, center=True, dtype=np.float64):
        t0 = time.perf_counter()
        if kernel not in EXP_KERNELS:
            raise ValueError(
                f"kernel must be one of {EXP_KERNELS} for the structured source, got {kernel!r}"
            )
        if gamma is None:
            raise TypeError(
                "gamma is required (use ksvd_bench.kernels.paper_gamma(A, factor) for the "
                "paper's rule)"
            )
        gamma = check_gamma(gamma)
        if not isinstance(center, (bool, np.bool_)):
            raise TypeError(f"center must be a bool, got {type(center).__name__}")
        self.dtype = _check_dtype(dtype)
        A = _check_square_sparse(A)
        self.kernel = kernel
        self.gamma = gamma
        self.center = bool(center)
        self.compat = None
        self.n_entries = 0
        self.n_matmat = 0
        n, m = A.shape
        self.shape = (int(n), int(m))
        self._A = A  # kept (O(nnz)) for the lazily computed cache_key
        self._cache_key = None

        t = 1.0 / gamma**2
        sq = A.data * A.data
        r = np.bincount(np.repeat(np.arange(n), np.diff(A.indptr)), weights=sq, minlength=n)
        c = np.bincount(A.indices, weights=sq, minlength=m).astype(np.float64)
        P = (A @ A).tocsr()
        P.sum_duplicates()
        P.eliminate_zeros()
        P.sort_indices()
        c_min = float(c.min())
        b = np.exp(-t * (c - c_min))
        # Conditioning, part 1: kappa_i = max_j a_i b_j / max_j G_ij = e^{t (delta_i - r_i -
        # c_min)}, delta_i the row's smallest distance. It is <= 1 when P >= 0; with P_ij < 0
        # the base exceeds G_ij and T_ij cancels it.
        counts = np.diff(P.indptr)
        k = min(m, int(counts.max(initial=0)) + 1)
        small = np.argpartition(c, k - 1)[:k] if k < m else np.arange(m)
        small = np.ascontiguousarray(small[np.argsort(c[small], kind="stable")], dtype=np.int64)
        big = float(r.max() + c.max()) + 1.0
        with _Threads(work=4 * P.nnz + n):
            delta = _row_min_distance(P.indptr, P.indices, P.data, r, c, small, big)
        log_kappa = t * (delta - r - c_min)
        self._check_condition(log_kappa, "the rank-one base exceeds the row's largest entry")
        with _Threads(work=4 * P.nnz):
            tdata, a, rho = _sparse_part(
                P.indptr, P.indices, P.data, r, c, c_min, t, kernel == "sne", float(b.sum()), b,
                delta,
            )
        # Conditioning, part 2 (SNE): cancellation in the row normaliser.
        cond = np.maximum(np.exp(log_kappa), rho)
        self._check_condition(np.log(np.maximum(cond, np.finfo(np.float64).tiny)),
                              "the SNE normaliser's off-pattern sum cancels")
        self.condition = float(cond.max())
        T = sp.csr_matrix((tdata, P.indices, P.indptr), shape=self.shape)
        # Entries that underflowed are exactly zero; dropping them keeps rows compressible.
        T.eliminate_zeros()

        if self.center:
            # H (a b^T + T) H = (Ha)(Hb)^T + T - 1 tau_c^T - (tau_r - mean(T)) 1^T.
            tau_r = np.asarray(T.sum(axis=1)).ravel() / m
            tau_c = np.asarray(T.sum(axis=0)).ravel() / n
            tau = float(tau_r.sum()) / n
            L = np.column_stack([a - a.mean(), np.ones(n), tau_r - tau])
            R = np.column_stack([b - b.mean(), -tau_c, -np.ones(m)])
        else:
            L = a[:, None]
            R = b[:, None]
        self._set_parts(T, L, R)
        self.build_seconds = time.perf_counter() - t0

    def _check_condition(self, log_cond, what):
        worst = int(np.argmax(log_cond))
        if log_cond[worst] <= np.log(MAX_CONDITION):
            return
        with np.errstate(over="ignore"):
            cond = float(np.exp(log_cond[worst]))
        raise StructureIllConditioned(
            f"the sparse-plus-rank-one form of this {self.kernel!r} kernel (gamma="
            f"{self.gamma:.6g}) is ill-conditioned: in row {worst} {what} by a factor "
            f"{cond:.3g} > MAX_CONDITION = "
            f"{MAX_CONDITION:g} (A @ A has negative entries, so distances on its pattern "
            f"exceed the base's), and the sparse correction would cancel it, losing about "
            f"{cond * np.finfo(np.float64).eps:.1g} relative to the row's largest entry "
            f"(or overflowing). Use the general lazy source: "
            f"KernelSource(A, ..., structured=False), or ksvd_kernel for the dense matrix.",
            row=worst, condition=cond,
        )

    def _set_parts(self, T, L, R):
        dt = self.dtype
        T = T.astype(dt)
        Tt = T.T.tocsr()  # CSR of T^T (= CSC of T) for rmatmat and cols
        self._T = (T.indptr.astype(np.int64), T.indices.astype(np.int64), T.data)
        self._Tt = (Tt.indptr.astype(np.int64), Tt.indices.astype(np.int64), Tt.data)
        self._L = np.ascontiguousarray(L, dtype=dt)
        self._R = np.ascontiguousarray(R, dtype=dt)
        self.nnz = int(T.nnz)
        self.rank_one_terms = int(self._L.shape[1])

    @property
    def cache_key(self):
        """sha256 of the class, the parameters and ``A`` (computed on first access)."""
        if self._cache_key is None:
            self._cache_key = self._hash(self._A)
        return self._cache_key

    def _hash(self, A):
        h = hashlib.sha256()
        h.update(
            f"StructuredKernelSource|{self.kernel}|{self.gamma!r}|{self.center}|"
            f"{self.dtype.str}|{A.shape}|".encode()
        )
        for part in (A.indptr.astype(np.int64), A.indices.astype(np.int64), A.data):
            h.update(np.ascontiguousarray(part).tobytes())
        return h.hexdigest()

    def __repr__(self):
        return (
            f"StructuredKernelSource(shape={self.shape}, kernel={self.kernel!r}, "
            f"gamma={self.gamma:.6g}, center={self.center}, nnz={self.nnz}, "
            f"dtype={self.dtype})"
        )

    # -- parts ------------------------------------------------------------------------------
    @property
    def sparse_part(self):
        """The sparse term ``T`` as a scipy CSR matrix (a view on the stored arrays)."""
        indptr, indices, data = self._T
        return sp.csr_matrix((data, indices, indptr), shape=self.shape, copy=False)

    @property
    def low_rank_factors(self):
        """``(L, R)`` with ``G = T + L @ R.T`` (read-only views)."""
        L = self._L.view()
        R = self._R.view()
        L.flags.writeable = False
        R.flags.writeable = False
        return L, R

    # -- protocol ---------------------------------------------------------------------------
    def _apply(self, parts, L, R, X, n_in, name):
        X, vector = _dense_operand(X, n_in, name, self.dtype)
        out = _lowrank_product(parts, L, R, X, self.dtype)
        self.n_matmat += 1
        return out[:, 0] if vector else out

    def matmat(self, X):
        """``G @ X`` for ``X`` of shape (M, k) (or (M,)); ``O(k (nnz + q (N + M)))``."""
        return self._apply(self._T, self._L, self._R, X, self.shape[1], "X")

    def rmatmat(self, Y):
        """``G.T @ Y`` for ``Y`` of shape (N, k) (or (N,))."""
        return self._apply(self._Tt, self._R, self._L, Y, self.shape[0], "Y")

    def matvec(self, x):
        """``G @ x`` for a vector ``x`` of length M."""
        return self.matmat(np.asarray(x).reshape(-1))

    def rmatvec(self, y):
        """``G.T @ y`` for a vector ``y`` of length N."""
        return self.rmatmat(np.asarray(y).reshape(-1))

    def _gather(self, parts, L, R, idx, axis, name):
        """Rows ``idx`` of ``T + L R^T`` (of ``G`` for ``axis=0``, of ``G^T`` for ``axis=1``)."""
        idx = _index(idx, self.shape[axis], name)
        out = np.empty((idx.size, self.shape[1 - axis]), dtype=self.dtype)
        with _Threads(work=out.size * (self.rank_one_terms + 1)):
            _gather_rows(*parts, L, R, idx, out)
        self.n_entries += out.size
        return out

    def rows(self, idx):
        """``G[idx, :]`` as a dense ``(len(idx), M)`` array (exact)."""
        return self._gather(self._T, self._L, self._R, idx, 0, "row indices")

    def cols(self, idx):
        """``G[:, idx]`` as a dense ``(N, len(idx))`` array (exact)."""
        return np.ascontiguousarray(
            self._gather(self._Tt, self._R, self._L, idx, 1, "column indices").T
        )

    def block(self, ridx, cidx):
        """``G[np.ix_(ridx, cidx)]`` as a dense array (exact; repeated indices allowed)."""
        ridx = _index(ridx, self.shape[0], "row indices")
        cidx = _index(cidx, self.shape[1], "column indices")
        m = self.shape[1]
        cpos = np.argsort(cidx, kind="stable").astype(np.int64)
        cstart = np.zeros(m + 1, dtype=np.int64)
        np.cumsum(np.bincount(cidx, minlength=m), out=cstart[1:])
        out = np.empty((ridx.size, cidx.size), dtype=self.dtype)
        with _Threads(work=out.size * (self.rank_one_terms + 1)):
            _gather_block(*self._T, self._L, self._R, ridx, cidx, cstart, cpos, out)
        self.n_entries += out.size
        return out

    def dense(self):
        """The full ``G`` (allocates N x M; for tests and small problems)."""
        return self.rows(np.arange(self.shape[0]))

    def todense(self):
        """Alias of :meth:`dense`."""
        return self.dense()

    def norm_bound(self):
        """Upper bound on ``||G||_2``: the Frobenius norm of ``G = T + L R^T`` (cached).

        The optional protocol member the Nyström solvers check their answers against.
        ``||G||_F^2 = ||T||_F^2 + 2 sum_k L_k^T T R_k + sum((L^T L) * (R^T R))``, in
        ``O(q nnz + N q^2)``; a slack covers the rounding of that sum (and of the entries
        ``rows``/``cols`` return), and the triangle bound ``||T||_F + ||L R^T||_F`` caps it.
        """
        bound = getattr(self, "_norm_bound", None)
        if bound is None:
            T = self.sparse_part.astype(np.float64)
            L = self._L.astype(np.float64)
            R = self._R.astype(np.float64)
            sparse2 = float(T.data @ T.data)
            cross = float(np.sum(L * (T @ R)))
            gram = (L.T @ L) * (R.T @ R)
            lowrank2 = max(float(gram.sum()), 0.0)
            eps = np.finfo(np.float64).eps
            # The three terms may cancel (centring); their rounding is below this slack.
            size = sparse2 + 2 * abs(cross) + float(np.abs(gram).sum())
            slack = 8 * (self.shape[0] + self.rank_one_terms) * eps * size
            fro = np.sqrt(max(sparse2 + 2 * cross + lowrank2, 0.0) + slack)
            bound = min(fro, np.sqrt(sparse2) + np.sqrt(lowrank2 + slack))
            bound *= 1 + 4 * np.finfo(self.dtype).eps
            self._norm_bound = float(bound)
        return bound

    def aslinearoperator(self):
        """``G`` as a :class:`scipy.sparse.linalg.LinearOperator`."""
        return LinearOperator(
            self.shape, matvec=self.matvec, rmatvec=self.rmatvec, matmat=self.matmat,
            rmatmat=self.rmatmat, dtype=self.dtype,
        )

    def svd(self, rank, **options):
        """Exact top-``rank`` SVD; see :func:`structured_svd`."""
        return structured_svd(self, rank, **options)

    def exact_svd(self, rank, *, random_state=None, tol=0.0, maxiter=None, ncv=None):
        """Exact top-``rank`` SVD: the optional protocol member of :func:`solvers.tsvd`.

        ``solvers.tsvd`` (ARPACK backend) calls it instead of running ARPACK on the
        operator; it is :func:`structured_svd` with ``solver="auto"`` and
        ``compress="auto"``: exact compression when it pays, ARPACK (``tol``, ``maxiter``,
        ``ncv`` as in ``tsvd``, converged to the same tolerance) on the smaller Gram
        matrix of the core or of ``G`` with the source's own one-vector products.

        Returns
        -------
        solvers.SVDResult
            Unpacks as ``U, s, V``; its ``info`` says what was multiplied (see
            :func:`structured_svd`). Unlike :func:`structured_svd`, the signs are left as
            the solver found them (``tsvd`` applies the sign convention).
        """
        t0 = time.perf_counter()
        args = ("auto", tol, maxiter, ncv, 600, "auto")
        rank = _check_structured_svd_args(self, rank, *args)
        # No sign convention here: solvers.tsvd applies its own to whatever it receives.
        U, s, V, info = _exact_triplets(self, rank, *args, np.random.default_rng(random_state))
        info["seconds"] = time.perf_counter() - t0
        return _result(self, U, s, V, info)


# ---------------------------------------------------------------------------------------------
# exact compression and the SVD
# ---------------------------------------------------------------------------------------------


def _group_rows(indptr, indices, data, L):
    """Group the rows with a non-empty sparse part into classes of identical rows of ``G``.

    Returns ``(empty, reps, group_of, sizes)``: the rows whose sparse part is empty, one
    representative per class, the class of every non-empty row (``-1`` for empty ones) and
    the class sizes. Two rows of ``G = T + L R^T`` with identical ``T`` rows and ``L`` rows
    are identical; hashes propose classes and every member is verified bit for bit.
    """
    n = indptr.shape[0] - 1
    counts = np.diff(indptr)
    full = np.flatnonzero(counts > 0)
    empty = np.flatnonzero(counts == 0)
    group_of = np.full(n, -1, dtype=np.int64)
    if full.size == 0:
        return empty, full, group_of, np.zeros(0, dtype=np.int64)
    data64 = np.ascontiguousarray(data, dtype=np.float64)
    L64 = np.ascontiguousarray(L, dtype=np.float64)
    hashes = _row_hashes(indptr, indices, data64.view(np.int64), L64.view(np.int64))[full]
    _, first, inverse = np.unique(hashes, return_index=True, return_inverse=True)
    reps = full[first][inverse]
    ok = np.empty(full.size, dtype=np.bool_)
    _rows_equal(indptr, indices, data64, L64, full, reps, ok)
    # A hash collision (never seen in practice) only costs compression: the row stands alone.
    inverse = inverse.astype(np.int64)
    n_groups = first.size
    bad = np.flatnonzero(~ok)
    inverse[bad] = n_groups + np.arange(bad.size)
    rep_of_group = np.concatenate([full[first], full[bad]])
    group_of[full] = inverse
    sizes = np.bincount(inverse, minlength=rep_of_group.size)
    return empty, rep_of_group, group_of, sizes


def _span_basis(F):
    """Orthonormal basis of the column span of ``F`` (rows x q) and ``Q^T F``."""
    if F.shape[0] == 0:
        return np.zeros((0, 0)), np.zeros((0, F.shape[1]))
    Uf, sf, Wt = np.linalg.svd(F, full_matrices=False)
    tol = max(F.shape) * np.finfo(np.float64).eps * (sf[0] if sf.size else 0.0)
    keep = sf > tol
    return Uf[:, keep], sf[keep, None] * Wt[keep]


#: ``structured_svd(compress="auto")`` solves on the compressed core when its area is at
#: most this fraction of ``N * M`` (PubMed: 0.04); otherwise building the core costs more than
#: it saves (synthetic graphs: 0.99 N x 0.90 N) and the solve runs on ``G`` itself.
COMPRESS_MAX_AREA = 0.5


class _Operator:
    """``C = T_C + L_C R_C^T`` with float64 products, counting what a solver multiplies.

    ``Tc``/``Tct`` are ``(indptr, indices, data)`` of ``T_C`` and ``T_C^T`` in CSR (data in
    float32 or float64; every product accumulates in float64). ``n_matvec`` counts vectors
    multiplied by ``C`` or ``C^T``; ``n_passes`` counts product calls, each of which reads the
    whole stored operator once.
    """

    def __init__(self, Tc, Tct, L, R, shape):
        self.Tc, self.Tct = Tc, Tct
        self.L, self.R = L, R
        self.core_shape = (int(shape[0]), int(shape[1]))
        self.nnz = int(Tc[2].shape[0])
        self.n_matvec = 0
        self.n_passes = 0

    def _count(self, k):
        self.n_matvec += k
        self.n_passes += 1

    def matmat(self, X):
        X = np.ascontiguousarray(X, dtype=np.float64)
        self._count(X.shape[1])
        return _lowrank_product(self.Tc, self.L, self.R, X, np.float64)

    def rmatmat(self, Y):
        Y = np.ascontiguousarray(Y, dtype=np.float64)
        self._count(Y.shape[1])
        return _lowrank_product(self.Tct, self.R, self.L, Y, np.float64)

    def matvec(self, x):
        self._count(1)
        out = np.empty(self.core_shape[0])
        return _lowrank_matvec(self.Tc, self.L, self.R, np.ascontiguousarray(x, np.float64), out)

    def rmatvec(self, y):
        self._count(1)
        out = np.empty(self.core_shape[1])
        return _lowrank_matvec(self.Tct, self.R, self.L, np.ascontiguousarray(y, np.float64),
                               out)

    def gram(self, x, left):
        """``C C^T x`` (``left``) or ``C^T C x``: two products in one Numba call."""
        self.n_matvec += 2
        self.n_passes += 2
        if left:
            a, at, L, R = self.Tc, self.Tct, self.L, self.R
        else:
            a, at, L, R = self.Tct, self.Tc, self.R, self.L
        z = np.empty(L.shape[0])
        u = np.empty(R.shape[0])
        w = np.empty(L.shape[1])
        x = np.ascontiguousarray(x, dtype=np.float64)
        work = a[2].shape[0] + (L.shape[0] + R.shape[0]) * L.shape[1]
        kernel = _gram_lowrank if work >= _PARALLEL_WORK else _gram_lowrank_serial
        kernel(a, at, L, R, x, u, w, z)
        return z

    def dense(self):
        out = np.empty(self.core_shape)
        idx = np.arange(self.core_shape[0], dtype=np.int64)
        with _Threads(work=out.size * (self.L.shape[1] + 1)):
            _gather_rows(*self.Tc, self.L, self.R, idx, out)
        return out


class _Uncompressed(_Operator):
    """``G`` itself as the core (``Q_r = Q_c = I``): the source's stored parts, no copy."""

    def __init__(self, source):
        super().__init__(source._T, source._Tt, source._L, source._R, source.shape)

    @staticmethod
    def expand_left(Uc):
        return Uc

    expand_right = expand_left


class _Grouping:
    """Classes of identical rows and columns of ``G`` and the size of the core they give."""

    def __init__(self, source):
        indptr, indices, data = source._T
        L = source._L.astype(np.float64)
        R = source._R.astype(np.float64)
        self.row_empty, self.row_reps, self.row_group, self.row_sizes = _group_rows(
            indptr, indices, data, L
        )
        self.col_empty, self.col_reps, self.col_group, self.col_sizes = _group_rows(
            *source._Tt, R
        )
        self.Qz, self.LzC = _span_basis(L[self.row_empty])
        self.Qy, self.RyC = _span_basis(R[self.col_empty])
        self.L, self.R = L, R
        self.core_shape = (self.row_reps.size + self.Qz.shape[1],
                           self.col_reps.size + self.Qy.shape[1])


class _Compression(_Operator):
    """``G = Q_r C Q_c^T`` with ``C = T_C + L_C R_C^T`` small (see :func:`structured_svd`)."""

    def __init__(self, source, groups):
        indptr, indices, data = source._T
        n, m = source.shape
        self.shape = (n, m)
        self.row_empty, self.row_group, self.row_sizes = (
            groups.row_empty, groups.row_group, groups.row_sizes)
        self.col_empty, self.col_group, self.col_sizes = (
            groups.col_empty, groups.col_group, groups.col_sizes)
        self.Qz, self.Qy = groups.Qz, groups.Qy
        row_reps, col_reps = groups.row_reps, groups.col_reps
        h = col_reps.size
        wr = np.sqrt(self.row_sizes.astype(np.float64))
        wc = np.sqrt(self.col_sizes.astype(np.float64))
        L = np.ascontiguousarray(np.vstack([wr[:, None] * groups.L[row_reps], groups.LzC]))
        R = np.ascontiguousarray(np.vstack([wc[:, None] * groups.R[col_reps], groups.RyC]))
        # Core sparse part: T restricted to representative rows and columns, scaled.
        col_map = np.full(m, -1, dtype=np.int64)
        col_map[col_reps] = np.arange(h)
        core_shape = groups.core_shape
        Tc = _core_csr(indptr, indices, data, row_reps.astype(np.int64), col_map, wr, wc,
                       core_shape[0])
        super().__init__(Tc, _transpose_csr(*Tc, core_shape[1]), L, R, core_shape)

    @staticmethod
    def _expand(Uc, group, sizes, empty, Qz, n):
        empty_pos = np.full(n, -1, dtype=np.int64)
        empty_pos[empty] = np.arange(empty.size)
        out = np.empty((n, Uc.shape[1]))
        _expand_rows(np.ascontiguousarray(Uc, dtype=np.float64), group,
                     np.sqrt(sizes.astype(np.float64)), empty_pos,
                     np.ascontiguousarray(Qz, dtype=np.float64), sizes.size, out)
        return out

    def expand_left(self, Uc):
        return self._expand(Uc, self.row_group, self.row_sizes, self.row_empty, self.Qz,
                            self.shape[0])

    def expand_right(self, Vc):
        return self._expand(Vc, self.col_group, self.col_sizes, self.col_empty, self.Qy,
                            self.shape[1])


@numba.njit(cache=True)
def _core_csr(indptr, indices, data, row_reps, col_map, wr, wc, n_rows):
    """CSR (``n_rows`` rows, the last ones empty) of ``T[row_reps]`` on the columns with
    ``col_map >= 0``, renumbered by ``col_map`` and scaled by ``wr`` (rows) and ``wc`` (columns)."""
    g = row_reps.shape[0]
    ptr = np.zeros(n_rows + 1, dtype=np.int64)
    for r in range(g):
        i = row_reps[r]
        count = 0
        for p in range(indptr[i], indptr[i + 1]):
            if col_map[indices[p]] >= 0:
                count += 1
        ptr[r + 1] = ptr[r] + count
    for r in range(g, n_rows):
        ptr[r + 1] = ptr[g]
    ind = np.empty(ptr[g], dtype=np.int64)
    val = np.empty(ptr[g], dtype=np.float64)
    for r in range(g):
        i = row_reps[r]
        k = ptr[r]
        for p in range(indptr[i], indptr[i + 1]):
            j = col_map[indices[p]]
            if j >= 0:
                ind[k] = j
                val[k] = data[p] * wr[r] * wc[j]
                k += 1
    return ptr, ind, val


@numba.njit(cache=True)
def _transpose_csr(indptr, indices, data, n_cols):
    """CSR of the transpose (rows of the result list their entries in increasing order)."""
    ptr = np.zeros(n_cols + 1, dtype=np.int64)
    for p in range(indices.shape[0]):
        ptr[indices[p] + 1] += 1
    for j in range(n_cols):
        ptr[j + 1] += ptr[j]
    fill = ptr[:-1].copy()
    ind = np.empty(indices.shape[0], dtype=np.int64)
    val = np.empty(indices.shape[0], dtype=data.dtype)
    for i in range(indptr.shape[0] - 1):
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            ind[fill[j]] = i
            val[fill[j]] = data[p]
            fill[j] += 1
    return ptr, ind, val


@numba.njit(cache=True)
def _expand_rows(Uc, group, sqrt_sizes, empty_pos, Qz, g, out):
    """``out = Q_r Uc``: a class member gets its class's row over ``sqrt(class size)``, an
    empty row its coordinates in the empty rows' span (``Qz``) times the last rows of ``Uc``."""
    q = Qz.shape[1]
    for i in range(out.shape[0]):
        gi = group[i]
        if gi >= 0:
            for c in range(out.shape[1]):
                out[i, c] = Uc[gi, c] / sqrt_sizes[gi]
        else:
            e = empty_pos[i]
            for c in range(out.shape[1]):
                acc = 0.0
                for s in range(q):
                    acc += Qz[e, s] * Uc[g + s, c]
                out[i, c] = acc


def _check_rank(rank, shape):
    if isinstance(rank, bool) or not isinstance(rank, numbers.Integral):
        raise TypeError(f"rank must be an int, got {type(rank).__name__}")
    rank = int(rank)
    if not 1 <= rank <= min(shape):
        raise ValueError(f"rank must be in [1, {min(shape)}], got {rank}")
    return rank


def _core_svd_arpack(core, rank, tol, maxiter, ncv, rng):
    """Top-``rank`` SVD of the core by ARPACK on its smaller Gram matrix plus Rayleigh-Ritz."""
    g, h = core.core_shape
    left = g <= h
    dim = min(g, h)

    op = LinearOperator((dim, dim), matvec=lambda x: core.gram(x, left), dtype=np.float64)
    v0 = rng.uniform(-1.0, 1.0, dim)
    _, Q = eigsh(op, k=rank, which="LA", tol=tol, maxiter=maxiter, ncv=ncv, v0=v0)
    # Rayleigh-Ritz on the converged subspace: values to eps * s_1 (not eps * s_1^2 / s_i).
    if left:
        Y = core.rmatmat(Q)
        Vc, s, Wt = sla.svd(Y, full_matrices=False)
        Uc = Q @ Wt.T
    else:
        Y = core.matmat(Q)
        Uc, s, Wt = sla.svd(Y, full_matrices=False)
        Vc = Q @ Wt.T
    return Uc, s, Vc


def _complete(U, k, rng):
    """Append ``k`` orthonormal columns orthogonal to ``U`` (for exactly-zero values)."""
    Z = rng.standard_normal((U.shape[0], k))
    Z -= U @ (U.T @ Z)
    Z -= U @ (U.T @ Z)
    return np.hstack([U, np.linalg.qr(Z)[0]])


def _check_structured_svd_args(source, rank, solver, tol, maxiter, ncv, dense_max, compress):
    if not isinstance(source, StructuredKernelSource):
        raise TypeError(
            f"source must be a StructuredKernelSource, got {type(source).__name__}"
        )
    rank = _check_rank(rank, source.shape)
    if solver not in ("auto", "arpack", "dense"):
        raise ValueError(f"solver must be 'auto', 'arpack' or 'dense', got {solver!r}")
    if isinstance(tol, bool) or not isinstance(tol, numbers.Real) or not tol >= 0:
        raise ValueError(f"tol must be a real number >= 0, got {tol!r}")
    if maxiter is not None and (isinstance(maxiter, bool) or not isinstance(
            maxiter, numbers.Integral) or maxiter < 1):
        raise ValueError(f"maxiter must be a positive int or None, got {maxiter!r}")
    if ncv is not None and (isinstance(ncv, bool) or not isinstance(ncv, numbers.Integral)):
        raise TypeError(f"ncv must be an int or None, got {type(ncv).__name__}")
    if isinstance(dense_max, bool) or not isinstance(dense_max, numbers.Integral) or dense_max < 0:
        raise ValueError(f"dense_max must be a non-negative int, got {dense_max!r}")
    if compress not in ("auto", True, False):
        raise ValueError(f"compress must be 'auto', True or False, got {compress!r}")
    return rank


def _build_core(source, compress):
    """The operator the SVD runs on: the compressed core, or ``G`` when that saves little."""
    if compress is False:
        return _Uncompressed(source)
    groups = _Grouping(source)
    g, h = groups.core_shape
    n, m = source.shape
    if compress == "auto" and g * h > COMPRESS_MAX_AREA * n * m:
        core = _Uncompressed(source)
    else:
        core = _Compression(source, groups)
    core.n_row_groups = int(groups.row_reps.size)
    core.n_col_groups = int(groups.col_reps.size)
    return core


def structured_svd(
    source,
    rank,
    *,
    solver="auto",
    tol=0.0,
    maxiter=None,
    ncv=None,
    dense_max=600,
    compress="auto",
    random_state=None,
):
    """Exact top-``rank`` SVD of a :class:`StructuredKernelSource` by exact compression.

    Parameters
    ----------
    source : StructuredKernelSource
    rank : int
        Number of triplets, ``1 <= rank <= min(N, M)``.
    solver : {"auto", "arpack", "dense"}, default="auto"
        How the compressed core is decomposed: ``"dense"`` LAPACK (``gesdd``), ``"arpack"``
        ARPACK on the core's smaller Gram operator followed by a Rayleigh-Ritz step;
        ``"auto"`` is dense when the core's smaller side is at most ``dense_max`` or
        ``rank`` is too close to it for ARPACK.
    tol : float, default=0.0
        ARPACK tolerance (0 = machine precision).
    maxiter : int, optional
        ARPACK iteration cap.
    ncv : int, optional
        ARPACK Lanczos vectors, ``> rank``; default ``max(2 * rank + 1, 20)``. Either is
        capped at the core's smaller side (which the caller cannot know in advance).
    dense_max : int, default=600
        Threshold of ``solver="auto"``.
    compress : {"auto", True, False}, default="auto"
        Whether to solve on the compressed core (True) or on ``G`` itself (False);
        ``"auto"`` compresses when the core's area is at most :data:`COMPRESS_MAX_AREA`
        times ``N * M`` (finding the classes costs a few products; building the core more).
    random_state : None, int or numpy.random.Generator
        Seeds ARPACK's start vector (and the completion of exactly-zero triplets).

    Returns
    -------
    result : solvers.SVDResult
        ``U`` (N, rank), ``s`` descending, ``V`` (M, rank) in ``source.dtype``, the solvers'
        sign convention; ``info`` has ``"method"`` (``"structured"``), ``"effort"`` (ncv, 0
        for dense), ``"n_matvec"`` (vectors multiplied by the core or its transpose),
        ``"n_passes"`` (product calls; each reads the stored core once, which costs at most
        what a product with ``G`` does), ``"n_block_entries"`` (0), ``"seconds"``,
        ``"solver"``, ``"compressed"``, ``"core_shape"`` (``G``'s shape when not
        compressed), ``"core_nnz"``, ``"row_groups"`` and ``"col_groups"`` (classes of
        identical rows and columns with a non-empty sparse part; None when not computed).

    Notes
    -----
    ``G = T + L R^T``. Rows whose sparse part is empty are rows of ``L R^T`` and span at most
    ``q`` directions (for uncentred or centred SNE all of them are equal); among the other rows,
    rows with identical sparse part and ``L`` row are identical. With ``Q_r`` the orthonormal
    basis made of normalised class indicators and of a basis of the empty rows' span (and
    ``Q_c`` likewise for columns), ``G = Q_r C Q_c^T`` exactly, where the core
    ``C = Q_r^T G Q_c`` is again sparse plus rank ``q`` and much smaller (PubMed: 19717 x 19717
    becomes about 2236 x 6264). The SVD of ``C`` gives that of ``G``:
    ``U = Q_r U_C``, ``V = Q_c V_C``. On PubMed the compression also shrinks ARPACK's
    orthogonalisation work, which dominates a Krylov solve on the full operator.

    ARPACK's products are one-vector products on the stored CSR form, summed row by row in a
    fixed order (parallel over rows for large operators, so the bits do not depend on the
    number of threads); ARPACK's own BLAS runs on one thread beside them.
    """
    t0 = time.perf_counter()
    rank = _check_structured_svd_args(source, rank, solver, tol, maxiter, ncv, dense_max,
                                      compress)
    U, s, V, info = _exact_triplets(source, rank, solver, tol, maxiter, ncv, dense_max,
                                    compress, np.random.default_rng(random_state))
    _fix_signs(U, V)
    info["seconds"] = time.perf_counter() - t0
    return _result(source, U, s, V, info)


def _fix_signs(U, V):
    """The solvers' sign convention: the largest-magnitude entry of each ``U[:, i]`` > 0."""
    top = np.argmax(np.abs(U), axis=0)
    sign = np.sign(U[top, np.arange(U.shape[1])])
    sign[sign == 0] = 1
    U *= sign
    V *= sign


def _result(source, U, s, V, info):
    dt = source.dtype
    return SVDResult(U=U.astype(dt, copy=False), s=s.astype(dt, copy=False),
                     V=V.astype(dt, copy=False), info=info)


def _exact_triplets(source, rank, solver, tol, maxiter, ncv, dense_max, compress, rng):
    """``(U, s, V, info)`` of :func:`structured_svd` (float64, ``s`` descending, any signs)."""
    core = _build_core(source, compress)
    dim = min(core.core_shape)
    k = min(rank, dim)
    if ncv is not None:
        if not k < ncv:
            raise ValueError(f"ncv must be > rank = {k}, got {ncv}")
        ncv = min(int(ncv), dim)
    else:
        ncv = min(dim, max(2 * k + 1, 20))
    use_dense = solver == "dense" or (
        solver == "auto" and (dim <= dense_max or k >= dim - 1 or ncv <= k)
    )
    if solver == "arpack" and (k >= dim - 1 or ncv <= k):
        raise ValueError(
            f"solver='arpack' needs rank < {dim - 1} (the compressed core is {core.core_shape})"
        )
    if k == 0:
        Uc = np.zeros((core.core_shape[0], 0))
        Vc = np.zeros((core.core_shape[1], 0))
        s = np.zeros(0)
        effort = 0
    elif use_dense:
        # Small cores only: one BLAS thread is as fast and immune to oversubscription.
        with _Threads(work=_PARALLEL_WORK, blas=dim <= dense_max):
            Uc, s, Vct = sla.svd(core.dense(), full_matrices=False, lapack_driver="gesdd")
        core.n_passes += 1  # read once, row by row
        Uc, s, Vc = Uc[:, :k], s[:k], Vct[:k].T
        effort = 0
    else:
        # ARPACK's own work is BLAS on (dim x ncv) blocks: one BLAS thread avoids
        # contention with the Numba products it calls back into.
        with _Threads(work=_PARALLEL_WORK, blas=True):
            Uc, s, Vc = _core_svd_arpack(core, k, tol, maxiter, ncv, rng)
        effort = ncv
    order = np.argsort(-s, kind="stable")
    U = core.expand_left(Uc[:, order])
    V = core.expand_right(Vc[:, order])
    s = s[order]
    if k < rank:  # G has rank <= dim: the remaining singular values are exactly zero
        U = _complete(U, rank - k, rng)
        V = _complete(V, rank - k, rng)
        s = np.concatenate([s, np.zeros(rank - k)])
    info = {
        "method": "structured",
        "effort": int(effort),
        "n_matvec": int(core.n_matvec),
        "n_passes": int(core.n_passes),
        "n_block_entries": 0,
        "solver": "dense" if use_dense else "arpack",
        "compressed": isinstance(core, _Compression),
        "core_shape": core.core_shape,
        "core_nnz": core.nnz,
        "row_groups": getattr(core, "n_row_groups", None),
        "col_groups": getattr(core, "n_col_groups", None),
    }
    return U, s, V, info
