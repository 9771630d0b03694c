"""Adaptive randomized pivoting (ARP) on a one-pass sketch: rows and columns that span G.

Rows are pivoted on an orthonormal basis ``Q`` of ``G Omega`` and columns on one of
``G^T Psi``, both from ONE pass (``sketch``). ARP (Cortinovis & Kressner) picks row ``i``
with probability proportional to the squared norm of row ``i`` of ``Q`` after projecting out
the rows already picked (randomly pivoted QR on ``Q^T``); its expected interpolation error is
within a factor ``(k + 1)`` of the best rank-k error, and it needs no norm pass: a rare
cluster that the sketch resolves has rows of large leverage and is picked early. The
proposals are drawn in blocks and thinned by rejection (Epperly 2025), which gives the same
distribution as picking one row at a time.

References
----------
A. Cortinovis, D. Kressner. Adaptive randomized pivoting for column subset selection,
DEIM, and low-rank approximation. arXiv 2412.13992, 2024.

E. N. Epperly. Make the most of what you have: resource-efficient randomized algorithms for
matrix computations. arXiv 2510.02513, 2025 (rejection-sampling ARP; MATLAB code in the
repository eepperly/Adaptive-Randomized-Pivoting).
"""

from __future__ import annotations

import numpy as np
from scipy import linalg

from ._selection import Selection
from .rpcholesky import _rejection_cholesky

__all__ = ["select_arp", "arp_pivots"]

_MIN_BLOCK = 8


def _basis(Y):
    """Orthonormal basis of ``range(Y)`` with its numerical rank (pinv-style floor)."""
    # a QR, then the SVD of its small triangle: the rank at a fraction of a tall SVD's cost
    Q, R = linalg.qr(Y, mode="economic", check_finite=False)
    a, s, _ = linalg.svd(R, check_finite=False)
    if s.size == 0 or s[0] == 0:
        return Q[:, :0]
    keep = int(np.count_nonzero(s > s[0] * max(Y.shape) * np.finfo(np.float64).eps))
    return Q @ a[:, :keep]


def arp_pivots(Q, k, rng):
    """``k`` distinct rows of ``Q`` (N x r, orthonormal columns) by rejection-sampling ARP.

    The first ``min(k, r)`` rows are randomly pivoted QR pivots of ``Q^T``: each is drawn
    with probability proportional to its residual squared norm (``|q_i|^2`` minus its
    projection on the rows already chosen), proposals in blocks and thinned by the
    Cholesky rejection step. Rows beyond the rank ``r`` (their residual is zero) are drawn
    uniformly from the rest. Returns sorted int64 indices.
    """
    N, r = Q.shape
    k = min(k, N)
    u = np.einsum("ij,ij->i", Q, Q)
    floor = 64 * np.finfo(np.float64).eps * max(float(u.max(initial=0.0)), 1e-300)
    W = np.zeros((r, 0))
    chosen = []
    block = max(_MIN_BLOCK, -(-min(k, r) // 10))
    target = min(k, r)
    stalls = 0
    while len(chosen) < target and stalls < 50:
        total = float(u.sum())
        if not total > floor:
            break
        b = min(block, 2 * (target - len(chosen)) + _MIN_BLOCK)
        prop = rng.choice(N, size=b, replace=True, p=u / total)
        C = Q[prop] - (Q[prop] @ W) @ W.T
        acc = _rejection_cholesky(C @ C.T, u[prop], rng, floor)
        if acc.size == 0:
            stalls += 1
            continue
        acc = acc[: target - len(chosen)]
        chosen.extend(prop[acc].tolist())
        Cn = C[acc].T  # r x s, the new rows' residuals
        for _ in range(2):  # twice is orthogonal to working precision
            Cn -= W @ (W.T @ Cn)
        Wn = linalg.qr(Cn, mode="economic", check_finite=False)[0]
        W = np.hstack([W, Wn])
        u -= np.einsum("ij,ij->i", Q @ Wn, Q @ Wn)
        np.maximum(u, 0, out=u)
        u[prop[acc]] = 0
        block = max(_MIN_BLOCK, min(2 * block, -(-3 * acc.size // 2) + _MIN_BLOCK))
    idx = np.asarray(chosen, dtype=np.int64)
    if idx.size < k:  # beyond the numerical rank every choice is as good: uniform
        rest = np.setdiff1d(np.arange(N), idx)
        idx = np.concatenate([idx, rng.choice(rest, size=k - idx.size, replace=False)])
    return np.sort(idx)


def select_arp(src, n_rows, n_cols, *, rng, rank=None):
    """Rows and columns of ``G`` by ARP on the one-pass sketch ``(G Omega, G^T Psi)``.

    Parameters
    ----------
    src : matrix source
        ``sketch(Omega, Psi)`` is used when present (one pass); else ``matmat`` and
        ``rmatmat`` (two passes).
    n_rows, n_cols : int
        Rows and columns to choose; ``Omega`` has ``n_rows`` columns and ``Psi``
        ``n_cols``, so each basis has (up to its numerical rank) as many directions as
        indices are chosen.
    rng : numpy.random.Generator
    rank : int, optional
        Unused (the sketch widths follow ``n_rows``/``n_cols``); kept for the common
        signature.

    Returns
    -------
    Selection
        ``entries_read`` = ``N M`` per pass, ``n_passes`` 1 (or 2 without ``sketch``),
        ``rows``/``cols`` None (ARP reads no row or column itself), ``info`` with
        ``sketch_rank_rows``/``sketch_rank_cols`` (numerical ranks of the two sketches).
    """
    N, M = (int(v) for v in src.shape)
    Omega = rng.standard_normal((M, min(n_rows, M)))
    Psi = rng.standard_normal((N, min(n_cols, N)))
    if hasattr(src, "sketch"):
        Y, W = src.sketch(Omega, Psi)
        passes = 1
    else:
        Y, W = src.matmat(Omega), src.rmatmat(Psi)
        passes = 2
    Qr = _basis(np.asarray(Y, dtype=np.float64))
    Qc = _basis(np.asarray(W, dtype=np.float64))
    rows = arp_pivots(Qr, n_rows, rng)
    cols = arp_pivots(Qc, n_cols, rng)
    return Selection(
        row_indices=rows,
        col_indices=cols,
        entries_read=passes * N * M,
        n_passes=float(passes),
        info={"sketch_rank_rows": int(Qr.shape[1]), "sketch_rank_cols": int(Qc.shape[1])},
    )
