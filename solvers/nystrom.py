"""Nyström methods for the top singular triplets: the classic symmetric one and the asymmetric one.

``sym_nystrom`` applies the classic Nyström eigen-approximation (Williams & Seeger 2001) to the
two Gram matrices ``G G^T`` and ``G^T G``. ``asym_nystrom`` is the asymmetric Nyström method of
Tao et al. (2023): it reads only a sample of rows and columns of ``G`` itself.

Both guard their answer against the failure every Nyström method shares, an inverted core that
amplifies what the sample did not see: no singular value comes back above a bound on ``||G||``
without a ``RuntimeWarning`` (see "Stability" in :func:`asym_nystrom`).
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass

import numpy as np
from scipy import linalg
from scipy.optimize import linear_sum_assignment

from ._result import SVDResult, finish
from ._validation import check_args

__all__ = ["sym_nystrom", "asym_nystrom"]

_NORM_CHUNK_ENTRIES = 1 << 22  # entries per streamed block when norms must be computed

_ADVICE = (
    "sample more rows/columns (n_samples, n_rows), try sampling='norm', or use a method that "
    "multiplies by G ('rsvd', 'tsvd')"
)


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
# the norm bound: what no estimate may exceed
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _NormBound:
    """A value ``||G||_2`` cannot (``proven``) or should not exceed.

    ``proven`` is True for the source's own ``norm_bound()``, an upper bound on ``||G||_2``;
    False for :func:`_norm_bound`'s sample estimate of ``||G||_F``, which is not a bound.
    """

    value: float
    proven: bool

    def describe(self):
        if self.proven:
            return f"the bound {self.value:.3g} on ||G||_2 (G.norm_bound())"
        return f"the sample's estimate {self.value:.3g} of ||G||_F (G has no norm_bound())"


def _norm_bound(src, R, C):
    """The source's ``norm_bound()``, or else an estimate of ``||G||_F`` from the sample.

    ``R`` (n x M) holds sampled rows of ``G`` and ``C`` (N x m) sampled columns. Under uniform
    sampling ``(N / n) ||R||_F^2`` and ``(M / m) ||C||_F^2`` are unbiased estimates of
    ``||G||_F^2 >= ||G||_2^2``; the larger of the two is taken (norm sampling, which favours
    heavy rows and columns, only makes it larger).
    """
    bound = getattr(src, "norm_bound", None)
    if bound is not None:
        return _NormBound(float(bound()), True)
    N, M = src.shape
    by_rows = np.sqrt(N / R.shape[0]) * np.linalg.norm(R.astype(np.float64, copy=False))
    by_cols = np.sqrt(M / C.shape[1]) * np.linalg.norm(C.astype(np.float64, copy=False))
    return _NormBound(float(max(by_rows, by_cols)), False)


def _limit(bound, dtype):
    """``bound.value`` plus a relative slack for the rounding in computed norms."""
    return bound.value * (1 + np.sqrt(np.finfo(dtype).eps))


def _enforce_bound(method, bound, dtype, orthogonalize, s, *others):
    """Singular values above the bound: a warning, and clipped to a proven bound.

    ``others`` are further estimates of the same values (``sym_nystrom``'s ``s_v``), treated
    alike. The raw estimates (``orthogonalize=False``) are not clipped: they are the method's
    textbook estimator, which the warning reports. Returns ``(s, *others)``.
    """
    values = (s, *others)
    top = max(float(np.max(v, initial=0.0)) for v in values)
    if not top > _limit(bound, dtype):
        return values
    clip = orthogonalize and bound.proven
    if clip:
        what = "clipped to the bound"
    elif bound.proven:
        what = "kept (orthogonalize=False returns the raw estimates unchanged)"
    else:
        what = "kept (the estimate is no bound)"
    why = (
        "an unstable core inversion: the inverted block amplifies the rows and columns outside "
        "the sample" if orthogonalize else "the sampling factor extrapolates the sampled block "
        "beyond what G holds"
    )
    warnings.warn(
        f"{method}: estimated singular value {top:.3g} exceeds {bound.describe()}, so the "
        f"Nyström estimate from this sample is unreliable ({why}); values above it {what}. "
        f"To fix, {_ADVICE}",
        RuntimeWarning,
        stacklevel=3,
    )
    if clip:
        values = tuple(np.minimum(v, bound.value) for v in values)
    return values


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
        (``u_i^T G v_i``), ``numerical_rank`` and ``norm_bound`` (the source's bound on
        ``||G||_2``, None without one). Values above the bound (or, without one, above the
        sample's estimate of ``||G||_F``) come with a ``RuntimeWarning`` and, with
        ``orthogonalize=True``, are clipped to a proven bound; see :func:`asym_nystrom`.

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
    ridx, cidx = _draw_gram_sample(src, n, opts["sampling"], rng)
    R, CU, Cc, CV = _read_gram_columns(src, ridx, cidx, dtype)
    how = (opts["orthogonalize"], opts["core"], dtype)
    U, lu, kept_u = _gram_nystrom(CU, ridx, N, rank, *how)
    V, lv, kept_v = _gram_nystrom(CV, cidx, M, rank, *how)
    U, lu, V, lv, ritz = _pair_sides(src, U, lu, V, lv, dtype)
    bound = _norm_bound(src, R, Cc)
    s, s_v = _enforce_bound(
        "sym_nystrom", bound, dtype, opts["orthogonalize"], np.sqrt(lu), np.sqrt(lv)
    )
    k = s.size
    if k < rank:
        U, s, V = _pad_triplets(U, s, V, rank, rng, "A sampled Gram block")
        s_v, ritz = np.pad(s_v, (0, rank - k)), np.pad(ritz, (0, rank - k))
    order = np.argsort(-s, kind="stable")  # the order finish() applies
    extra = {"s_v": s_v[order], "s_ritz": np.abs(ritz)[order], "norm_bound": _info(bound)}
    return _finish(
        U, s, V, "sym_nystrom", src, t0, dtype, opts, {"n_samples": n}, ridx, cidx, extra,
        min(kept_u, kept_v),
    )


def _draw_gram_sample(src, n, sampling, rng):
    """Indices sampled from ``G G^T`` (rows of G) and ``G^T G`` (columns), each clipped."""
    N, M = src.shape
    rw = cw = None
    if sampling == "norm":
        rw, cw = _squared_norms(src)
    return _sample(N, min(n, N), rw, rng), _sample(M, min(n, M), cw, rng)


def _read_gram_columns(src, ridx, cidx, dtype):
    """``R = G[ridx]``, ``(G G^T)[:, ridx]``, ``C = G[:, cidx]`` and ``(G^T G)[:, cidx]``."""
    R = np.asarray(src.rows(ridx), dtype=dtype)
    CU = np.asarray(src.matmat(np.ascontiguousarray(R.T)), dtype=dtype)
    C = np.asarray(src.cols(cidx), dtype=dtype)
    CV = np.asarray(src.rmatmat(C), dtype=dtype)
    return R, CU, C, CV


def _pair_sides(src, U, lu, V, lv, dtype):
    """Match the two eigen-problems' vectors: u_i with the v_j maximising ``|u_i^T G v_j|``.

    A maximum-weight assignment (robust when values are close); V is signed so that
    ``u_i^T G v_i > 0``. Returns ``U, lu, V, lv`` cut to the shorter side and the Ritz values
    ``u_i^T G v_i``.
    """
    k = min(U.shape[1], V.shape[1])
    U, lu, V, lv = U[:, :k], lu[:k], V[:, :k], lv[:k]
    P = U.T @ np.asarray(src.matmat(V), dtype=dtype)
    rows_, perm = linear_sum_assignment(-np.abs(P))
    V, lv = V[:, perm], lv[perm]
    ritz = P[rows_, perm]
    sign = np.where(ritz < 0, -1, 1).astype(dtype)
    return U, lu, V * sign, lv, ritz


def _info(bound):
    """``info["norm_bound"]``: the proven bound, or None when only an estimate was at hand."""
    return bound.value if bound.proven else None


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
        floor), ``core_rank`` (block triplets inverted after the stability cut),
        ``norm_bound``, ``orthogonalize`` and ``core``.

    Notes
    -----
    With R = G[rows, :] (n x M), C = G[:, cols] (N x m) and the block
    W = G[rows][:, cols] = U_s S_s V_s^T, eq. (10) of the paper extends the block's singular
    vectors to the whole matrix::

        U_ext = C V_s S_s^-1,    V_ext = R^T U_s S_s^-1.

    Tiny block singular values (``<= s_max * max(n, m) * eps``, the ``pinv`` rule) are dropped
    before inverting; so are unstable ones (see Stability).

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
    m = 100, before the stability cut below). It is not the paper's method.

    *Stability.* Block triplet i enters the Nyström approximation as the rank-one term
    ``(C v_i)(R^T u_i)^T / s_i``. When the block sees little of G, a small ``s_i`` can pass
    the ``pinv`` floor while ``C v_i`` and ``R^T u_i``, which reach the rows and columns
    outside the sample, are not small: the term then blows up. (On a sparse graph's SNE kernel,
    N = 300000 sampled at 400 rows and columns, the block's rounding error, larger than the
    floor because centring cancels, left a triplet at 1.3e-13 of the largest; s_1 came out as
    1.6e8 where the exact value is 2.0e-4.) The extension is therefore cut before the first
    triplet after the top one whose term exceeds a bound on ``||G||_2``: an
    epsilon-pseudo-inverse whose epsilon comes from the sample itself, announced by a
    ``RuntimeWarning``. The bound is the source's ``norm_bound()`` when it has one, else the
    sample's estimate ``max(sqrt(N / n) ||R||_F, sqrt(M / m) ||C||_F)`` of ``||G||_F``. Any
    singular value still above it is reported by a ``RuntimeWarning`` too, and with
    ``orthogonalize=True`` clipped to a proven bound (the raw estimates stay as the paper
    defines them). A sample that spans G never triggers either: full-sample answers stay
    exact. ``info["core_rank"]`` is the number of block triplets inverted and
    ``info["norm_bound"]`` the proven bound (None without one).

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
    ridx, cidx = _draw_sample(src, opts, rng)
    R, C, W = _read_blocks(src, ridx, cidx, dtype)
    block = _factor_block(W, dtype)
    full_core = opts["orthogonalize"] and opts["core"] == "full"
    E, F = _extend(C, R, block, block.kept if full_core else min(rank, block.kept))
    bound = _norm_bound(src, R, C)
    n_extended = E.shape[1]
    E, F = _stabilize(E, F, block, bound, dtype)
    scale = float(np.sqrt((N * M) / (n * m)))
    U, s, V = _triplets(E, F, block.s[: E.shape[1]], rank, opts["orthogonalize"], scale)
    (s,) = _enforce_bound("asym_nystrom", bound, dtype, opts["orthogonalize"], s)
    if s.size < rank:
        cut = E.shape[1] < n_extended
        what = "The sampled block's stable part" if cut else "The sampled block"
        U, s, V = _pad_triplets(U, s, V, rank, rng, what)
    extra = {
        "scale": scale,
        "block_singular_values": block.s.astype(dtype),
        "core_rank": E.shape[1],
        "norm_bound": _info(bound),
    }
    return _finish(
        U, s, V, "asym_nystrom", src, t0, dtype, opts, {"n_rows": n, "n_samples": m}, ridx,
        cidx, extra, block.kept,
    )


def _draw_sample(src, opts, rng):
    """The row and column indices: given ones, else drawn (uniformly or by squared norms)."""
    N, M = src.shape
    ridx, cidx = opts["row_indices"], opts["col_indices"]
    rw = cw = None
    if opts["sampling"] == "norm" and (ridx is None or cidx is None):
        rw, cw = _squared_norms(src)
    if ridx is None:
        ridx = _sample(N, opts["n_rows"], rw, rng)
    if cidx is None:
        cidx = _sample(M, opts["n_samples"], cw, rng)
    return ridx, cidx


def _read_blocks(src, ridx, cidx, dtype):
    """``R = G[ridx, :]`` (n x M), ``C = G[:, cidx]`` (N x m) and the block ``W`` inside R."""
    R = np.asarray(src.rows(ridx), dtype=dtype)
    C = np.asarray(src.cols(cidx), dtype=dtype)
    return R, C, R[:, cidx]  # the block is part of R: no extra read


@dataclass(frozen=True)
class _Block:
    """SVD ``W = U diag(s) Vt`` of the sampled block; ``kept`` values pass the pinv floor."""

    U: np.ndarray
    s: np.ndarray
    Vt: np.ndarray
    kept: int


def _factor_block(W, dtype):
    """SVD of the block and the number of singular values above ``s_max * max(n, m) * eps``."""
    U, s, Vt = linalg.svd(W, full_matrices=False)
    return _Block(U, s, Vt, _floor(s, max(W.shape), dtype))


def _extend(C, R, block, k):
    """Eq. (10): the top-k block triplets extended, ``E = C V_k / S_k``, ``F = R^T U_k / S_k``."""
    s = block.s[:k]
    return C @ (block.Vt[:k].T / s), R.T @ (block.U[:, :k] / s)


def _stabilize(E, F, block, bound, dtype):
    """Cut the extension before the first triplet whose term in ``C W^+ R`` exceeds the bound.

    Triplet i contributes ``E_i s_i F_i^T`` to the Nyström approximation, a rank-one term of
    norm ``s_i ||E_i|| ||F_i|| = ||C v_i|| ||R^T u_i|| / s_i``. When it exceeds the bound on
    ``||G||``, ``1 / s_i`` has amplified what ``C`` and ``R`` hold outside the sample instead of
    approximating it: an epsilon-pseudo-inverse with epsilon = s_i drops it and every smaller
    triplet (with a warning). The top triplet is always kept: without it there is no answer,
    and an overshoot of its own is clipped by :func:`_enforce_bound`.
    """
    s = block.s[: E.shape[1]]
    norms = np.linalg.norm(E, axis=0).astype(np.float64) * np.linalg.norm(F, axis=0)
    terms = s.astype(np.float64) * norms
    over = np.flatnonzero(~(terms[1:] <= _limit(bound, dtype)))  # NaN and inf count as over
    if over.size == 0:
        return E, F
    k = int(over[0]) + 1
    warnings.warn(
        f"asym_nystrom: unstable core inversion: the sampled block's singular value "
        f"{s[k]:.3g} ({s[k] / block.s[0]:.2g} of its largest) inverts into a term of norm "
        f"{terms[k]:.3g} in the Nyström approximation C W^+ R, above {bound.describe()}; its "
        f"pseudo-inverse was truncated to the top {k} of {s.size} triplets (epsilon = "
        f"{s[k]:.3g}). To fix, {_ADVICE}",
        RuntimeWarning,
        stacklevel=3,
    )
    return E[:, :k], F[:, :k]


def _triplets(E, F, s, rank, orthogonalize, scale):
    """The answer from the extension: SVD of ``E diag(s) F^T`` or the raw, rescaled one."""
    if orthogonalize:
        U, s, V = _orth_rank_r(E, F, s)
        return U[:, :rank], s[:rank], V[:, :rank]
    return _normalized(E), s * scale, _normalized(F)
