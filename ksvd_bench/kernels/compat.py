"""Compatibility maps (the paper's Algorithm 2): row and column data in one common space.

For a data matrix ``A`` (N x M) the row data are ``x_i = A[i, :]`` in R^M and the column data
``z_j = A[:, j]`` in R^N. A kernel ``k(x_i, z_j)`` needs one space, so the source of larger
dimension is mapped onto the smaller one by a matrix ``C``:

* ``M >= N``: ``x_i -> C^T x_i`` in R^N with ``C`` (M x N); the z_j stay as they are.
* ``N > M``: ``z_j -> C^T z_j`` in R^M with ``C`` (N x M); the x_i stay as they are.

``"pinv"`` (a0) ``C = pinv(A)`` (or its transpose ``pinv(A^T)`` when N > M);
``"pca"`` (a1) ``C`` = the leading principal directions of the projected source;
``"random"`` (a2) ``C`` = a seeded Gaussian matrix; ``None`` (square A only) ``C = I``.

``compat_data`` returns the mapped data; ``compat_maps`` returns them with ``C`` itself, which
new rows or columns (an out-of-sample extension) must be mapped by.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from solvers import check_choice

from .matrix import check_data
from .params import COMPATS

__all__ = ["CompatMaps", "compat_data", "compat_maps", "resolve_compat"]


def resolve_compat(compat, shape):
    """Return the compat map actually used: "auto" -> None for square ``shape``, else "pca"."""
    if compat is not None:  # None (no map) or a name, in any case
        compat = check_choice("compat", compat, ("auto",) + COMPATS)
    if compat == "auto":
        return None if shape[0] == shape[1] else "pca"
    if compat is None and shape[0] != shape[1]:
        raise ValueError(
            f"compat=None needs a square A (x_i and z_j must have the same dimension), "
            f"got shape {shape}; use compat='pinv', 'pca' or 'random'"
        )
    return compat


def _svd(A):
    Ad = A.toarray() if sp.issparse(A) else A
    return np.linalg.svd(np.asarray(Ad, dtype=np.float64), full_matrices=False)


def _rank(s, shape):
    """Numerical rank with numpy's ``pinv`` cutoff ``max(N, M) * eps * s_max``."""
    if s.size == 0 or s[0] == 0:
        return 0
    return int(np.count_nonzero(s > max(shape) * np.finfo(np.float64).eps * s[0]))


def _columns(A):
    """The column data ``z_j`` as rows, unmapped (sparse ``A`` stays sparse)."""
    return A.T.tocsr() if sp.issparse(A) else np.ascontiguousarray(A.T)


def _flip(C):
    """Deterministic signs: the largest-magnitude entry of each column is positive."""
    idx = np.argmax(np.abs(C), axis=0)
    signs = np.sign(C[idx, np.arange(C.shape[1])])
    signs[signs == 0] = 1.0
    return C * signs


def compat_data(A, compat="auto", *, random_state=None):
    """Row data ``X`` (x_i as rows) and column data ``Z`` (z_j as rows) in one common space.

    Parameters
    ----------
    A : array-like or scipy sparse matrix of shape (N, M)
        Finite, non-empty data matrix.
    compat : {"auto", "pinv", "pca", "random", None}, default="auto"
        The compatibility map (paper's Algorithm 2). ``"pinv"`` (a0): ``C = pinv(A)``;
        ``"pca"`` (a1): the ``min(N, M)`` leading principal directions of the source of
        larger dimension; ``"random"`` (a2): Gaussian ``C`` with entries N(0, 1/n),
        ``n = min(N, M)`` (a Johnson-Lindenstrauss scaling that keeps norms on average);
        ``None``: no map, square ``A`` only; ``"auto"``: None if square, else "pca".
        When ``N == M`` the explicit maps project the row data.
    random_state : None, int or numpy.random.Generator, default=None
        Seed of ``"random"`` (ignored by the other maps).

    Returns
    -------
    X : ndarray or CSR matrix of shape (N, n)
    Z : ndarray or CSR matrix of shape (M, n)
        ``n = N`` when ``M >= N`` (or compat None) else ``M``. The unprojected side keeps the
        sparsity of ``A``; the projected side is dense (n x n, or the small side).

    Notes
    -----
    *pinv.* With ``A = U S V^T`` (thin SVD, rank r), ``x_i -> C^T x_i`` gives
    ``X = A pinv(A) = U_r U_r^T`` and for ``N > M`` ``z_j -> pinv(A) z_j`` gives
    ``Z = (pinv(A) A)^T = V_r V_r^T``. Both are computed from the SVD factors (orthogonal
    projectors, well conditioned) rather than by multiplying with ``pinv(A)``, so the linear
    kernel returns ``X Z^T = A pinv(A) A = A`` to rounding whatever the conditioning of ``A``
    (the paper's Remark: KSVD with a linear kernel is the SVD of A). The rank cutoff is
    numpy's ``pinv`` default.

    *pca.* The directions are the leading singular vectors of ``A`` (right ones when
    ``M >= N``, left ones when ``N > M``), i.e. the principal directions of the *uncentred*
    source: centring is not applied because the map must keep the origin shared with the
    unprojected side (``G`` compares ``C^T x_i`` with raw ``z_j``), and because ``n``
    points have only ``n - 1`` centred directions, which would leave the ``n``-th one
    undefined. ``C^T`` is then an isometry on the span of the source, so distances within
    the projected source are preserved. Signs are fixed (largest entry of each direction
    positive); directions of repeated singular values are not unique.

    *Memory.* "pinv" and "pca" need a full SVD of ``A``: a sparse ``A`` is densified for it
    (O(N M) memory, O(N M min(N, M)) time); the results ``X``/``Z`` are dense
    ``min(N, M)``-dimensional. "random" never densifies ``A`` (one sparse-times-dense product).
    """
    X, Z, _, _ = _compat(A, compat, random_state, maps=False)
    return X, Z


class CompatMaps(NamedTuple):
    """The data of :func:`compat_data` with the maps ``C`` that produced them.

    ``X = A @ row_map`` (rows mapped, ``M >= N``) or ``Z = A.T @ column_map`` (columns
    mapped, ``N > M``); the other map is None (that side enters unchanged).
    """

    X: object
    Z: object
    row_map: np.ndarray | None
    column_map: np.ndarray | None


def compat_maps(A, compat="auto", *, random_state=None):
    """:func:`compat_data` together with the matrix ``C`` of the map it applied.

    A new row ``x`` (or column ``z``) of the same kind as the data is mapped by the same
    ``C``: its kernel argument is ``C^T x``. That is what an out-of-sample extension needs;
    ``C`` cannot be recovered from ``X`` and ``A`` (``pinv(A) X`` is only its part in the
    row space of ``A``, which differs for the Gaussian map a2 and on rank-deficient ``A``).

    Parameters
    ----------
    A : array-like or scipy sparse matrix of shape (N, M)
        Finite, non-empty data matrix.
    compat : {"auto", "pinv", "pca", "random", None}, default="auto"
        The compatibility map (see :func:`compat_data`).
    random_state : None, int or numpy.random.Generator, default=None
        Seed of ``"random"`` (ignored by the other maps).

    Returns
    -------
    CompatMaps
        Named tuple ``(X, Z, row_map, column_map)``: ``X`` and ``Z`` exactly as
        :func:`compat_data` returns them; ``row_map`` the ``M x n`` matrix ``C`` with
        ``x_i -> C^T x_i`` when the rows are mapped (``M >= N`` and compat not None), else
        None; ``column_map`` the ``N x n`` matrix ``C`` with ``z_j -> C^T z_j`` when the
        columns are mapped (``N > M``), else None. For ``"pinv"`` the map is ``pinv(A)``
        (``pinv(A^T)`` for the columns) from the thin SVD with numpy's rank cutoff.
    """
    return CompatMaps(*_compat(A, compat, random_state, maps=True))


def _compat(A, compat, random_state, *, maps):
    """``(X, Z, row_map, column_map)``; the pinv maps are formed only when ``maps`` is set."""
    A = check_data(A, "A", dtype=np.float64)
    n_rows, n_cols = A.shape
    compat = resolve_compat(compat, A.shape)
    rows_larger = n_cols >= n_rows  # x_i (dimension M) is the source to project
    if compat is None:
        return A, _columns(A), None, None
    if compat == "random":
        rng = np.random.default_rng(random_state)
        n = min(n_rows, n_cols)
        C = rng.standard_normal((max(n_rows, n_cols), n)) / np.sqrt(n)
    else:
        U, s, Vt = _svd(A)
    if compat == "pinv":
        r = _rank(s, A.shape)
        Ur, Vr = U[:, :r], Vt[:r].T
        # X and Z are the orthogonal projectors (see compat_data's Notes), not A @ C
        if rows_larger:
            C = (Vr / s[:r]) @ Ur.T if maps else None  # pinv(A), M x N
            return np.ascontiguousarray(Ur @ Ur.T), _columns(A), C, None
        C = (Ur / s[:r]) @ Vr.T if maps else None  # pinv(A^T), N x M
        return A, np.ascontiguousarray(Vr @ Vr.T), None, C
    if compat == "pca":
        # leading right (M x N) or left (N x M) singular vectors
        C = _flip(Vt.T) if rows_larger else _flip(U)
    if rows_larger:
        return np.ascontiguousarray(np.asarray(A @ C)), _columns(A), C, None
    return A, np.ascontiguousarray(np.asarray(A.T @ C)), None, C
