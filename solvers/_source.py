"""The matrix-source protocol that every solver consumes, and adapters for common types.

A solver never knows where ``G`` came from. It asks a *matrix source* for what it needs:

========================  =====================================================
``shape``, ``dtype``      the size ``(N, M)`` and the (real) floating dtype of ``G``
``rows(idx)``             ``G[idx, :]`` as a dense ``(len(idx), M)`` array
``cols(idx)``             ``G[:, idx]`` as a dense ``(N, len(idx))`` array
``block(ridx, cidx)``     ``G[np.ix_(ridx, cidx)]`` as a dense array
``matmat(X)``             ``G @ X`` for a dense ``(M, k)`` array
``rmatmat(Y)``            ``G.T @ Y`` for a dense ``(N, k)`` array
========================  =====================================================

Numpy arrays, scipy sparse matrices/arrays and :class:`scipy.sparse.linalg.LinearOperator`
are adapted by :func:`as_source`; any other object that has the six members above is used
as it is (``ksvd_bench.kernels.KernelSource`` is one).

Optional members, used when present:

========================  =====================================================
``sketch(Omega, Psi)``    ``(G @ Omega, G.T @ Psi)``; a lazy source should compute both
                          from ONE pass over ``G`` (``generalized_nystrom`` then reads
                          ``G`` once); the adapters here compute two products
``norm_bound()``          a cheap upper bound on the spectral norm ``||G||_2`` (e.g. the
                          Frobenius norm); solvers use it to reject impossible estimates
``frobenius_norm()``      ``||G||_F`` exact to rounding, or None where the source cannot
                          tell without a pass; ``rsvd``/``block_krylov`` use it for the
                          Frobenius-gap error estimate (never an upper bound: the gap
                          would be off by the difference)
``dense()``               the whole matrix as a dense array
``row_norms_sq()``        squared row norms, shape ``(N,)`` (norm sampling in the
``col_norms_sq()``        Nyström solvers); squared column norms, shape ``(M,)``
``exact_svd(rank, ...)``  the source's own exact top-``rank`` SVD (``U, s, V``, optionally
                          with an ``info`` dict); ``tsvd`` with ``backend="arpack"`` uses it
                          (``StructuredKernelSource`` solves on an exact compression of G)
``setup_pending()``       True while reading any row, column or block would first run a
                          whole pass over ``G`` (a lazy source whose set-up has not run);
                          a check held to a budget of entries then cannot run
========================  =====================================================

The dense and sparse adapters provide all of them (``norm_bound`` and ``frobenius_norm`` are
the Frobenius norm, computed once); the LinearOperator adapter provides ``sketch`` and
``dense`` only.

``G`` must be real: complex input is rejected with a ``ValueError`` (the solvers work in
real arithmetic and would otherwise drop the imaginary part), and arrays whose dtype is not
boolean, integer or real floating (object, strings, ...) with a ``TypeError``. A masked array
with masked entries is rejected too: its mask cannot be honoured.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator

__all__ = [
    "MatrixSource",
    "DenseSource",
    "SparseSource",
    "OperatorSource",
    "as_source",
    "source_to_dense",
    "check_real_dtype",
]

_MEMBERS = ("shape", "dtype", "rows", "cols", "block", "matmat", "rmatmat")


@runtime_checkable
class MatrixSource(Protocol):
    """Structural type of a matrix source (see the module docstring)."""

    shape: tuple[int, int]
    dtype: np.dtype

    def rows(self, idx) -> np.ndarray: ...

    def cols(self, idx) -> np.ndarray: ...

    def block(self, ridx, cidx) -> np.ndarray: ...

    def matmat(self, X) -> np.ndarray: ...

    def rmatmat(self, Y) -> np.ndarray: ...


def check_index(idx, n, name):
    """``idx`` as a 1-d ``intp`` array of indices into a dimension of size ``n``.

    Raises ``ValueError`` (not 1-d), ``TypeError`` (not integers) or ``IndexError`` (out
    of range), naming the argument as ``name``. Shared with ``ksvd_bench``'s sources.
    """
    idx = np.asarray(idx)
    if idx.ndim != 1:
        raise ValueError(f"{name} must be a 1-d array of indices, got ndim={idx.ndim}")
    if idx.size and not np.issubdtype(idx.dtype, np.integer):
        raise TypeError(f"{name} must hold integers, got dtype {idx.dtype}")
    idx = idx.astype(np.intp, copy=False)
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        raise IndexError(f"{name} out of range for a dimension of size {n}")
    return idx


def check_real_dtype(dtype, name="G"):
    """Raise unless ``dtype`` holds real numbers (bool, integer or real floating).

    Complex dtypes raise ``ValueError`` (the solvers compute in real arithmetic: they would
    silently drop the imaginary part); anything else that is not a number (object, strings,
    dates) raises ``TypeError``. The messages name the argument as ``name``.
    """
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        raise ValueError(
            f"complex {name} is not supported (got dtype {dtype}): the solvers compute in real "
            f"arithmetic. Use the real and imaginary parts, e.g. the real matrix "
            f"[[{name}.real, -{name}.imag], [{name}.imag, {name}.real]] has the singular values "
            f"of {name}, each twice; or use scipy.sparse.linalg.svds"
        )
    if dtype.kind not in "biuf":
        raise TypeError(
            f"{name} must hold real numbers (a bool, integer or floating dtype), got dtype {dtype}"
        )
    return dtype


#: Magnitudes whose squares, summed over up to 1e16 entries, neither underflow nor overflow.
_SAFE_SQUARES = (1e-140, 1e140)


def frobenius_of(values):
    """``sqrt(sum(values^2))`` in float64 without underflow or overflow of the squares.

    0.0 only when every entry is exactly 0 (checked, not inferred from a sum that may have
    underflowed); entries far from 1 in magnitude are scaled by the largest one first.
    """
    A = np.asarray(values).reshape(-1)  # a view for a contiguous array
    if A.size == 0:
        return 0.0
    amax = float(max(np.max(A), -np.min(A)))  # no |A| copy
    if amax == 0.0:
        return 0.0
    if _SAFE_SQUARES[0] <= amax <= _SAFE_SQUARES[1]:
        return float(np.sqrt(np.einsum("i,i->", A, A, dtype=np.float64)))
    B = A.astype(np.float64) / amax
    return amax * float(np.sqrt(np.einsum("i,i->", B, B)))


def _float_dtype(dtype):
    dtype = check_real_dtype(dtype)
    return dtype if dtype in (np.float32, np.float64) else np.dtype(np.float64)


def _as_plain_array(G):
    """``G`` as an ndarray, refusing masks that would be ignored and non-numeric data."""
    if isinstance(G, np.ma.MaskedArray):
        n_masked = int(np.ma.count_masked(G))
        if n_masked:
            raise ValueError(
                f"G is a masked array with {n_masked} masked entries; the solvers cannot "
                "honour a mask: fill the masked entries first (G.filled(value)) or pass G.data"
            )
        G = np.ma.getdata(G)
    try:
        G = np.asarray(G)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"G could not be converted to a 2-d numeric array: {exc}") from None
    check_real_dtype(G.dtype)
    return G


class DenseSource:
    """Matrix source over a dense 2-d numpy array (no copy for float32/float64 input)."""

    def __init__(self, G):
        G = _as_plain_array(G)
        if G.ndim != 2:
            raise ValueError(f"G must be 2-d, got ndim={G.ndim}")
        self.G = G.astype(_float_dtype(G.dtype), copy=False)
        self.shape = self.G.shape
        self.dtype = self.G.dtype
        self._norm_bound = None

    def rows(self, idx):
        return self.G[check_index(idx, self.shape[0], "row indices")]

    def cols(self, idx):
        return self.G[:, check_index(idx, self.shape[1], "column indices")]

    def block(self, ridx, cidx):
        r = check_index(ridx, self.shape[0], "row indices")
        c = check_index(cidx, self.shape[1], "column indices")
        return self.G[np.ix_(r, c)]

    def matmat(self, X):
        return self.G @ X

    def rmatmat(self, Y):
        return self.G.T @ Y

    def sketch(self, Omega, Psi):
        """``(G @ Omega, G.T @ Psi)`` (two BLAS products: the array is already in memory)."""
        return self.G @ Omega, self.G.T @ Psi

    def norm_bound(self):
        """The Frobenius norm, an upper bound on ``||G||_2`` (computed once)."""
        if self._norm_bound is None:
            # Accumulated in float64 (a float32 sum could round below the true norm), scaled
            # where the squares would underflow or overflow.
            self._norm_bound = frobenius_of(self.G)
        return self._norm_bound

    def frobenius_norm(self):
        """``||G||_F``, exact to rounding (computed once, with :meth:`norm_bound`).

        0.0 only for a ``G`` whose entries are all exactly 0 (checked entry by entry).
        """
        return self.norm_bound()

    def dense(self):
        return self.G

    def row_norms_sq(self):
        """Squared Euclidean norms of the rows (used by norm sampling)."""
        return np.einsum("ij,ij->i", self.G, self.G, dtype=np.float64)

    def col_norms_sq(self):
        """Squared Euclidean norms of the columns (used by norm sampling)."""
        return np.einsum("ij,ij->j", self.G, self.G, dtype=np.float64)


class SparseSource:
    """Matrix source over a scipy sparse matrix or array (kept in CSR and CSC)."""

    def __init__(self, G):
        check_real_dtype(G.dtype)
        G = sp.csr_matrix(G)
        self.csr = G.astype(_float_dtype(G.dtype), copy=False)
        self.csc = self.csr.tocsc()
        self.shape = self.csr.shape
        self.dtype = self.csr.dtype
        self._norm_bound = None

    def rows(self, idx):
        return self.csr[check_index(idx, self.shape[0], "row indices")].toarray()

    def cols(self, idx):
        return self.csc[:, check_index(idx, self.shape[1], "column indices")].toarray()

    def block(self, ridx, cidx):
        r = check_index(ridx, self.shape[0], "row indices")
        c = check_index(cidx, self.shape[1], "column indices")
        return self.csr[r][:, c].toarray()

    def matmat(self, X):
        return np.asarray(self.csr @ X)

    def rmatmat(self, Y):
        return np.asarray(self.csc.T @ Y)

    def sketch(self, Omega, Psi):
        """``(G @ Omega, G.T @ Psi)`` (two sparse products)."""
        return self.matmat(Omega), self.rmatmat(Psi)

    def norm_bound(self):
        """The Frobenius norm, an upper bound on ``||G||_2`` (computed once)."""
        if self._norm_bound is None:
            self._norm_bound = frobenius_of(self.csr.data)
        return self._norm_bound

    def frobenius_norm(self):
        """``||G||_F``, exact to rounding (computed once, with :meth:`norm_bound`).

        0.0 only for a ``G`` whose stored entries are all exactly 0 (checked).
        """
        return self.norm_bound()

    def dense(self):
        return self.csr.toarray()

    def row_norms_sq(self):
        """Squared Euclidean norms of the rows (used by norm sampling)."""
        return np.asarray(self.csr.multiply(self.csr).sum(axis=1), dtype=np.float64).ravel()

    def col_norms_sq(self):
        """Squared Euclidean norms of the columns (used by norm sampling)."""
        return np.asarray(self.csr.multiply(self.csr).sum(axis=0), dtype=np.float64).ravel()


class OperatorSource:
    """Matrix source over a :class:`~scipy.sparse.linalg.LinearOperator`.

    Only ``matmat``/``rmatmat`` are native; ``rows``, ``cols`` and ``block`` are computed
    by applying the operator to unit vectors, which costs one product per requested index.
    """

    def __init__(self, op):
        self.op = op
        self.shape = tuple(op.shape)
        self.dtype = _float_dtype(op.dtype)

    def _unit(self, idx, n):
        E = np.zeros((n, idx.size), dtype=self.dtype)
        E[idx, np.arange(idx.size)] = 1
        return E

    def rows(self, idx):
        idx = check_index(idx, self.shape[0], "row indices")
        return np.asarray(self.op.rmatmat(self._unit(idx, self.shape[0]))).T

    def cols(self, idx):
        idx = check_index(idx, self.shape[1], "column indices")
        return np.asarray(self.op.matmat(self._unit(idx, self.shape[1])))

    def block(self, ridx, cidx):
        r = check_index(ridx, self.shape[0], "row indices")
        return self.cols(cidx)[r]

    def matmat(self, X):
        return np.asarray(self.op.matmat(X))

    def rmatmat(self, Y):
        return np.asarray(self.op.rmatmat(Y))

    def sketch(self, Omega, Psi):
        """``(G @ Omega, G.T @ Psi)`` by two operator products."""
        return self.matmat(Omega), self.rmatmat(Psi)

    def dense(self):
        return self.cols(np.arange(self.shape[1]))


def as_source(G) -> MatrixSource:
    """Return a matrix source for ``G``.

    Parameters
    ----------
    G : ndarray, sparse matrix, LinearOperator or MatrixSource
        The matrix. Objects that already implement the protocol are returned unchanged.

    Returns
    -------
    source : MatrixSource
    """
    if isinstance(G, (DenseSource, SparseSource, OperatorSource)):
        return G
    if sp.issparse(G):
        return SparseSource(G)
    if isinstance(G, LinearOperator):
        return OperatorSource(G)
    if isinstance(G, np.ndarray):
        return DenseSource(G)
    if all(hasattr(G, name) for name in _MEMBERS):
        check_real_dtype(G.dtype)
        return G
    if isinstance(G, (list, tuple)):
        return DenseSource(G)
    raise TypeError(
        "G must be a numpy array, a scipy sparse matrix, a LinearOperator or an object with "
        f"{', '.join(_MEMBERS)}; got {type(G).__name__}"
    )


def source_to_dense(source) -> np.ndarray:
    """Materialise a matrix source as a dense array (for references and tests)."""
    if hasattr(source, "dense"):
        return np.asarray(source.dense())
    return source.cols(np.arange(source.shape[1]))
