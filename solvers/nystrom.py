"""Nyström methods for the top singular triplets: the classic symmetric one and the asymmetric one.

``sym_nystrom`` applies the classic Nyström eigen-approximation (Williams & Seeger 2001) to the
two Gram matrices ``G G^T`` and ``G^T G``. ``asym_nystrom`` is the asymmetric Nyström method of
Tao et al. (2023): it reads only a sample of rows and columns of ``G`` itself.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
from scipy import linalg
from scipy.optimize import linear_sum_assignment

from ._result import SVDResult, finish
from ._validation import check_args

__all__ = ["sym_nystrom", "asym_nystrom"]

_NORM_CHUNK_ENTRIES = 1 << 22  # entries per streamed block when norms must be computed


# ---------------------------------------------------------------------------------------------
# sampling
# ---------------------------------------------------------------------------------------------


def _squared_norms(src):
    """Squared row and column norms of ``G`` (needed by ``sampling="norm"``).

    A source that knows them (``row_norms_sq()``/``col_norms_sq()``, e.g. the dense and sparse
    adapters) answers directly. Otherwise every row is streamed once through ``rows(idx)`` in
    chunks: this reads all N * M entries (counted in ``n_block_entries``), which is as much as
    forming ``G`` and defeats the purpose of Nyström on a lazy source; prefer uniform sampling
    there or a source that provides the norms.
    """
    base = src.source
    if hasattr(base, "row_norms_sq") and hasattr(base, "col_norms_sq"):
        return np.asarray(base.row_norms_sq(), float), np.asarray(base.col_norms_sq(), float)
    N, M = src.shape
    row = np.zeros(N)
    col = np.zeros(M)
    step = max(1, _NORM_CHUNK_ENTRIES // M)
    for start in range(0, N, step):
        idx = np.arange(start, min(N, start + step))
        sq = np.square(src.rows(idx), dtype=np.float64)
        row[idx] = sq.sum(axis=1)
        col += sq.sum(axis=0)
    return row, col


def _sample(n_total, n, weights, rng):
    """``n`` distinct sorted indices in ``range(n_total)``, uniform or with ``weights``.

    Weighted draws are successive sampling without replacement (``Generator.choice`` with
    ``p``). Indices of zero weight (zero rows/columns) are only drawn, uniformly, when fewer
    than ``n`` indices have positive weight.
    """
    if weights is None:
        idx = rng.choice(n_total, size=n, replace=False)
    else:
        positive = np.flatnonzero(weights > 0)
        if positive.size >= n:
            p = weights / weights.sum()
            idx = rng.choice(n_total, size=n, replace=False, p=p)
        else:
            zero = np.flatnonzero(weights <= 0)
            fill = rng.choice(zero, size=n - positive.size, replace=False)
            idx = np.concatenate([positive, fill])
    return np.sort(idx)


def _floor(values, size, dtype):
    """Number of values kept by a pinv-style floor: ``v > v_max * size * eps``."""
    if values.size == 0 or values[0] <= 0:
        return 0
    return int(np.count_nonzero(values > values[0] * size * np.finfo(dtype).eps))


def _pad(E, rank, rng):
    """Append ``rank - k`` random unit columns orthogonal to the k columns of ``E``."""
    k = E.shape[1]
    Q = np.linalg.qr(E)[0]
    X = rng.standard_normal((E.shape[0], rank - k)).astype(E.dtype)
    for _ in range(2):  # classical Gram-Schmidt twice is orthogonal to working precision
        X -= Q @ (Q.T @ X)
        X = np.linalg.qr(X)[0]
    return np.hstack([E, X])


def _pad_triplets(U, s, V, rank, rng, what):
    """Fill a rank-deficient answer with zero singular values (and warn)."""
    k = s.size
    warnings.warn(
        f"{what} has numerical rank {k} < rank={rank}; the remaining {rank - k} triplets have "
        "singular value 0 and arbitrary orthonormal vectors (sample more, or lower rank)",
        RuntimeWarning,
        stacklevel=3,
    )
    return _pad(U, rank, rng), np.concatenate([s, np.zeros(rank - k, s.dtype)]), _pad(V, rank, rng)


def _orth_rank_r(E, F, d):
    """Exact SVD of ``E diag(d) F^T`` (E: N x k, F: M x k) through QR and a k x k core."""
    Qe, Re = linalg.qr(E, mode="economic")
    Qf, Rf = linalg.qr(F, mode="economic")
    a, s, bt = linalg.svd((Re * d) @ Rf.T)
    return Qe @ a, s, Qf @ bt.T


def _normalized(E):
    n = np.linalg.norm(E, axis=0)
    n[n == 0] = 1
    return E / n


def _finish(U, s, V, method, src, t0, dtype, opts, sizes, ridx, cidx, extra, numerical_rank):
    """:func:`finish` with the info both Nyström methods report (effort = ``n_samples``).

    ``info`` keys, in order: the common ones, ``sampling``, ``orthogonalize``, ``core``,
    ``sizes``, ``row_indices``, ``col_indices``, ``extra``, ``numerical_rank``.
    """
    result: SVDResult = finish(
        U,
        s,
        V,
        method=method,
        effort=opts["n_samples"],
        tracker=src,
        t0=t0,
        dtype=dtype,
        sampling=opts["sampling"],
        orthogonalize=opts["orthogonalize"],
        core=opts["core"],
        **sizes,
        row_indices=ridx,
        col_indices=cidx,
        **extra,
        numerical_rank=numerical_rank,
    )
    return result


# ---------------------------------------------------------------------------------------------
# classic (symmetric) Nyström on the Gram matrices
# ---------------------------------------------------------------------------------------------


def _gram_nystrom(C, idx, n_total, rank, orthogonalize, core, dtype):
    """Nyström eigen-approximation of a PSD matrix K from its sampled columns C = K[:, idx].

    Returns eigenvectors (n_total x k), eigenvalues (k,) with k = min(rank, kept) and the
    number ``kept`` of eigenvalues of W that survive the floor.
    Raw (Williams & Seeger): W = K[idx, idx] = Q diag(lam) Q^T, eigenvalues (n_total / n) lam,
    eigenvectors C Q diag(1/lam) normalised. Orthogonalised: the exact eigen-decomposition of
    the Nyström approximation C W_r^+ C^T = E diag(lam_r) E^T with E = C Q_r / lam_r
    (``core="rank"``), or of C W^+ C^T truncated to rank (``core="full"``).
    """
    n = idx.size
    W = C[idx]
    lam, Q = linalg.eigh((W + W.T) / 2)
    lam, Q = lam[::-1], Q[:, ::-1]
    kept = _floor(lam, n, dtype)
    k = kept if (orthogonalize and core == "full") else min(rank, kept)
    E = C @ (Q[:, :k] / lam[:k])
    if orthogonalize:
        U, vals, _ = _orth_rank_r(E, E, lam[:k])
        U, vals = U[:, :rank], vals[:rank]
    else:
        U, vals = _normalized(E), lam[:k] * (n_total / n)
    return U, np.maximum(vals, 0), kept


def sym_nystrom(
    G,
    rank,
    *,
    random_state=None,
    n_samples=None,
    sampling="uniform",
    orthogonalize=True,
    core="rank",
):
    """Classic Nyström (Williams & Seeger) applied to ``G G^T`` for U and ``G^T G`` for V.

    Parameters
    ----------
    G : ndarray, sparse matrix, LinearOperator or matrix source of shape (N, M)
    rank : int
        Number of triplets, ``1 <= rank <= n_samples``.
    random_state : None, int or numpy.random.Generator, default=None
        Seeds the two samples.
    n_samples : int
        Columns sampled from each Gram matrix, ``rank <= n_samples <= max(N, M)`` (required);
        ``G G^T`` (N x N) gets ``min(n_samples, N)`` and ``G^T G`` (M x M)
        ``min(n_samples, M)``, so ``n_samples = max(N, M)`` samples both completely and the
        answer is exact.
    sampling : {"uniform", "norm"}, default="uniform"
        Uniform without replacement, or by the Gram diagonals (squared row norms of ``G`` for
        ``G G^T``, squared column norms for ``G^T G``); see :func:`asym_nystrom` for the cost of
        the norms on lazy sources.
    orthogonalize : bool, default=True
        True returns the exact eigenvectors of the Nyström approximations (orthonormal);
        False returns the textbook extension ``C Q diag(1/lambda)`` normalised, with
        eigenvalues ``(N/n) lambda``.
    core : {"rank", "full"}, default="rank"
        With ``orthogonalize=True``: approximate ``K`` by ``C W_r^+ C^T`` (the top-r part of
        the core: same subspace as the textbook extension) or by ``C W^+ C^T`` (the whole
        floored pseudo-inverse, then truncated to rank: exact as soon as the sample spans
        ``K``'s range, usually much more accurate). See :func:`asym_nystrom`.

    Returns
    -------
    SVDResult
        ``s`` from the ``G G^T`` side: ``sqrt`` of its eigenvalue estimates.
        ``info["effort"]`` is ``n_samples``; ``info`` also has ``row_indices``,
        ``col_indices``, ``s_v`` (the estimates from the ``G^T G`` side), ``s_ritz``
        (``u_i^T G v_i``) and ``numerical_rank``.

    Notes
    -----
    Columns of ``K = G G^T`` are formed as ``K[:, idx] = G @ G[idx, :].T`` (``rows`` then
    ``matmat``), never ``K`` itself; likewise ``G^T G``. Cost (for n <= min(N, M)): ``n (N + M)``
    entries read, ``2 n + rank`` products with ``G`` or ``G.T`` (``O(N M n)`` flops, the same
    order as a randomized SVD with ``n`` test vectors) and ``O((N + M) n^2 + n^3)`` dense
    work. Per sample it is far dearer than :func:`asym_nystrom`, which never multiplies.
    U and V come from two independent problems: they are paired by a maximum-weight assignment
    on ``|U^T G V|`` (robust when values are close) and V is signed so that
    ``u_i^T G v_i > 0``.

    References
    ----------
    C. K. I. Williams, M. Seeger, "Using the Nyström method to speed up kernel machines",
    NIPS 13, 2001.
    """
    t0 = time.perf_counter()
    chk = check_args(
        "sym_nystrom",
        G,
        rank,
        random_state,
        n_samples=n_samples,
        sampling=sampling,
        orthogonalize=orthogonalize,
        core=core,
    )
    opts, rank, src, dtype, rng = chk.options, chk.rank, chk.source, chk.dtype, chk.rng
    N, M = src.shape
    n = opts["n_samples"]
    rw = cw = None
    if opts["sampling"] == "norm":
        rw, cw = _squared_norms(src)
    ridx = _sample(N, min(n, N), rw, rng)
    cidx = _sample(M, min(n, M), cw, rng)

    R = np.asarray(src.rows(ridx), dtype=dtype)  # G[ridx, :]
    CU = np.asarray(src.matmat(np.ascontiguousarray(R.T)), dtype=dtype)  # (G G^T)[:, ridx]
    Cc = np.asarray(src.cols(cidx), dtype=dtype)  # G[:, cidx]
    CV = np.asarray(src.rmatmat(Cc), dtype=dtype)  # (G^T G)[:, cidx]
    how = (opts["orthogonalize"], opts["core"], dtype)
    U, lu, kept_u = _gram_nystrom(CU, ridx, N, rank, *how)
    V, lv, kept_v = _gram_nystrom(CV, cidx, M, rank, *how)
    k = min(U.shape[1], V.shape[1])
    U, lu, V, lv = U[:, :k], lu[:k], V[:, :k], lv[:k]

    # Pair the two eigen-problems: u_i should match the v_j maximising |u_i^T G v_j|.
    P = U.T @ np.asarray(src.matmat(V), dtype=dtype)
    rows_, perm = linear_sum_assignment(-np.abs(P))
    V, lv = V[:, perm], lv[perm]
    ritz = P[rows_, perm]
    sign = np.where(ritz < 0, -1, 1).astype(dtype)
    V = V * sign
    s = np.sqrt(lu)
    if k < rank:
        U, s, V = _pad_triplets(U, s, V, rank, rng, "A sampled Gram block")
        lv, ritz = np.pad(lv, (0, rank - k)), np.pad(ritz, (0, rank - k))
    order = np.argsort(-s, kind="stable")  # the order finish() applies
    return _finish(
        U, s, V, "sym_nystrom", src, t0, dtype, opts, {"n_samples": n}, ridx, cidx,
        {"s_v": np.sqrt(lv)[order], "s_ritz": np.abs(ritz)[order]}, min(kept_u, kept_v),
    )


# ---------------------------------------------------------------------------------------------
# asymmetric Nyström (the paper's method)
# ---------------------------------------------------------------------------------------------


def asym_nystrom(
    G,
    rank,
    *,
    random_state=None,
    n_samples=None,
    n_rows=None,
    sampling="uniform",
    row_indices=None,
    col_indices=None,
    orthogonalize=True,
    core="rank",
):
    """Asymmetric Nyström method (Tao et al. 2023) for the top singular triplets of ``G``.

    Parameters
    ----------
    G : ndarray, sparse matrix, LinearOperator or matrix source of shape (N, M)
        Only ``rows(idx)`` and ``cols(idx)`` are used: ``G`` is never multiplied.
    rank : int
        Number of triplets, ``1 <= rank <= min(n_rows, n_samples)``.
    random_state : None, int or numpy.random.Generator, default=None
        Seeds the sample (unused when both index sets are given).
    n_samples : int or None
        Number m of sampled columns, ``<= M``; required unless ``col_indices`` is given.
    n_rows : int or None, default=None
        Number n of sampled rows, ``<= N``; None means ``min(n_samples, N)``.
    sampling : {"uniform", "norm"}, default="uniform"
        Uniform without replacement, or without replacement with probabilities proportional to
        squared row/column norms. The norms come from the source when it provides
        ``row_norms_sq()``/``col_norms_sq()`` (ndarray and sparse inputs do); otherwise every
        row is streamed once through ``rows(idx)``, reading all N * M entries (counted in
        ``info["n_block_entries"]``).
    row_indices, col_indices : array_like of int or None, default=None
        The sample itself (distinct indices); overrides sampling for that side.
    orthogonalize : bool, default=True
        Return the exact SVD of a Nyström approximation (True) or the paper's raw
        extension (False). See Notes.
    core : {"rank", "full"}, default="rank"
        Which Nyström approximation ``orthogonalize=True`` decomposes: ``C W_r^+ R`` (the
        block's top-r part, the subspace of the paper's extension) or ``C W^+ R`` (the whole
        floored pseudo-inverse, truncated to rank afterwards). Needs ``orthogonalize=True``.

    Returns
    -------
    SVDResult
        ``info["effort"]`` is m; ``info`` also has ``n_rows``, ``n_samples``,
        ``row_indices``, ``col_indices``, ``scale`` (``sqrt(N M / (n m))``),
        ``block_singular_values``, ``numerical_rank`` (block singular values kept by the
        floor), ``orthogonalize`` and ``core``.

    Notes
    -----
    With R = G[rows, :] (n x M), C = G[:, cols] (N x m) and the block
    W = G[rows][:, cols] = U_s S_s V_s^T, eq. (10) of the paper extends the block's singular
    vectors to the whole matrix::

        U_ext = C V_s S_s^-1,    V_ext = R^T U_s S_s^-1.

    Tiny block singular values (``<= s_max * max(n, m) * eps``, the ``pinv`` rule) are dropped
    before inverting.

    ``orthogonalize=False`` returns the paper's raw extension with unit-norm columns (not
    orthogonal in general) and singular values ``sqrt(N M / (n m)) * S_s``, the scaling that
    follows from eq. (10) under uniform sampling; for a symmetric G with the same row and
    column sample it is the classic Nyström factor N / n.

    ``orthogonalize=True`` returns the exact SVD of the rank-r Nyström (CUR) approximation
    ``G_r = C W_r^+ R``, where ``W_r^+ = V_r S_r^-1 U_r^T`` inverts the block's top r part.
    Since ``G_r = U_ext diag(S_r) V_ext^T``, thin QR factorisations ``U_ext = Q_U R_U`` and
    ``V_ext = Q_V R_V`` give ``G_r = Q_U (R_U S_r R_V^T) Q_V^T``; the SVD
    ``R_U S_r R_V^T = A S B^T`` of the r x r core yields ``U = Q_U A``, ``V = Q_V B``
    (orthonormal, spanning the same subspaces as the raw extension) and singular values
    ``S``, the singular values of ``G_r`` (no sampling factor is needed, ``G_r`` estimates
    ``G`` itself). With the full sample (n = N, m = M) ``G_r`` is the rank-r truncation of
    ``G`` and the answer is exact.

    ``core="full"`` applies the same construction to all k block triplets that survive the
    floor: ``C W^+ R = U_ext diag(S_s) V_ext^T`` (k columns), QR of both, SVD of the k x k
    core, top ``rank`` triplets kept. This is the usual CUR/Nyström approximation; it is
    exact whenever ``rank(W) = rank(G)`` (the sample spans G's row and column spaces), which
    ``C W_r^+ R`` is not for ``r < rank(G)``, and on matrices with fast-decaying spectra it
    is typically far more accurate at the same sample size. On flat spectra it can be much
    worse: ``W^+`` amplifies the block's small singular values and ``C W^+ R`` may
    overestimate ``s`` badly (seen: 14 s_1 on a 300 x 200 SNE kernel of Gaussian data with
    m = 100). It is not the paper's method.

    Cost: ``n M + N m`` entries read (``info["n_block_entries"]``), no products with ``G``,
    an n x m SVD, ``O((N + M) m k)`` for the extension (k = r, or the kept count with
    ``core="full"``) and ``O((N + M) k^2)`` for the orthogonalisation.

    References
    ----------
    Q. Tao, F. Tonin, A. Lambert, Y. Chen, P. Patrinos, J. A. K. Suykens, "Nonlinear SVD with
    asymmetric kernels: feature learning and asymmetric Nyström method", NeurIPS 2023.

    Examples
    --------
    >>> import numpy as np
    >>> from solvers import asym_nystrom
    >>> rng = np.random.default_rng(0)
    >>> G = rng.standard_normal((90, 4)) @ rng.standard_normal((4, 70))
    >>> res = asym_nystrom(G, 4, n_samples=10, random_state=0)
    >>> np.allclose(res.s, np.linalg.svd(G, compute_uv=False)[:4])
    True
    """
    t0 = time.perf_counter()
    chk = check_args(
        "asym_nystrom",
        G,
        rank,
        random_state,
        n_samples=n_samples,
        n_rows=n_rows,
        sampling=sampling,
        row_indices=row_indices,
        col_indices=col_indices,
        orthogonalize=orthogonalize,
        core=core,
    )
    opts, rank, src, dtype, rng = chk.options, chk.rank, chk.source, chk.dtype, chk.rng
    N, M = src.shape
    m, n = opts["n_samples"], opts["n_rows"]
    ridx, cidx = opts["row_indices"], opts["col_indices"]
    rw = cw = None
    if opts["sampling"] == "norm" and (ridx is None or cidx is None):
        rw, cw = _squared_norms(src)
    if ridx is None:
        ridx = _sample(N, n, rw, rng)
    if cidx is None:
        cidx = _sample(M, m, cw, rng)

    R = np.asarray(src.rows(ridx), dtype=dtype)  # G[rows, :], n x M
    C = np.asarray(src.cols(cidx), dtype=dtype)  # G[:, cols], N x m
    W = R[:, cidx]  # the block is part of R: no extra read
    Us, ss, Vst = linalg.svd(W, full_matrices=False)
    kept = _floor(ss, max(n, m), dtype)
    k = kept if (opts["orthogonalize"] and opts["core"] == "full") else min(rank, kept)
    # Eq. (10): out-of-sample extension of the block's singular vectors.
    U = C @ (Vst[:k].T / ss[:k])
    V = R.T @ (Us[:, :k] / ss[:k])
    scale = float(np.sqrt((N * M) / (n * m)))
    if opts["orthogonalize"]:
        U, s, V = _orth_rank_r(U, V, ss[:k])
        U, s, V = U[:, :rank], s[:rank], V[:, :rank]
        k = s.size
    else:
        U, V, s = _normalized(U), _normalized(V), ss[:k] * scale
    if k < rank:
        U, s, V = _pad_triplets(U, s, V, rank, rng, "The sampled block")
    return _finish(
        U, s, V, "asym_nystrom", src, t0, dtype, opts, {"n_rows": n, "n_samples": m}, ridx,
        cidx, {"scale": scale, "block_singular_values": ss.astype(dtype)}, kept,
    )
