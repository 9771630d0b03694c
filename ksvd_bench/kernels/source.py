"""KSVD kernel matrices of a data matrix: dense (``ksvd_kernel``) or lazy (``KernelSource``)."""

from __future__ import annotations

import numbers

import numpy as np
import scipy.sparse as sp

from solvers._source import check_index  # solvers imports nothing from ksvd_bench

from . import _numba as nb
from ._params import EXP_KERNELS, check_gamma, check_kernel, paper_gamma
from .compat import compat_data, resolve_compat
from .matrix import (
    _KIND,
    _resolve_dtype,
    check_coef0,
    check_data,
    check_degree,
    cross,
    evaluate,
    kernel_matrix,
    squared_norms,
)

__all__ = ["ksvd_kernel", "KernelSource"]

#: default bound on the bytes of one streamed row chunk of G (and of its cross products)
DEFAULT_CHUNK_BYTES = 64 * 2**20


def _resolve_gamma(A, kernel, gamma, bandwidth_factor):
    if isinstance(bandwidth_factor, bool) or not isinstance(bandwidth_factor, numbers.Real):
        raise TypeError(f"bandwidth_factor must be a positive real number, got "
                        f"{type(bandwidth_factor).__name__}")
    if not np.isfinite(bandwidth_factor) or bandwidth_factor <= 0:
        raise ValueError(f"bandwidth_factor must be finite and > 0, got {bandwidth_factor}")
    if kernel not in _KIND:
        return None if gamma is None else check_gamma(gamma)
    if gamma is None:
        return paper_gamma(A, bandwidth_factor)
    return check_gamma(gamma)


def _check_center(center):
    if not isinstance(center, (bool, np.bool_)):
        raise TypeError(f"center must be a bool, got {type(center).__name__}")
    return bool(center)


def ksvd_kernel(A, kernel="sne", *, gamma=None, bandwidth_factor=1.0, compat="auto",
                center=True, random_state=None, degree=2, coef0=1.0, dtype=None):
    """Dense KSVD kernel matrix of a data matrix ``A``: ``G[i, j] = k(x_i, z_j)``.

    Parameters
    ----------
    A : array-like or scipy sparse matrix of shape (N, M)
        Data; row data ``x_i = A[i, :]``, column data ``z_j = A[:, j]``.
    kernel : {"sne", "rbf", "t", "linear", "poly"}, default="sne"
        See :func:`kernel_matrix`.
    gamma : float, default=None
        Bandwidth; None uses the paper's rule ``bandwidth_factor * sqrt(M * var(A))``
        (:func:`paper_gamma`). Ignored by "linear" and "poly".
    bandwidth_factor : float, default=1.0
        Factor of the paper's rule when ``gamma`` is None.
    compat : {"auto", "pinv", "pca", "random", None}, default="auto"
        Compatibility map between row and column data (:func:`compat_data`).
    center : bool, default=True
        Double-centre G (zero row and column means).
    random_state : None, int or numpy.random.Generator, default=None
        Seed of ``compat="random"``.
    degree, coef0 : float
        Parameters of "poly".
    dtype : {None, float32, float64}, default=None
        Output dtype (None: float32 for float32 ``A``, else float64).

    Returns
    -------
    G : ndarray of shape (N, M)

    Examples
    --------
    >>> import numpy as np
    >>> A = np.random.default_rng(0).normal(size=(6, 4))
    >>> G = ksvd_kernel(A, "linear", compat="pinv", center=False)
    >>> np.allclose(G, A)
    True
    """
    kernel = check_kernel(kernel)
    A = check_data(A, "A")
    dtype = _resolve_dtype(dtype, A)
    compat = resolve_compat(compat, A.shape)
    center = _check_center(center)
    gamma = _resolve_gamma(A, kernel, gamma, bandwidth_factor)
    X, Z = compat_data(A, compat, random_state=random_state)
    return kernel_matrix(X, Z, kernel, gamma=gamma, degree=degree, coef0=coef0,
                         center=center, dtype=dtype)


def _structured_class():
    try:
        from .structured import StructuredKernelSource
    except ImportError:
        return None
    return StructuredKernelSource


class KernelSource:
    """Lazy matrix source of the KSVD kernel matrix ``G`` of ``A`` (as :func:`ksvd_kernel`).

    Evaluates rows, columns and blocks of ``G`` on demand, normalised and centred exactly
    as the dense matrix, without ever holding all of ``G``.

    Parameters
    ----------
    A, kernel, gamma, bandwidth_factor, compat, center, random_state, degree, coef0, dtype
        As in :func:`ksvd_kernel`.
    structured : {"auto", True, False}, default="auto"
        For a sparse square ``A`` with an exp kernel ("sne", "rbf") and no compat map,
        ``KernelSource(...)`` returns a
        :class:`~ksvd_bench.kernels.structured.StructuredKernelSource` instead (exact, works
        from the sparsity of ``A @ A`` and never evaluates dense rows; float32 kept as
        ``dtype`` resolves). ``"auto"`` does so when it applies, the module is available
        and the structured form is well conditioned (it is not only for some signed data,
        :class:`~ksvd_bench.kernels.structured.StructureIllConditioned`: then the general
        lazy source is used); ``True`` requires it (error otherwise, including
        ``StructureIllConditioned``); ``False`` never.
    chunk_bytes : int, default=64 MiB
        Memory budget of one streamed row chunk: ``matmat``, ``rmatmat``, ``dense`` and the
        set-up pass evaluate ``max(1, chunk_bytes // (16 M))`` rows at a time.

    Attributes
    ----------
    shape : (int, int)
    dtype : numpy.dtype
    gamma : float or None
        The bandwidth used (None for "linear" and "poly").
    compat : str or None
        The compat map used.
    n_entries : int
        Entries of G evaluated through ``rows``, ``cols`` and ``block`` so far.
    n_matmat : int
        Number of ``matmat`` plus ``rmatmat`` calls (each evaluates all of G once).

    Notes
    -----
    The constructor makes one streaming pass over row chunks (O(N M d) time) that stores
    per-row SNE/t shifts and normalisers, and, when centring, the row means, column means
    and grand mean of the *normalised* kernel: O(N + M) memory besides one chunk. Column
    sums are accumulated chunk by chunk in a fixed order, so the result does not depend on
    the number of threads. A block then costs one cross product ``X[ridx] @ Z[cidx].T`` and
    one Numba pass, and equals the same entries of :func:`ksvd_kernel` to rounding.
    """

    def __new__(cls, A, kernel="sne", *, gamma=None, bandwidth_factor=1.0, compat="auto",
                center=True, random_state=None, degree=2, coef0=1.0, dtype=None,
                structured="auto", chunk_bytes=DEFAULT_CHUNK_BYTES):
        if structured not in ("auto", True, False):
            raise ValueError(f"structured must be 'auto', True or False, got {structured!r}")
        if structured is False or cls is not KernelSource:
            return super().__new__(cls)
        kernel_ok = isinstance(kernel, str) and kernel in EXP_KERNELS
        shape = getattr(A, "shape", None)
        square = shape is not None and len(shape) == 2 and shape[0] == shape[1]
        compat_ok = compat is None or (isinstance(compat, str) and compat == "auto")
        applies = sp.issparse(A) and square and kernel_ok and compat_ok
        if not applies:
            if structured is True:
                raise ValueError(
                    "structured=True needs a sparse square A, kernel 'sne' or 'rbf' and "
                    "compat None/'auto'"
                )
            return super().__new__(cls)
        klass = _structured_class()
        if klass is None:
            if structured is True:
                raise ImportError("structured=True but ksvd_bench.kernels.structured is missing")
            return super().__new__(cls)
        from .structured import StructureIllConditioned

        A = check_data(A, "A")
        out_dtype = _resolve_dtype(dtype, A)  # float32 A or dtype=float32 keep float32
        # gamma from A as given, exactly as __init__ and ksvd_kernel resolve it
        gamma = _resolve_gamma(A, check_kernel(kernel), gamma, bandwidth_factor)
        try:
            return klass(A.astype(np.float64), kernel, gamma=gamma, center=_check_center(center),
                         dtype=out_dtype)
        except StructureIllConditioned:
            # Signed data whose sparse-plus-rank-one form would cancel: the general lazy
            # source is exact for every input (it recomputes A's checks in __init__).
            if structured is True:
                raise
            return super().__new__(cls)

    def __init__(self, A, kernel="sne", *, gamma=None, bandwidth_factor=1.0, compat="auto",
                 center=True, random_state=None, degree=2, coef0=1.0, dtype=None,
                 structured="auto", chunk_bytes=DEFAULT_CHUNK_BYTES):
        self.kernel = check_kernel(kernel)
        A = check_data(A, "A")
        self.dtype = _resolve_dtype(dtype, A)
        self.compat = resolve_compat(compat, A.shape)
        self.center = _check_center(center)
        self.degree = check_degree(degree)
        self.coef0 = check_coef0(coef0)
        self.gamma = _resolve_gamma(A, self.kernel, gamma, bandwidth_factor)
        if isinstance(chunk_bytes, bool) or not isinstance(chunk_bytes, (int, np.integer)) \
                or chunk_bytes < 1:
            raise ValueError(f"chunk_bytes must be a positive integer, got {chunk_bytes!r}")
        self.shape = (A.shape[0], A.shape[1])
        X, Z = compat_data(A, self.compat, random_state=random_state)
        self._X = X.astype(self.dtype, copy=False)
        self._Z = Z.astype(self.dtype, copy=False)
        self._xx = squared_norms(self._X).astype(self.dtype)
        self._zz = squared_norms(self._Z).astype(self.dtype)
        n, m = self.shape
        self.chunk_rows = int(max(1, min(n, chunk_bytes // (16 * m))))
        self.n_entries = 0
        self.n_matmat = 0
        self._shift = np.zeros(n)
        self._scale = np.ones(n)
        self._rmean = self._cmean = None
        self._gmean = 0.0
        self._setup_pass()

    # ----------------------------------------------------------------- internals
    def _chunks(self):
        n = self.shape[0]
        for start in range(0, n, self.chunk_rows):
            yield start, min(start + self.chunk_rows, n)

    def _setup_pass(self):
        """One streaming pass: row shifts/normalisers and the centring means."""
        needs_rows = self.kernel in ("sne", "t")
        if not (needs_rows or self.center):
            return
        n, m = self.shape
        rsum = np.empty(n)
        csum = np.zeros(m)
        for a, b in self._chunks():
            G, shift, scale = evaluate(self._X[a:b], self._Z, self.kernel, self.gamma,
                                       self.degree, self.coef0, self.dtype,
                                       self._xx[a:b], self._zz)
            if shift is not None:
                self._shift[a:b] = shift
                self._scale[a:b] = scale
            if self.center:
                rsum[a:b] = nb.row_sums(G)
                csum += nb.col_sums(G)
        if self.center:
            self._rmean = rsum / m
            self._cmean = csum / n
            self._gmean = nb.ordered_sum(self._rmean) / n

    def _eval(self, ridx, cidx):
        """Block ``G[ridx][:, cidx]``; None stands for all rows / all columns."""
        X = self._X if ridx is None else self._X[ridx]
        Z = self._Z if cidx is None else self._Z[cidx]
        xx = self._xx if ridx is None else self._xx[ridx]
        zz = self._zz if cidx is None else self._zz[cidx]
        B = cross(X, Z, self.dtype)
        B = B.toarray() if sp.issparse(B) else B
        B = np.ascontiguousarray(B, dtype=self.dtype)
        if self.kernel == "poly":
            nb.poly_inplace(B, self.dtype.type(self.coef0), self.dtype.type(self.degree))
        elif self.kernel != "linear":
            shift = self._shift if ridx is None else self._shift[ridx]
            scale = self._scale if ridx is None else self._scale[ridx]
            nb.block_rows(B, xx, zz, 1.0 / (self.gamma * self.gamma), _KIND[self.kernel],
                          shift, scale)
        if self.center:
            rm = self._rmean if ridx is None else self._rmean[ridx]
            cm = self._cmean if cidx is None else self._cmean[cidx]
            nb.center_inplace(B, rm.astype(self.dtype), cm.astype(self.dtype),
                              self.dtype.type(self._gmean))
        return B

    def _empty(self, r, c):
        return np.empty((r, c), dtype=self.dtype)

    # ----------------------------------------------------------------- protocol
    def rows(self, idx):
        """``G[idx, :]`` as a dense ``(len(idx), M)`` array."""
        idx = check_index(idx, self.shape[0], "row indices")
        if idx.size == 0:
            return self._empty(0, self.shape[1])
        self.n_entries += idx.size * self.shape[1]
        return self._eval(idx, None)

    def cols(self, idx):
        """``G[:, idx]`` as a dense ``(N, len(idx))`` array."""
        idx = check_index(idx, self.shape[1], "column indices")
        if idx.size == 0:
            return self._empty(self.shape[0], 0)
        self.n_entries += idx.size * self.shape[0]
        return self._eval(None, idx)

    def block(self, ridx, cidx):
        """``G[np.ix_(ridx, cidx)]`` as a dense array."""
        r = check_index(ridx, self.shape[0], "row indices")
        c = check_index(cidx, self.shape[1], "column indices")
        if r.size == 0 or c.size == 0:
            return self._empty(r.size, c.size)
        self.n_entries += r.size * c.size
        return self._eval(r, c)

    def _check_operand(self, V, n, name):
        V = np.asarray(V)
        vec = V.ndim == 1
        V2 = V[:, None] if vec else V
        if V2.ndim != 2 or V2.shape[0] != n:
            raise ValueError(f"{name} must have {n} rows, got shape {V.shape}")
        return V2, vec

    def matmat(self, X):
        """``G @ X`` for a dense ``(M, k)`` array, streamed over row chunks of G."""
        V, vec = self._check_operand(X, self.shape[1], "X")
        out = np.empty((self.shape[0], V.shape[1]), dtype=np.result_type(self.dtype, V))
        for a, b in self._chunks():
            out[a:b] = self._eval(np.arange(a, b), None) @ V
        self.n_matmat += 1
        return out[:, 0] if vec else out

    def rmatmat(self, Y):
        """``G.T @ Y`` for a dense ``(N, k)`` array, streamed over row chunks of G."""
        W, vec = self._check_operand(Y, self.shape[0], "Y")
        out = np.zeros((self.shape[1], W.shape[1]), dtype=np.result_type(self.dtype, W))
        for a, b in self._chunks():
            out += self._eval(np.arange(a, b), None).T @ W[a:b]
        self.n_matmat += 1
        return out[:, 0] if vec else out

    def dense(self):
        """All of G as a dense array (O(N M) memory)."""
        out = np.empty(self.shape, dtype=self.dtype)
        for a, b in self._chunks():
            out[a:b] = self._eval(np.arange(a, b), None)
        return out

    def __repr__(self):
        return (f"KernelSource(shape={self.shape}, kernel={self.kernel!r}, gamma={self.gamma}, "
                f"compat={self.compat!r}, center={self.center}, dtype={self.dtype})")
