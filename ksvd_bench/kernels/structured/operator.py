"""The structured kernel source: :class:`StructuredKernelSource` and its checks."""

from __future__ import annotations

import hashlib
import time

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator

from solvers import check_index

from ..operands import check_operand, check_product
from ..params import EXP_KERNELS, check_dtype, check_gamma, structured_kernel_error
from ._kernels import (
    _gather_block,
    _gather_rows,
    _lowrank_product,
    _row_min_distance,
    _sparse_part,
    _Threads,
    compile_products,
)
from .svd import StructuredParts, exact_svd, structured_svd

#: Largest conditioning of the rank-one-plus-sparse form accepted by
#: :class:`StructuredKernelSource`: entries then carry at most about
#: ``MAX_CONDITION * eps ~ 2e-13`` rounding relative to their row's largest entry.
MAX_CONDITION = 1e3


class StructureIllConditioned(ValueError):
    """The sparse-plus-rank-one form of this kernel matrix would lose accuracy.

    Raised by :class:`StructuredKernelSource` when, for some row, the rank-one base
    ``a_i b_j`` exceeds the row's largest true entry by more than :data:`MAX_CONDITION`
    (or the SNE normaliser cancels by as much), which happens only when ``A @ A`` has
    negative entries. ``kernel_source(..., structured="auto")`` then falls back to the
    general lazy source. Attributes ``row`` (the worst row) and ``condition`` (its factor,
    possibly ``inf``).
    """

    def __init__(self, message, *, row, condition):
        super().__init__(message)
        self.row = row
        self.condition = condition


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


def _index(idx, n, name):
    return np.ascontiguousarray(check_index(idx, n, name), dtype=np.int64)


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
        Storage and product dtype. Construction is always in float64. As with
        :class:`~ksvd_bench.kernels.KernelSource`, an operand ``V`` is multiplied in this
        dtype and the product returned in ``np.result_type(dtype, V)``.

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
        has negative entries); use ``kernel_source(A, ..., structured=False)``
        (``KernelSource(A, ...)``) instead.

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
            raise structured_kernel_error(kernel)
        if gamma is None:
            raise TypeError(
                "gamma is required (use ksvd_bench.kernels.paper_gamma(A, factor) for the "
                "paper's rule)"
            )
        gamma = check_gamma(gamma)
        if not isinstance(center, (bool, np.bool_)):
            raise TypeError(f"center must be a bool, got {type(center).__name__}")
        self.dtype = check_dtype(dtype)
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
                P.indptr,
                P.indices,
                P.data,
                r,
                c,
                c_min,
                t,
                kernel == "sne",
                float(b.sum()),
                b,
                delta,
            )
        # Conditioning, part 2 (SNE): cancellation in the row normaliser.
        cond = np.maximum(np.exp(log_kappa), rho)
        self._check_condition(
            np.log(np.maximum(cond, np.finfo(np.float64).tiny)),
            "the SNE normaliser's off-pattern sum cancels",
        )
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
            f"kernel_source(A, ..., structured=False), which is KernelSource(A, ...), or "
            f"ksvd_kernel for the dense matrix.",
            row=worst,
            condition=cond,
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
    def structured_parts(self):
        """The stored ``T``, ``T^T``, ``L``, ``R`` of ``G = T + L R^T`` (read by the exact SVD)."""
        return StructuredParts(self._T, self._Tt, self._L, self._R)

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
    def _apply(self, parts, L, R, X, n_in, name, transpose):
        # KernelSource's operand checks and dtypes: the product runs in the storage dtype
        # (one compile per dtype) and comes back in np.result_type(storage, operand)
        V, vector = check_operand(X, n_in, name)
        with np.errstate(over="ignore"):  # an operand too large for G is named below
            Vs = np.ascontiguousarray(V, dtype=self.dtype)
            out = _lowrank_product(parts, L, R, Vs, self.dtype)
        out = out.astype(np.result_type(self.dtype, V), copy=False)
        check_product(out, V, name, self.norm_bound, transpose)
        self.n_matmat += 1
        return out[:, 0] if vector else out

    def compile_kernels(self):
        """Compile (or load from Numba's disk cache) this source's product kernels now.

        Both compiles (serial and parallel) of its block products and of the one-vector
        products of a Krylov solver, for its dtype: so a timed solve, here or on a larger
        source of the same dtype, does not include compiling (the parallel compiles run only
        on large operators). Returns the source.
        """
        compile_products(self._T, self._Tt, self._L, self._R)
        return self

    def matmat(self, X):
        """``G @ X`` for ``X`` of shape (M, k) (or (M,)); ``O(k (nnz + q (N + M)))``."""
        return self._apply(self._T, self._L, self._R, X, self.shape[1], "X", False)

    def rmatmat(self, Y):
        """``G.T @ Y`` for ``Y`` of shape (N, k) (or (N,))."""
        return self._apply(self._Tt, self._R, self._L, Y, self.shape[0], "Y", True)

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
            self.shape,
            matvec=self.matvec,
            rmatvec=self.rmatvec,
            matmat=self.matmat,
            rmatmat=self.rmatmat,
            dtype=self.dtype,
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
        return exact_svd(self, rank, random_state=random_state, tol=tol, maxiter=maxiter, ncv=ncv)
