"""The CPU backend: fused Numba tile passes over a kernel matrix ``G_ij = k(x_i, z_j)``
that is never stored.

``G`` is cut into tiles of ``tr`` rows by ``tc`` columns. A pass computes one tile's cross
products ``X[rows] @ Z[cols].T`` (BLAS), turns them into kernel values in place while they
are in cache, and at once multiplies the tile into the outputs (BLAS again), so no
``N_chunk x M`` block of ``G`` is ever written. For dense points and the distance kernels
(rbf, SNE, t) the first product forms minus the squared distances themselves, from points
with two more coordinates (:func:`neg_distance_tile`), so a tile costs one sweep
(:func:`distance_values`: exponent and ``exp`` together) between its two BLAS calls.
Softmax runs SNE's code on the cross products themselves (:func:`exponent_tile`): minus
the distance is ``x . z`` there, and ``inv_g2`` is ``1 / gamma``. One
pass serves ``G @ Omega``, ``G.T @ Psi`` or both, and the set-up statistics (row shifts and
normalisers, centring sums, sum of squares).

Determinism. Tile sizes come from the shape only, never from the thread count, and every
output has one owner that sums its terms in a fixed order:

* :func:`pass_rows` (``G @ Omega`` alone) runs ``prange`` over row tiles; each owns its rows
  of the result and walks the column tiles in order.
* :func:`pass_cols` (``G.T @ Psi``, or both) runs ``prange`` over column tiles; each owns
  its rows of ``G.T @ Psi`` and walks the row tiles in order. ``G @ Omega`` is then written
  as one partial per column tile (``Ypart[t]``) for a band of rows, and the partials are
  summed over ``t`` in order (:func:`sum_parts`) before the next band: the buffer stays
  within a byte budget whatever N.

So results are bitwise independent of the number of Numba threads. BLAS must be limited to
one thread around these calls (the Numba threads are the parallel ones).

Precision. A tile is computed in the storage dtype from end to end: cross products (or
exponents), distances, ``exp`` (:func:`~..leaves.exp_inplace`) and the tile's products with
``Omega``/``Psi`` (cast to the storage dtype once per pass), so a float32 source runs SGEMM
and twice-as-wide vector code. Only within a tile (``tc`` terms for ``G @ Omega``, ``tr`` for
``G.T @ Psi``) does a sum run in float32; the tiles' results are added in float64, in a fixed
order, as are the set-up and centring sums. A float32 pass so agrees with the float64 pass
over the same stored points to about ``sqrt(tc) * 6e-8`` relative (measured: below 1e-6).

Point layouts (``Points.mode``): ``DENSE`` (``xd`` = X, ``zd`` = Z, both row-major; with a
distance kernel also ``za``, the rows ``[z_j, 1, |z_j|^2]``), ``X_SPARSE`` (X as CSR
``xp, xi, xv``; ``zd`` = Z.T, d x M), ``Z_SPARSE`` (``xd`` = X.T, d x N; Z as CSR
``zp, zi, zv``), ``BOTH_SPARSE`` (both CSR). Unused fields hold empty arrays of the same
types, so one compile per dtype serves every layout.
"""

from __future__ import annotations

import collections

import numba
import numpy as np
import scipy.sparse as sp
from numba import prange

from ..leaves import exp_inplace, like
from ..ordered import EXACT_FASTMATH, one_blas_thread
from .base import LINEAR, POLY, RBF, SNE, SOFTMAX, Backend, Params, T

__all__ = ["CpuBackend", "RBF", "SNE", "T", "LINEAR", "POLY", "SOFTMAX", "Params", "tile_shape"]

DENSE, X_SPARSE, Z_SPARSE, BOTH_SPARSE = 0, 1, 2, 3
#: points and their squared norms, in the layout of ``mode`` (see the module docstring)
Points = collections.namedtuple(
    "Points",
    ["mode", "n_features", "xd", "xp", "xi", "xv", "zd", "zp", "zi", "zv", "xx", "zz", "za"],
)

_njit = numba.njit(fastmath=EXACT_FASTMATH, cache=True)
_pjit = numba.njit(parallel=True, fastmath=EXACT_FASTMATH, cache=True)


# ----------------------------------------------------------------------- cross products
@_njit
def _cross_x_sparse(xp, xi, xv, zt, i0, j0, C):
    """``C = X[i0:] @ Z[j0:].T`` for CSR X and dense ``zt = Z.T`` (d x M): row axpys."""
    ni, nj = C.shape
    for ii in range(ni):
        row = C[ii]
        row[:] = 0.0
        for p in range(xp[i0 + ii], xp[i0 + ii + 1]):
            v = xv[p]
            zrow = zt[xi[p]]
            for jj in range(nj):
                row[jj] += v * zrow[j0 + jj]


@_njit
def _cross_z_sparse(xt, zp, zi, zv, i0, j0, C):
    """``C = X[i0:] @ Z[j0:].T`` for dense ``xt = X.T`` (d x N) and CSR Z: column axpys."""
    ni, nj = C.shape
    C[:] = 0.0
    for jj in range(nj):
        for p in range(zp[j0 + jj], zp[j0 + jj + 1]):
            v = zv[p]
            xrow = xt[zi[p]]
            for ii in range(ni):
                C[ii, jj] += v * xrow[i0 + ii]


@_njit
def _cross_both_sparse(xp, xi, xv, zp, zi, zv, i0, j0, C, w):
    """``C = X[i0:] @ Z[j0:].T`` for CSR X and Z: scatter x_i into the zeroed work row ``w``."""
    ni, nj = C.shape
    for ii in range(ni):
        a, b = xp[i0 + ii], xp[i0 + ii + 1]
        for p in range(a, b):
            w[xi[p]] = xv[p]
        for jj in range(nj):
            s = 0.0
            for q in range(zp[j0 + jj], zp[j0 + jj + 1]):
                s += zv[q] * w[zi[q]]
            C[ii, jj] = s
        for p in range(a, b):
            w[xi[p]] = 0.0


@_njit
def cross_tile(P, i0, i1, j0, j1, C, w):
    """Cross products ``C = X[i0:i1] @ Z[j0:j1].T`` in the storage dtype (``w``: work row)."""
    if P.mode == DENSE:
        np.dot(P.xd[i0:i1], P.zd[j0:j1].T, C)
    elif P.mode == X_SPARSE:
        _cross_x_sparse(P.xp, P.xi, P.xv, P.zd, i0, j0, C)
    elif P.mode == Z_SPARSE:
        _cross_z_sparse(P.xd, P.zp, P.zi, P.zv, i0, j0, C)
    else:
        _cross_both_sparse(P.xp, P.xi, P.xv, P.zp, P.zi, P.zv, i0, j0, C, w)


# ----------------------------------------------------------------------- distances
@_njit
def augmented_columns(Z, zz, za):
    """``za[j] = [z_j, 1, |z_j|^2]``: the column points of :func:`neg_distance_tile`."""
    m, d = Z.shape
    for j in range(m):
        for k in range(d):
            za[j, k] = Z[j, k]
        za[j, d] = 1.0
        za[j, d + 1] = zz[j]


@_njit
def _augmented_rows(xd, xx, i0, Xa):
    """``Xa[ii] = [2 x_i, -|x_i|^2, -1]`` for the rows ``i0:`` of a tile (exact copies)."""
    ni, d2 = Xa.shape
    d = d2 - 2
    for ii in range(ni):
        i = i0 + ii
        for k in range(d):
            Xa[ii, k] = 2.0 * xd[i, k]
        Xa[ii, d] = -xx[i]
        Xa[ii, d + 1] = -1.0


@_njit
def _neg_distances(row, xi, zz, j0):
    """``row <- 2 row - (|x_i|^2 + |z_j|^2)``: minus the squared distances, from the cross
    products ``row[jj] = x_i . z_j``, in place, in the dtype of ``row``."""
    for jj in range(row.shape[0]):
        row[jj] = (row[jj] + row[jj]) - (xi + zz[j0 + jj])


@_njit
def neg_distance_tile(P, i0, i1, j0, j1, xa, K, w):
    """``K = -|x_i - z_j|^2`` over rows ``i0:i1`` and columns ``j0:j1`` (unclamped).

    Dense points (``P.za``): one BLAS product of points with two more coordinates,
    ``[2 x_i, -|x_i|^2, -1] . [z_j, 1, |z_j|^2]`` (:func:`augmented_columns`; ``xa`` holds
    the tile's rows), so no sweep turns cross products into distances. The coordinates are
    exact copies and the product sums the same ``d + 2`` terms as that sweep (in BLAS's
    order), so its rounding has the same bound: ``(d + 2) eps`` of ``2 (|x_i|^2 + |z_j|^2)``.
    Sparse points: cross products (``w``: the scatter row), then that sweep. Cancellation
    can leave a value slightly above 0 where the distance is about 0: the users clamp at 0.
    """
    da = P.za.shape[1]
    if da > 0:
        Xa = xa[: (i1 - i0) * da].reshape((i1 - i0, da))
        _augmented_rows(P.xd, P.xx, i0, Xa)
        np.dot(Xa, P.za[j0:j1].T, K)
        return
    cross_tile(P, i0, i1, j0, j1, K, w)
    for ii in range(i1 - i0):
        _neg_distances(K[ii], P.xx[i0 + ii], P.zz, j0)


@_njit
def exponent_tile(P, prm, i0, i1, j0, j1, xa, K, w):
    """The tile's exponent inputs: minus the squared distances (:func:`neg_distance_tile`),
    or for softmax the cross products (:func:`cross_tile`), which play their part."""
    if prm.kind == SOFTMAX:
        cross_tile(P, i0, i1, j0, j1, K, w)
    else:
        neg_distance_tile(P, i0, i1, j0, j1, xa, K, w)


@_njit
def _row_max(row):
    """The largest entry of a non-empty row (a running maximum: exact in any order)."""
    mx = row[0]
    for jj in range(1, row.shape[0]):
        mx = max(mx, row[jj])
    return mx


# ----------------------------------------------------------------------- kernel values
@_njit
def _t_inplace(row, g, c):
    """``row <- c / (1 + max(-row, 0) g)``: "t" kernel values from minus the squared
    distances, in the dtype of ``row`` (``g = 1 / gamma^2`` and ``c`` of that dtype)."""
    zero = like(row, 0.0)
    one = like(row, 1.0)
    for jj in range(row.shape[0]):
        row[jj] = c * (one / (one - min(row[jj], zero) * g))


@_njit
def distance_values(K, prm, i0, shift, scale):
    """Kernel values from minus the squared distances in ``K`` (:func:`neg_distance_tile`),
    in place, in the dtype of ``K`` (the storage dtype).

    With ``d = max(-K, 0)``: exp kernels take ``exp((shift_i - d) / gamma^2)`` (the stored
    row shift: SNE's smallest distance of the row, so its nearest entry is exactly
    ``exp(0)``) times the row normaliser ``scale`` (SNE; rbf rows are not normalised); "t"
    takes ``scale_i / (1 + d / gamma^2)``. Softmax: ``K`` holds cross products and ``shift_i``
    minus the row's largest, so ``exp((K + shift_i) / gamma)`` times ``scale_i`` (SNE's code).
    """
    ni, nj = K.shape
    kind = prm.kind
    g = like(K, prm.inv_g2)
    for ii in range(ni):
        row = K[ii]
        c = like(K, scale[i0 + ii])
        if kind == T:
            _t_inplace(row, g, c)
            continue
        exp_inplace(row, like(K, shift[i0 + ii]), g)
        if kind != RBF:
            for jj in range(nj):
                row[jj] = row[jj] * c


@_njit
def poly_values(K, prm):
    """``K <- (K + coef0) ** degree`` in place: poly kernel values from cross products."""
    for ii in range(K.shape[0]):
        row = K[ii]
        for jj in range(K.shape[1]):
            row[jj] = (row[jj] + prm.coef0) ** prm.degree


@_njit
def _sum_and_squares(row):
    """``(sum(row), sum(row ** 2))`` from four interleaved partial sums, added in a fixed order.

    Four independent sums give the vector units work without licence to reassociate
    (:data:`EXACT_FASTMATH`), so every compiled copy adds in this order.
    """
    n = row.shape[0]
    n4 = n - n % 4
    s0 = s1 = s2 = s3 = 0.0
    q0 = q1 = q2 = q3 = 0.0
    for j in range(0, n4, 4):
        a, b, c, d = row[j], row[j + 1], row[j + 2], row[j + 3]
        s0 += a
        s1 += b
        s2 += c
        s3 += d
        q0 += a * a
        q1 += b * b
        q2 += c * c
        q3 += d * d
    for j in range(n4, n):
        s0 += row[j]
        q0 += row[j] * row[j]
    return (s0 + s1) + (s2 + s3), (q0 + q1) + (q2 + q3)


@_njit
def row_stats_tile(W, prm, i0, first, shift, rsum, rsq):
    """Update the running SNE/t row statistics of rows ``i0:`` with one tile.

    ``W`` holds minus the tile's squared distances (:func:`neg_distance_tile`) and is
    overwritten. ``shift`` is the running smallest distance (SNE), ``rsum`` the running sum
    of ``exp((shift - d) / gamma^2)`` and ``rsq`` that of its squares: the values of
    :func:`distance_values`, bit for bit. When a tile lowers the minimum, the sums so far
    are rescaled (the streaming log-sum-exp), so no value exceeds 1. "t" sums
    ``1 / (1 + d / gamma^2)`` without a shift. Softmax: ``W`` holds cross products
    (:func:`exponent_tile`) and ``shift`` is minus the running largest, unclamped.
    """
    ni = W.shape[0]
    g = like(W, prm.inv_g2)
    zero = like(W, 0.0)
    one = like(W, 1.0)
    for ii in range(ni):
        i = i0 + ii
        row = W[ii]
        if prm.kind == SNE or prm.kind == SOFTMAX:
            mloc = -_row_max(row)  # the row's smallest (softmax: minus largest x.z)
            if prm.kind == SNE:
                mloc = max(mloc, zero)  # the smallest clamped distance
            if first:
                shift[i] = mloc
            elif mloc < shift[i]:
                f = np.exp((mloc - shift[i]) * prm.inv_g2)
                rsum[i] *= f
                rsq[i] *= f * f
                shift[i] = mloc
            exp_inplace(row, like(W, shift[i]), g)
        else:
            _t_inplace(row, g, one)  # times 1: exact, so the values of distance_values
        s, q = _sum_and_squares(row)
        rsum[i] += s
        rsq[i] += q


@_njit
def center_sums_tile(K, j0, rowpart, colsum, colsq):
    """Row sums of a tile into ``rowpart``; column sums and squares added to the totals."""
    ni, nj = K.shape
    for ii in range(ni):
        row = K[ii]
        for jj in range(nj):
            colsum[j0 + jj] += row[jj]
            colsq[j0 + jj] += row[jj] * row[jj]
        rowpart[ii] = _sum_and_squares(row)[0]


# ----------------------------------------------------------------------- work buffers
@_njit
def _work_row(P):
    """Zeroed scatter row for two sparse inputs (length d), else a dummy."""
    return np.zeros(P.n_features if P.mode == BOTH_SPARSE else 1)


@_njit
def _add_into(dst, src):
    """``dst += src`` for 2-d arrays of one shape (a plain loop: no nested parfor)."""
    for i in range(src.shape[0]):
        for j in range(src.shape[1]):
            dst[i, j] += src[i, j]


@_njit
def _tile_buffers(P, tr, tc):
    """One thread's buffers for :func:`_kernel_block` on tiles of at most ``tr x tc``.

    ``(kbuf, xa, w)``: the flat tile buffer (storage dtype), room for a tile's augmented
    rows (:func:`neg_distance_tile`; empty without ``P.za``) and the sparse scatter row
    (:func:`_work_row`).
    """
    kbuf = np.empty(tr * tc, dtype=P.xx.dtype)
    xa = np.empty(tr * P.za.shape[1], dtype=P.xx.dtype)
    return kbuf, xa, _work_row(P)


@_njit
def _kernel_block(P, prm, i0, i1, j0, j1, shift, scale, bufs):
    """The kernel tile ``K = G[i0:i1, j0:j1]`` (uncentred), a view into ``bufs``' tile buffer.

    ``bufs`` comes from :func:`_tile_buffers`. Linear and poly: cross products (then
    :func:`poly_values`); the distance kernels and softmax: :func:`exponent_tile`, then
    :func:`distance_values`, in place.
    """
    kbuf, xa, w = bufs
    K = kbuf[: (i1 - i0) * (j1 - j0)].reshape((i1 - i0, j1 - j0))
    if prm.kind == LINEAR or prm.kind == POLY:
        cross_tile(P, i0, i1, j0, j1, K, w)
        if prm.kind == POLY:
            poly_values(K, prm)
    else:
        exponent_tile(P, prm, i0, i1, j0, j1, xa, K, w)
        distance_values(K, prm, i0, shift, scale)
    return K


# ----------------------------------------------------------------------- passes
@_pjit
def pass_rows(P, prm, a, b, tr, tc, shift, scale, Om, Y):
    """``Y[i - a] += G[i] @ Om`` for rows ``[a, b)``, parallel over row tiles of ``tr`` rows.

    Each row tile owns its rows of ``Y`` (zeroed by the caller) and adds the column tiles'
    products in order.
    """
    m = P.zz.shape[0]
    n_tiles = (b - a + tr - 1) // tr
    k = Om.shape[1]
    for t in prange(n_tiles):
        i0 = a + t * tr
        i1 = min(i0 + tr, b)
        ni = i1 - i0
        bufs = _tile_buffers(P, tr, tc)
        ybuf = np.empty(tr * k, dtype=Om.dtype)
        Yr = Y[i0 - a : i1 - a]
        for j0 in range(0, m, tc):
            j1 = min(j0 + tc, m)
            K = _kernel_block(P, prm, i0, i1, j0, j1, shift, scale, bufs)
            Yt = ybuf[: ni * k].reshape((ni, k))
            np.dot(K, Om[j0:j1], Yt)
            _add_into(Yr, Yt)


@_pjit
def pass_cols(P, prm, r0, r1, tr, tc, shift, scale, Psi, W, Om, Ypart, want_y):
    """``W += G[r0:r1].T @ Psi`` (``Psi`` holds rows ``r0:r1``), parallel over column tiles.

    Each column tile owns its rows of ``W`` and adds the row tiles' products in order. With
    ``want_y`` it also writes ``Ypart[t, :r1 - r0] = G[r0:r1, tile t] @ Om[tile t]``, one
    partial of ``G[r0:r1] @ Om`` per column tile, for :func:`sum_parts` to add in order.
    """
    m = P.zz.shape[0]
    n_tiles = (m + tc - 1) // tc
    kw = Psi.shape[1]
    for t in prange(n_tiles):
        j0 = t * tc
        j1 = min(j0 + tc, m)
        nj = j1 - j0
        bufs = _tile_buffers(P, tr, tc)
        wbuf = np.empty(tc * kw, dtype=Psi.dtype)
        for i0 in range(r0, r1, tr):
            i1 = min(i0 + tr, r1)
            K = _kernel_block(P, prm, i0, i1, j0, j1, shift, scale, bufs)
            Wt = wbuf[: nj * kw].reshape((nj, kw))
            np.dot(K.T, Psi[i0 - r0 : i1 - r0], Wt)
            _add_into(W[j0:j1], Wt)
            if want_y:
                np.dot(K, Om[j0:j1], Ypart[t][i0 - r0 : i1 - r0])


@_pjit
def sum_parts(parts, n, out):
    """``out[i] = parts[0, i] + parts[1, i] + ...`` (in this order) for ``i < n``.

    Parallel over output rows; ``parts`` may hold more rows than ``n``.
    """
    n_parts = parts.shape[0]
    k = parts.shape[2]
    for i in prange(n):
        for c in range(k):
            s = 0.0
            for t in range(n_parts):
                s += parts[t, i, c]
            out[i, c] = s


@_pjit
def row_stats(P, prm, a, b, tr, tc, shift, rsum, rsq):
    """Set-up statistics of the SNE/t rows ``[a, b)``, parallel over row tiles.

    Each row tile walks all column tiles in order (:func:`row_stats_tile`), so one pass of
    the cross products gives every row's shift, sum and sum of squares.
    """
    m = P.zz.shape[0]
    n_tiles = (b - a + tr - 1) // tr
    for t in prange(n_tiles):
        i0 = a + t * tr
        i1 = min(i0 + tr, b)
        kbuf, xa, w = _tile_buffers(P, tr, tc)
        for i in range(i0, i1):
            shift[i] = 0.0
            rsum[i] = 0.0
            rsq[i] = 0.0
        for j0 in range(0, m, tc):
            j1 = min(j0 + tc, m)
            W = kbuf[: (i1 - i0) * (j1 - j0)].reshape((i1 - i0, j1 - j0))
            exponent_tile(P, prm, i0, i1, j0, j1, xa, W, w)
            row_stats_tile(W, prm, i0, j0 == 0, shift, rsum, rsq)


@_pjit
def center_sums(P, prm, r0, r1, tr, tc, shift, scale, rowpart, colsum, colsq):
    """Centring sums of the rows ``[r0, r1)``, parallel over column tiles.

    ``rowpart[t, i - r0, 0]``: the row sums over column tile ``t`` (summed over ``t`` later);
    ``colsum[j]``, ``colsq[j]``: column sums and sums of squares, accumulated in row order.
    """
    m = P.zz.shape[0]
    n_tiles = (m + tc - 1) // tc
    for t in prange(n_tiles):
        j0 = t * tc
        j1 = min(j0 + tc, m)
        bufs = _tile_buffers(P, tr, tc)
        for i0 in range(r0, r1, tr):
            i1 = min(i0 + tr, r1)
            K = _kernel_block(P, prm, i0, i1, j0, j1, shift, scale, bufs)
            center_sums_tile(K, j0, rowpart[t, i0 - r0 : i1 - r0, 0], colsum, colsq)


@_pjit
def fill(P, prm, tr, tc, shift, scale, rmean, cmean, gmean, center, out):
    """``out = G`` (centred when ``center``) for all rows and columns of ``P``."""
    n, m = out.shape
    n_tiles = (n + tr - 1) // tr
    for t in prange(n_tiles):
        i0 = t * tr
        i1 = min(i0 + tr, n)
        bufs = _tile_buffers(P, tr, tc)
        for j0 in range(0, m, tc):
            j1 = min(j0 + tc, m)
            K = _kernel_block(P, prm, i0, i1, j0, j1, shift, scale, bufs)
            for ii in range(i1 - i0):
                i = i0 + ii
                ri = rmean[i] - gmean if center else 0.0
                for jj in range(j1 - j0):
                    v = K[ii, jj]
                    if center:
                        v = v - ri - cmean[j0 + jj]
                    out[i, j0 + jj] = v


# ----------------------------------------------------------------------- Python drivers
#: rows and columns of a kernel tile, at most. Larger tiles run BLAS closer to its peak and
#: call it less often. Pass / BLAS at N = M = 4000, d = 64, 40 columns, float32, 1 thread,
#: measured: 16-core Skylake-X, matmat 1.43 at 128 x 256, 1.28 at 256 x 256, 1.18 at
#: 256 x 1024; 2-core EPYC, 128 x 256 against 256 x 256 in one run, matmat 1.36 -> 1.08,
#: rmatmat 1.35 -> 1.08 (benchmarks/recorded/passes/README.md). A 256 x 1024 float64 tile
#: takes 2 MiB a thread.
TILE_ROWS = 256
TILE_COLS = 1024
#: narrower column tiles for small M, so that column-parallel passes still have about
#: COL_TILES tiles to share out; never below MIN_TILE_COLS (BLAS efficiency)
COL_TILES = 16
MIN_TILE_COLS = 64


def tile_shape(m, chunk_bytes):
    """``(tr, tc)``: rows and columns of a tile of G with M columns, from sizes only.

    The default is ``256 x min(1024, ~M/16)`` columns; a smaller ``chunk_bytes`` shrinks it,
    down to ``1 x 1``. The budget is counted at 16 bytes an entry, as when a tile took two
    buffers (cross products and kernel values; now one, in place), so the shapes, and with
    them the summation orders, stay those measured above.
    """
    tc = -(-m // COL_TILES)
    tc = min(TILE_COLS, m, -(-tc // MIN_TILE_COLS) * MIN_TILE_COLS)
    if 16 * tc > chunk_bytes:
        tc = max(1, chunk_bytes // 16)
    tr = max(1, min(TILE_ROWS, chunk_bytes // (16 * tc)))
    return tr, tc


def _band_rows(tr, n_tiles, k, budget):
    """Rows of one band of a two-sided pass: its partials (n_tiles, rows, k) fit ``budget``."""
    rows = budget // (8 * n_tiles * max(k, 1))
    return max(tr, rows // tr * tr)


def products(P, prm, tiles, a, b, shift, scale, Om=None, Psi=None, budget=32 << 20):
    """Uncentred ``(G[a:b] @ Om, G[a:b].T @ Psi)`` from one pass (None where not asked).

    ``Om`` (M, k) and ``Psi`` (b - a, k) are C-contiguous float64; so are the results. The
    tiles multiply copies of them in the storage dtype (see the module docstring).
    """
    tr, tc = tiles
    m = P.zz.shape[0]
    dtype = P.xx.dtype
    if Om is not None:
        Om = np.ascontiguousarray(Om, dtype=dtype)
    if Psi is not None:
        Psi = np.ascontiguousarray(Psi, dtype=dtype)
    with one_blas_thread():
        if Psi is None:
            Y = np.zeros((b - a, Om.shape[1]))
            pass_rows(P, prm, a, b, tr, tc, shift, scale, Om, Y)
            return Y, None
        W = np.zeros((m, Psi.shape[1]))
        if Om is None:
            pass_cols(
                P,
                prm,
                a,
                b,
                tr,
                tc,
                shift,
                scale,
                Psi,
                W,
                np.empty((0, 0), dtype),
                np.empty((0, 0, 0), dtype),
                False,
            )
            return None, W
        k = Om.shape[1]
        n_tiles = -(-m // tc)
        band = max(1, min(b - a, _band_rows(tr, n_tiles, k, budget)))
        Ypart = np.empty((n_tiles, band, k), dtype=dtype)
        Y = np.empty((b - a, k))
        for r0 in range(a, b, band):
            r1 = min(r0 + band, b)
            pass_cols(
                P, prm, r0, r1, tr, tc, shift, scale, Psi[r0 - a : r1 - a], W, Om, Ypart, True
            )
            sum_parts(Ypart, r1 - r0, Y[r0 - a : r1 - a])
    return Y, W


def _center_sums(P, prm, tiles, a, b, shift, scale, budget):
    """Row sums (b - a), column sums and column sums of squares (M) of rows ``[a, b)``."""
    tr, tc = tiles
    m = P.zz.shape[0]
    n_tiles = -(-m // tc)
    band = max(1, min(b - a, _band_rows(tr, n_tiles, 1, budget)))
    rowpart = np.empty((n_tiles, band, 1))
    rowsum = np.empty((b - a, 1))
    colsum = np.zeros(m)
    colsq = np.zeros(m)
    for r0 in range(a, b, band):
        r1 = min(r0 + band, b)
        center_sums(P, prm, r0, r1, tr, tc, shift, scale, rowpart, colsum, colsq)
        sum_parts(rowpart, r1 - r0, rowsum[r0 - a : r1 - a])
    return rowsum[:, 0], colsum, colsq


def setup_rows(P, prm, tiles, a, b, normalised, center, budget=32 << 20):
    """Set-up statistics of rows ``[a, b)`` (the ``setup_rows`` hook of :mod:`.base`).

    ``normalised`` (SNE, t): one pass for each row's shift, normaliser and sum of squares.
    ``center``: one more pass (after the first, which it needs) for the row sums, column
    sums and sum of squares of the normalised kernel.
    """
    n = P.xx.shape[0]
    shift = np.zeros(n)
    scale = np.ones(n)
    part = {"rows": (a, b), "rowsum": None, "colsum": None, "sumsq": None}
    with one_blas_thread():
        if normalised:
            rsum = np.zeros(n)
            rsq = np.zeros(n)
            tr, tc = tiles
            row_stats(P, prm, a, b, tr, tc, shift, rsum, rsq)
            scale[a:b] = 1.0 / rsum[a:b]
            part["sumsq"] = float(np.sum(rsq[a:b] * scale[a:b] ** 2))
        if center:
            rowsum, colsum, colsq = _center_sums(P, prm, tiles, a, b, shift, scale, budget)
            part.update(rowsum=rowsum, colsum=colsum, sumsq=float(np.sum(colsq)))
    part.update(shift=shift[a:b].copy(), scale=scale[a:b].copy())
    return part


def fill_block(P, prm, tiles, shift, scale, rmean, cmean, gmean, center, dtype):
    """All of ``G`` (centred when ``center``) over the points of ``P``, as ``dtype``."""
    out = np.empty((P.xx.shape[0], P.zz.shape[0]), dtype=dtype)
    with one_blas_thread():
        fill(P, prm, tiles[0], tiles[1], shift, scale, rmean, cmean, gmean, center, out)
    return out


# ----------------------------------------------------------------------- the backend
_EMPTY_IDX = np.empty(0, dtype=np.int64)


def _csr_arrays(V, dtype):
    """``(indptr, indices, data)`` of a CSR matrix as int64, int64 and ``dtype`` arrays."""
    return (
        V.indptr.astype(np.int64, copy=False),
        V.indices.astype(np.int64, copy=False),
        V.data.astype(dtype, copy=False),
    )


class CpuBackend(Backend):
    """Fused Numba tile passes in this process (the reference backend).

    Stores the points in the layout of :data:`Points`: a dense side is kept transposed
    when the other side is sparse (axpy-friendly). See :mod:`..base` for the hooks.
    """

    name = "cpu"

    def __init__(self, X, Z, xx, zz, params, chunk_bytes):
        super().__init__(X, Z, xx, zz, params, chunk_bytes)
        xsp, zsp = sp.issparse(X), sp.issparse(Z)
        self.mode = BOTH_SPARSE if xsp and zsp else X_SPARSE if xsp else Z_SPARSE if zsp else DENSE
        self._X = np.ascontiguousarray(X.T) if self.mode == Z_SPARSE else X
        self._Z = np.ascontiguousarray(Z.T) if self.mode == X_SPARSE else Z
        self.tiles = tile_shape(self.shape[1], chunk_bytes)
        #: dense points and a distance kernel: the tiles' GEMM takes augmented columns
        self._augmented = self.mode == DENSE and params.kind in (RBF, SNE, T)
        self._za = None

    def _take_x(self, rows):
        """Stored row points ``X[rows]`` (an index array or a slice)."""
        if self.mode == Z_SPARSE:
            return np.ascontiguousarray(self._X[:, rows])
        return self._X[rows]

    def _take_z(self, cols):
        if self.mode == X_SPARSE:
            return np.ascontiguousarray(self._Z[:, cols])
        return self._Z[cols]

    def _take_za(self, cols):
        """Augmented columns ``[z_j, 1, |z_j|^2]`` (:func:`neg_distance_tile`) of ``cols``,
        or an empty array where the tiles take none.

        Made once, on first use, and kept (``M (d + 2)`` values beside Z): a block of one
        row then costs one product, not a copy of all the columns first.
        """
        if not self._augmented:
            return np.empty((0, 0), dtype=self.dtype)
        if self._za is None:
            self._za = np.empty((self._Z.shape[0], self._Z.shape[1] + 2), dtype=self.dtype)
            augmented_columns(self._Z, self.zz, self._za)
        return self._za[cols]

    def points(self, X=None, Z=None, xx=None, zz=None, za=None):
        """The Numba view (:data:`Points`) of all points, or of the given subsets."""
        X = self._X if X is None else X
        Z = self._Z if Z is None else Z
        xx = self.xx if xx is None else xx
        zz = self.zz if zz is None else zz
        za = self._take_za(slice(None)) if za is None else za
        empty2 = np.empty((0, 0), dtype=self.dtype)
        empty = (_EMPTY_IDX, _EMPTY_IDX, np.empty(0, self.dtype))
        x = _csr_arrays(X, self.dtype) if sp.issparse(X) else empty
        z = _csr_arrays(Z, self.dtype) if sp.issparse(Z) else empty
        xd = empty2 if sp.issparse(X) else X
        zd = empty2 if sp.issparse(Z) else Z
        return Points(self.mode, self.n_features, xd, *x, zd, *z, xx, zz, za)

    def setup_rows(self, a, b, normalised, center):
        return setup_rows(
            self.points(), self.params, self.tiles, a, b, normalised, center, self.chunk_bytes
        )

    def setup_of_rows(self, idx):
        """``(shift, scale)`` of the normalised rows ``idx`` (SNE, t) from their own entries.

        Each row's shift and normaliser depend on that row alone (its M kernel values): the
        set-up statistics of :func:`setup_rows` on the points of those rows, ``len(idx) M``
        entries, never the whole pass.
        """
        P = self.points(self._take_x(idx), xx=self.xx[idx])
        part = setup_rows(P, self.params, self.tiles, 0, len(idx), True, False, self.chunk_bytes)
        return part["shift"], part["scale"]

    def products(self, a, b, shift, scale, Omega, Psi):
        return products(
            self.points(), self.params, self.tiles, a, b, shift, scale, Omega, Psi, self.chunk_bytes
        )

    def block(self, ridx, cidx, shift, scale, rmean, cmean, gmean, center):
        rows = slice(None) if ridx is None else ridx
        cols = slice(None) if cidx is None else cidx
        za = self._take_za(cols)
        Z = self._Z[:0] if self._augmented else self._take_z(cols)  # the tiles read za alone
        P = self.points(self._take_x(rows), Z, self.xx[rows], self.zz[cols], za)
        return fill_block(
            P,
            self.params,
            self.tiles,
            shift[rows],
            scale[rows],
            rmean[rows],
            cmean[cols],
            gmean,
            center,
            self.dtype,
        )
