"""Exact SVD of a :class:`StructuredKernelSource`: exact compression of duplicated rows and
columns, then ARPACK or LAPACK on the core (:func:`structured_svd`)."""

from __future__ import annotations

import copy
import numbers
import time
import weakref
from typing import NamedTuple

import numpy as np
import scipy.linalg as sla
from scipy.sparse.linalg import LinearOperator, eigsh

from solvers import SVDResult, check_int, fix_signs  # solvers imports nothing from ksvd_bench

from ._kernels import (
    _PARALLEL_WORK,
    _core_csr,
    _expand_rows,
    _gather_rows,
    _gram_lowrank,
    _gram_lowrank_serial,
    _lowrank_matvec,
    _lowrank_product,
    _row_hashes,
    _rows_equal,
    _Threads,
    _transpose_csr,
)

# ---------------------------------------------------------------------------------------------
# exact compression and the SVD
# ---------------------------------------------------------------------------------------------


class StructuredParts(NamedTuple):
    """The stored factors of ``G = T + L R^T`` that the exact SVD reads (no copies).

    ``T`` and ``Tt`` are ``(indptr, indices, data)`` of ``T`` in CSR and of ``T^T`` in CSR
    (int64 indices); ``L`` (N x q) and ``R`` (M x q) are C-contiguous in the source's dtype.
    """

    T: tuple
    Tt: tuple
    L: np.ndarray
    R: np.ndarray


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
        return _lowrank_matvec(self.Tct, self.R, self.L, np.ascontiguousarray(y, np.float64), out)

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
        parts = source.structured_parts
        super().__init__(parts.T, parts.Tt, parts.L, parts.R, source.shape)

    @staticmethod
    def expand_left(Uc):
        return Uc

    expand_right = expand_left


class _Grouping:
    """Classes of identical rows and columns of ``G`` and the size of the core they give."""

    def __init__(self, source):
        parts = source.structured_parts
        indptr, indices, data = parts.T
        L = parts.L.astype(np.float64)
        R = parts.R.astype(np.float64)
        self.row_empty, self.row_reps, self.row_group, self.row_sizes = _group_rows(
            indptr, indices, data, L
        )
        self.col_empty, self.col_reps, self.col_group, self.col_sizes = _group_rows(*parts.Tt, R)
        self.Qz, self.LzC = _span_basis(L[self.row_empty])
        self.Qy, self.RyC = _span_basis(R[self.col_empty])
        self.L, self.R = L, R
        self.core_shape = (
            self.row_reps.size + self.Qz.shape[1],
            self.col_reps.size + self.Qy.shape[1],
        )


class _Compression(_Operator):
    """``G = Q_r C Q_c^T`` with ``C = T_C + L_C R_C^T`` small (see :func:`structured_svd`)."""

    def __init__(self, source, groups):
        indptr, indices, data = source.structured_parts.T
        n, m = source.shape
        self.shape = (n, m)
        self.row_empty, self.row_group, self.row_sizes = (
            groups.row_empty,
            groups.row_group,
            groups.row_sizes,
        )
        self.col_empty, self.col_group, self.col_sizes = (
            groups.col_empty,
            groups.col_group,
            groups.col_sizes,
        )
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
        Tc = _core_csr(
            indptr, indices, data, row_reps.astype(np.int64), col_map, wr, wc, core_shape[0]
        )
        super().__init__(Tc, _transpose_csr(*Tc, core_shape[1]), L, R, core_shape)

    @staticmethod
    def _expand(Uc, group, sizes, empty, Qz, n):
        empty_pos = np.full(n, -1, dtype=np.int64)
        empty_pos[empty] = np.arange(empty.size)
        out = np.empty((n, Uc.shape[1]))
        _expand_rows(
            np.ascontiguousarray(Uc, dtype=np.float64),
            group,
            np.sqrt(sizes.astype(np.float64)),
            empty_pos,
            np.ascontiguousarray(Qz, dtype=np.float64),
            sizes.size,
            out,
        )
        return out

    def expand_left(self, Uc):
        return self._expand(
            Uc, self.row_group, self.row_sizes, self.row_empty, self.Qz, self.shape[0]
        )

    def expand_right(self, Vc):
        return self._expand(
            Vc, self.col_group, self.col_sizes, self.col_empty, self.Qy, self.shape[1]
        )


def _check_rank(rank, shape):
    return check_int("rank", rank, 1, min(shape), high_text=f"min(N, M) = {min(shape)}")


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
    # Checked by what it offers, not by class: the operator module imports this one (its
    # svd and exact_svd methods), so importing the class here would close a cycle.
    if not isinstance(getattr(source, "structured_parts", None), StructuredParts):
        raise TypeError(f"source must be a StructuredKernelSource, got {type(source).__name__}")
    rank = _check_rank(rank, source.shape)
    if solver not in ("auto", "arpack", "dense"):
        raise ValueError(f"solver must be 'auto', 'arpack' or 'dense', got {solver!r}")
    if isinstance(tol, bool) or not isinstance(tol, numbers.Real) or not tol >= 0:
        raise ValueError(f"tol must be a real number >= 0, got {tol!r}")
    if maxiter is not None and (
        isinstance(maxiter, bool) or not isinstance(maxiter, numbers.Integral) or maxiter < 1
    ):
        raise ValueError(f"maxiter must be a positive int or None, got {maxiter!r}")
    if ncv is not None and (isinstance(ncv, bool) or not isinstance(ncv, numbers.Integral)):
        raise TypeError(f"ncv must be an int or None, got {type(ncv).__name__}")
    if isinstance(dense_max, bool) or not isinstance(dense_max, numbers.Integral) or dense_max < 0:
        raise ValueError(f"dense_max must be a non-negative int, got {dense_max!r}")
    if compress not in ("auto", True, False):
        raise ValueError(f"compress must be 'auto', True or False, got {compress!r}")
    return rank


#: The operator each source's exact SVD ran on, by ``compress`` setting. A source is immutable,
#: so its grouping and compressed core (about a sixth of a PubMed solve) are made once, like
#: the source's own parts; each solve counts its products on a fresh copy.
_CORES = weakref.WeakKeyDictionary()


def _build_core(source, compress):
    """The operator the SVD runs on: the compressed core, or ``G`` when that saves little."""
    cores = _CORES.setdefault(source, {})
    if compress not in cores:
        cores[compress] = _new_core(source, compress)
    core = copy.copy(cores[compress])  # shares the arrays; the counters start at 0
    core.n_matvec = core.n_passes = 0
    return core


def _new_core(source, compress):
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
    rank = _check_structured_svd_args(source, rank, solver, tol, maxiter, ncv, dense_max, compress)
    U, s, V, info = _exact_triplets(
        source,
        rank,
        solver,
        tol,
        maxiter,
        ncv,
        dense_max,
        compress,
        np.random.default_rng(random_state),
    )
    fix_signs(U, V)
    info["seconds"] = time.perf_counter() - t0
    return _result(source, U, s, V, info)


def _result(source, U, s, V, info):
    dt = source.dtype
    return SVDResult(
        U=U.astype(dt, copy=False),
        s=s.astype(dt, copy=False),
        V=V.astype(dt, copy=False),
        info=info,
    )


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


def exact_svd(source, rank, *, random_state=None, tol=0.0, maxiter=None, ncv=None):
    """:meth:`StructuredKernelSource.exact_svd` (see there): signs left as found."""
    t0 = time.perf_counter()
    args = ("auto", tol, maxiter, ncv, 600, "auto")
    rank = _check_structured_svd_args(source, rank, *args)
    # No sign convention here: solvers.tsvd applies its own to whatever it receives.
    U, s, V, info = _exact_triplets(source, rank, *args, np.random.default_rng(random_state))
    info["seconds"] = time.perf_counter() - t0
    return _result(source, U, s, V, info)
