"""Randomly pivoted Cholesky on the joint PSD kernel of two point sets: an SVD of G from no pass.

When ``G = K_XZ`` is the off-diagonal block of a PSD kernel ``K`` on the stacked points
``X ∪ Z`` (RBF, Student-t, linear), a partial Cholesky ``K ~ F F^T`` of ``K`` gives
``G ~ F_X F_Z^T`` (``F_X`` the first N rows of F, ``F_Z`` the last M). Randomly pivoted
Cholesky (RPCholesky) picks each pivot with probability proportional to the residual diagonal,
so a cluster of points that no pivot has touched keeps all its residual mass and is found
next: it does not miss rare, decoupled clusters the way uniform sampling or ACA do. It reads
``k`` columns of ``K`` (``k (N + M)`` entries) plus the diagonal: no pass over ``G``.

The joint-kernel protocol
-------------------------
``rpcholesky_svd`` needs a source member ``joint_psd()`` returning an object with

=======================  ==============================================================
``n_x``, ``n_z``         N and M: the stacked points are ``x_0..x_{N-1}, z_0..z_{M-1}``
``diag()``               the diagonal of K, shape ``(N + M,)``
``columns(idx)``         ``K[:, idx]``, shape ``(N + M, len(idx))``, ``idx`` into the
                         stacked points
``block(ridx, cidx)``    ``K[ridx][:, cidx]`` (small blocks for the rejection step)
``normalise``            bool: G's rows are normalised, ``G = D^-1 K_XZ`` with
                         ``D = diag(K_XZ 1)`` (SNE, t); False: ``G = K_XZ``
``center``               bool: G is double-centred, ``H_N G H_M`` (applied after the
                         normalisation)
=======================  ==============================================================

Values are float64. ``ksvd_bench.kernels.KernelSource.joint_psd`` implements it for the lazy
point sources (see ``ksvd_bench.kernels.joint``).

References
----------
Y. Chen, E. N. Epperly, J. A. Tropp, R. J. Webber. Randomly pivoted Cholesky: practical
approximation of a kernel matrix with few entry evaluations. CPAM, 2024 (arXiv 2207.06503).

T. Fukaya, R. Kannan, Y. Nakatsukasa, Y. Yamamoto, Y. Yanagisawa. Shifted Cholesky QR for
computing the QR factorization of ill-conditioned matrices. SISC 42(1), 2020.

E. N. Epperly, J. A. Tropp, R. J. Webber. Embrace rejection: kernel matrix approximation by
accelerated randomly pivoted Cholesky. arXiv 2410.03969, 2024 (the block rejection form used
here).

R. Bhatia, F. Kittaneh. Norm inequalities for partitioned operators and an application.
Math. Ann. 287:719-726, 1990 (the off-diagonal block of a PSD matrix).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from scipy import linalg

from ..validation import check_choice

__all__ = ["rpcholesky_svd", "rpcholesky"]

_MEMBERS = ("n_x", "n_z", "diag", "columns", "block", "normalise", "center")

#: smallest proposal block of the accelerated (rejection) form
_MIN_BLOCK = 8
#: a residual diagonal entry below this fraction of the initial trace is treated as zero
_TINY = 64 * np.finfo(np.float64).eps
#: consecutive blocks with no accepted proposal before the factorisation stops
_MAX_STALLS = 20
#: a row-sum estimate below this fraction of the largest is not resolved (see _inverse_normaliser)
_NORMALISER_FLOOR = 1e-12


def _joint_kernel(src):
    """``src.joint_psd()`` (through a counting wrapper's ``source`` too), checked."""
    for obj in (src, getattr(src, "source", None)):
        if obj is not None and hasattr(obj, "joint_psd"):
            jp = obj.joint_psd()
            missing = [m for m in _MEMBERS if not hasattr(jp, m)]
            if missing:
                raise TypeError(f"joint_psd() returned an object without {', '.join(missing)}")
            n, m = int(jp.n_x), int(jp.n_z)
            shape = tuple(int(v) for v in src.shape)
            if (n, m) != shape:
                raise ValueError(f"joint_psd() describes a {n} x {m} G, the source is {shape}")
            return jp
    raise ValueError(
        'sampling="rpcholesky" needs a lazy point source whose kernel is a block (or a '
        "diagonal scaling of a block) of a PSD kernel on the joint point set, i.e. a source "
        "with a joint_psd() member such as ksvd_bench's KernelSource.from_points(X, Z, "
        f"'rbf' | 'sne' | 't' | 'linear'); got {type(getattr(src, 'source', src)).__name__}"
    )


def _rejection_cholesky(H, u, rng, floor):
    """Accept a subset of the proposals, each with probability (its Schur residual) / ``u``.

    ``H`` (b x b, overwritten) is the residual kernel on the proposals, ``u`` their residual
    diagonal when proposed. Proposal ``j`` is accepted with probability
    ``H_jj / u_j`` after eliminating the accepted ones before it (Epperly, Tropp & Webber,
    Alg. 2.1): the accepted set is distributed as sequential RPCholesky pivots.
    """
    b = H.shape[0]
    accepted = []
    draws = rng.random(b)
    for j in range(b):
        h = H[j, j]
        if h > floor and draws[j] * u[j] < h:
            accepted.append(j)
            col = H[j + 1 :, j] / math.sqrt(h)
            H[j + 1 :, j + 1 :] -= np.outer(col, col)
    return np.asarray(accepted, dtype=np.intp)


def rpcholesky(jp, n_pivots, *, rng, weights=None, weights_from=None, diag=None):
    """Accelerated block RPCholesky of the joint kernel: ``K ~ F^T F`` (F is k x (N + M)).

    Parameters
    ----------
    jp : joint-kernel object (module docstring)
    n_pivots : int
        Number of pivots k (fewer when the residual vanishes first: exact low rank).
    rng : numpy.random.Generator
    weights : callable or None
        ``weights(F, t)`` -> nonnegative weights (N + M,) multiplying the residual diagonal
        in the pivot distribution, called once ``t >= weights_from`` pivots are chosen
        (and after each later block). None: plain RPCholesky.
    weights_from : int, optional
        Number of plain pivots before ``weights`` applies.
    diag : ndarray of shape (N + M,), optional
        ``jp.diag()`` when the caller has read it already (it is counted here either way).

    Returns
    -------
    F : ndarray of shape (t, N + M)
    pivots : ndarray of int64, shape (t,)
    resid : ndarray of shape (N + M,), the residual diagonal ``diag(K - F^T F)`` (>= 0)
    entries : int, entries of K evaluated (diagonal, proposal blocks, columns)
    """
    n = int(jp.n_x) + int(jp.n_z)
    d = np.array(jp.diag() if diag is None else diag, dtype=np.float64)
    if d.shape != (n,) or not np.all(np.isfinite(d)) or np.any(d < 0):
        raise ValueError("joint_psd().diag() must be finite, >= 0 and of length N + M")
    entries = n
    floor = _TINY * max(float(d.max(initial=0.0)), np.finfo(np.float64).tiny)
    F = np.zeros((n_pivots, n))
    pivots = np.zeros(n_pivots, dtype=np.int64)
    t = 0
    w = None
    stalls = 0
    block = max(_MIN_BLOCK, -(-n_pivots // 10))
    while t < n_pivots:
        if weights is not None and t >= (weights_from or 0):
            w = weights(F[:t], t)
        score = d if w is None else d * w
        total = float(score.sum())
        if not total > floor * (1 if w is None else float(w.max(initial=1.0))):
            break  # the residual vanished: K (or its weighted form) has rank t
        b = min(block, 2 * (n_pivots - t) + _MIN_BLOCK)
        prop = rng.choice(n, size=b, replace=True, p=score / total)
        H = np.array(jp.block(prop, prop), dtype=np.float64)
        entries += b * b
        H -= F[:t, prop].T @ F[:t, prop]
        acc = _rejection_cholesky(H.copy(), d[prop], rng, floor)
        if acc.size == 0:
            stalls += 1
            if stalls >= _MAX_STALLS:
                break  # every proposal is at the rounding floor: numerically rank t
            continue
        stalls = 0
        # proposals follow w * (residual at the block's start) and proposal j is kept with
        # probability (its current residual) / (that residual): the weights cancel, so the
        # kept pivots follow w * (current residual), as if drawn one at a time
        acc = acc[: n_pivots - t]
        S = prop[acc]
        # s x n in Fortran order: a view of the fresh (n x s) columns, updated in place (a
        # copy, a product of C's size and a triangular solve on a C-ordered copy each
        # allocated as much as the columns: 1.3 GB per block at N = M = 1e6)
        C = np.asarray(jp.columns(S), dtype=np.float64).T
        entries += C.size
        if t:
            gemm = linalg.get_blas_funcs("gemm", (C,))
            C = gemm(-1.0, F[:t, S].T, F[:t].T, beta=1.0, c=C, trans_b=True, overwrite_c=True)
        Hs = C[:, S]
        Hs = (Hs + Hs.T) / 2
        try:
            L = np.linalg.cholesky(Hs)
        except np.linalg.LinAlgError:
            L = np.linalg.cholesky(Hs + floor * np.eye(S.size))
        Fn = linalg.solve_triangular(L, C, lower=True, overwrite_b=True, check_finite=False)
        s = S.size
        F[t : t + s] = Fn
        pivots[t : t + s] = S
        t += s
        d -= np.einsum("ij,ij->j", Fn, Fn)
        np.maximum(d, 0, out=d)
        d[S] = 0  # pivots are interpolated exactly
        # the next block: proposals grow when most are accepted, shrink when most are not
        block = max(_MIN_BLOCK, min(2 * block, -(-3 * s // 2) + _MIN_BLOCK))
    return F[:t], pivots[:t], d, entries


def _row_sums(F, n_x):
    """``F_X (F_Z^T 1)``: the row sums of the approximation of ``K_XZ``."""
    return F[:, :n_x].T @ F[:, n_x:].sum(axis=1)


def _inverse_normaliser(F, n_x, jp):
    """``1 / D~`` for the rows whose row sum the factors resolve, 0 for the others.

    A row sum ``D~_i = F_X[i] (F_Z^T 1)`` at or below ``_NORMALISER_FLOOR`` times the largest
    is not resolved: the kernel values of that x and every z the factors see are at the
    rounding (or underflow) level of the joint kernel, whose diagonal is 1 for SNE and t.
    Dividing by it would blow the row up to 1e12 times the others (or to inf); its row of
    the approximation is set to 0 instead, and the caller is told how many there are
    (``info["unresolved_rows"]``, a ``RuntimeWarning``): such an answer may miss directions
    of G. When no row sum is resolved at all there is nothing to answer with: ValueError.
    """
    D = _row_sums(F, n_x)
    top = float(np.max(D, initial=0.0))
    if not (np.isfinite(top) and top > 0):
        inv_g2 = float(getattr(jp, "inv_g2", 0.0) or 0.0)
        gamma = f"gamma = {1 / np.sqrt(inv_g2):.3g}" if inv_g2 > 0 else "the bandwidth"
        raise ValueError(
            'sampling="rpcholesky" cannot estimate the row normalisers D = K_XZ 1 of this '
            f"row-normalised kernel: with {F.shape[0]} pivot(s), every row sum of the "
            "factored cross block K_XZ is 0 in float64, i.e. the kernel between the points of "
            f"X and Z underflows ({gamma} is small against the distances between X and Z). "
            "Use a larger gamma, more pivots (n_samples), or another sampling ('uniform', "
            "'norm', 'arp', 'aca'), which read G's own normalised rows"
        )
    resolved = D > top * _NORMALISER_FLOOR
    wx = np.zeros(n_x)
    wx[resolved] = 1.0 / D[resolved]
    unresolved = int(n_x - np.count_nonzero(resolved))
    if unresolved:
        warnings.warn(
            f'sampling="rpcholesky": the row sums of {unresolved} of {n_x} rows of K_XZ are '
            "not resolved by the factors (below 1e-12 of the largest; the kernel underflows "
            "between those points of X and every pivot): their rows of the answer are 0, "
            "and directions of G that live on them are missed. Use more pivots "
            "(n_samples), a larger gamma, or another sampling",
            RuntimeWarning,
            stacklevel=4,
        )
    return wx, unresolved


#: rows of A per block of the sweeps of :func:`_r_factors` and :func:`_left_vectors`: at k = 80
#: columns a block of 8192 rows is 5 MB, so its triangular solves and Gram stay in cache
_SWEEP_ROWS = 8192


#: :func:`_left_vectors` multiplies A by ``R^-1 Y`` directly (one product) while
#: ``||A|| ||R^-1 Y||`` is at most this (rounding then at most about 1e3 eps per vector)
_DIRECT_GROWTH = 1e3


def _solve_blocks(factors, Xt):
    """``(A_b R_1^-1 ... R_p^-1)^T`` for a block ``Xt = A_b^T`` (k x b): triangular solves."""
    for Ri in factors:
        Xt = linalg.solve_triangular(Ri, Xt, trans="T", lower=False, check_finite=False)
    return Xt


def _r_factors(At):
    """CholeskyQR2 of ``A = At.T`` without forming Q: its triangular factors, or Householder.

    ``At`` is k x n (a view of the factor's rows; never copied). Returns ``("chol",
    [R_1, ..., R_p])`` with ``A = Q R_p ... R_1``, ``Q = A R_1^-1 ... R_p^-1`` orthonormal to
    working precision, or ``("qr", Q, R)`` where Cholesky fails even shifted (rank deficiency
    beyond ``1 / eps``: Householder on a copy of A).

    Each pass is CholeskyQR on the ``Q`` of the passes before (Fukaya et al. 2020): passes
    repeat until one starts from a ``Q`` orthonormal to 1e-5 (then it ends orthonormal to
    working precision): two for ``cond(A) < 1e5`` or so, at most four; a first Cholesky that
    fails (``cond(A)`` beyond ``1 / sqrt(eps)``) is retried with the shift of shifted
    CholeskyQR3. ``Q`` is never stored: a pass sweeps A in blocks of ``_SWEEP_ROWS`` rows,
    applies the earlier factors by triangular solves and adds the block's Gram, and
    :func:`_left_vectors` repeats the same solves on the same blocks (bit for bit the ``Q``
    whose Gram gave the next factor). Gram products and small triangular solves only, all
    BLAS-3 and cache-resident: where CholeskyQR2 with a stored Q swept 1e6 x 80 factors
    eleven times through memory (9.5 s of the 1e6 RPCholesky run, issue 32), this reads A
    once per pass and writes nothing of its size.
    """
    k, n = At.shape
    eps = np.finfo(np.float64).eps
    syrk = linalg.get_blas_funcs("syrk", (At,))
    factors = []
    for i in range(4):
        Gm = np.zeros((k, k), order="F")
        for j in range(0, n, _SWEEP_ROWS):
            Xt = _solve_blocks(factors, At[:, j : j + _SWEEP_ROWS])
            # the Gram by syrk (upper triangle): numpy's X @ X.T on a long inner dimension
            # ran 5-30x slower here, as a general product
            Gm = syrk(1.0, Xt, beta=1.0, c=Gm, overwrite_c=True)
        Gm = np.triu(Gm) + np.triu(Gm, 1).T
        off = float(np.max(np.abs(Gm - np.eye(k)), initial=0.0))
        try:
            Ri = linalg.cholesky(Gm, lower=False, check_finite=False)
        except linalg.LinAlgError:
            Ri = None
            if i == 0:
                Gm[np.diag_indices(k)] += 11 * (n * k + k * (k + 1)) * eps * np.trace(Gm)
                try:
                    Ri = linalg.cholesky(Gm, lower=False, check_finite=False)
                except linalg.LinAlgError:
                    Ri = None
            if Ri is None:
                Q, Rq = linalg.qr(_solve_blocks(factors, At).T, mode="economic", check_finite=False)
                R = Rq
                for Rf in reversed(factors):
                    R = R @ Rf
                return ("qr", Q, R)
        factors.append(Ri)
        if off < 1e-5:
            break
    return ("chol", factors)


def _r_of(fact):
    """The R of ``A = Q R`` from :func:`_r_factors`' answer."""
    if fact[0] == "qr":
        return fact[2]
    R = np.eye(fact[1][0].shape[0])
    for Ri in fact[1]:
        R = Ri @ R
    return R


def _left_vectors(At, fact, Y):
    """``Q Y`` for the ``Q`` of :func:`_r_factors` (n x j), one sweep over A."""
    if fact[0] == "qr":
        return fact[1] @ Y
    factors = fact[1]
    # the last factor is close to I (its pass started orthonormal to 1e-5): applied to Y
    Y = linalg.solve_triangular(factors[-1], Y, lower=False, check_finite=False)
    k, n = At.shape
    X = Y
    for Ri in reversed(factors[:-1]):
        X = linalg.solve_triangular(Ri, X, lower=False, check_finite=False)
    # A X = Q Y up to rounding eps ||A|| ||X||: where that is small (X = R^-1 Y for top
    # singular vectors Y of R_A R_B^T has ||X|| <= ||B|| / s_j, so it is unless s_j is far
    # below ||A|| ||B||) one product, no sweep of triangular solves
    if np.linalg.norm(X, 2) * np.linalg.norm(_r_of(fact), 2) <= _DIRECT_GROWTH:
        return At.T @ X
    out = np.empty((n, Y.shape[1]))
    for j in range(0, n, _SWEEP_ROWS):
        Xt = _solve_blocks(factors[:-1], At[:, j : j + _SWEEP_ROWS])
        out[j : j + Xt.shape[1]] = Xt.T @ Y
    return out


def _orth_svd(At, Bt, rank, rng):
    """Top ``rank`` SVD of ``A B^T`` (``At``: k x N, ``Bt``: k x M) by two QRs and a k x k SVD.

    Per side one Gram product per CholeskyQR pass and one sweep for the vectors
    (:func:`_r_factors`, :func:`_left_vectors`); neither ``A`` nor its ``Q`` is copied.
    """
    fa, fb = _r_factors(At), _r_factors(Bt)
    a, s, bt = linalg.svd(_r_of(fa) @ _r_of(fb).T, check_finite=False)
    j = min(rank, s.size)
    U, V = _left_vectors(At, fa, a[:, :j]), _left_vectors(Bt, fb, bt[:j].T)
    if j < rank:  # fewer pivots than asked: K had lower rank; pad with zero triplets
        U = _pad(U, rank, rng)
        V = _pad(V, rank, rng)
        s = np.concatenate([s, np.zeros(rank - j)])
    return U, s[:rank], V


def _pad(E, rank, rng):
    X = rng.standard_normal((E.shape[0], rank - E.shape[1]))
    for _ in range(2):
        X -= E @ (E.T @ X)
        X = np.linalg.qr(X)[0]
    return np.hstack([E, X])


def rpcholesky_svd(src, rank, n_pivots, *, rng, dtype=np.float64, pivots="scaled"):
    """Top ``rank`` SVD of ``G`` from an RPCholesky factorisation of its joint PSD kernel.

    Parameters
    ----------
    src : matrix source with ``joint_psd()`` (module docstring), or a counting wrapper of one
        (its ``source`` attribute is then used).
    rank : int
        Number of triplets, ``1 <= rank <= n_pivots``.
    n_pivots : int
        Pivots k of the joint kernel (the effort), ``rank <= k <= N + M``.
    rng : numpy.random.Generator
        Seeds the pivots; the same generator state gives the same answer.
    dtype : {float64, float32}, default=float64
        dtype of ``U``, ``s``, ``V`` (the factorisation runs in float64).
    pivots : {"scaled", "plain"}, default="scaled"
        For normalised rows: after half the pivots, draw from the residual of the scaled
        kernel whose block is G ("scaled", Notes), or always from K's ("plain", the
        textbook RPCholesky; kept for comparison). Other kernels: no difference.

    Returns
    -------
    U : ndarray (N, rank)
    s : ndarray (rank,), descending
    V : ndarray (M, rank)
    info : dict
        ``entries_read`` (int, entries of the joint kernel evaluated: diagonal, rejection
        blocks and pivot columns, about ``(k + 1)(N + M)``), ``n_passes``
        (``entries_read / (N M)``: no product with G is made), ``n_pivots`` (pivots
        used), ``pivots_x``/``pivots_z`` (pivot indices into X and into Z),
        ``trace_bound`` (a bound on ``||G~ - A B^T||_*``: see Notes), ``trace_residual``
        (``tr(E)``, E the joint residual), ``normalise``, ``center``, ``unresolved_rows``
        (rows whose normaliser the factors do not resolve: 0 in the answer, see Notes; a
        ``RuntimeWarning`` says so, and ``asym_nystrom`` marks such an answer unreliable),
        ``normaliser_bound``/``normaliser_bound_median`` (bounds on ``|D_i / D~_i - 1|``,
        Notes), ``row_residual`` (N,): ``E_ii / D~_i^2`` (``E_ii`` for rows that are not
        normalised), the residual diagonal on each row's scale: where the answer's rows may
        be off.

    Raises
    ------
    ValueError
        The source has no ``joint_psd()`` (message names ``sampling="rpcholesky"``),
        ``rank``/``n_pivots`` out of range, or normalised rows of which not one row sum is
        resolved (the kernel underflows between X and Z: the message names gamma).

    Notes
    -----
    *The bound.* With ``F = [F_X; F_Z]`` ((N + M) x k), ``E = K - F F^T`` is PSD, and for
    a PSD block matrix ``E_XZ = E_XX^{1/2} C E_ZZ^{1/2}`` with ``||C||_2 <= 1``, so
    ``||E_XZ||_* <= sqrt(tr E_XX tr E_ZZ) <= tr(E) / 2`` (Bhatia & Kittaneh 1990).
    ``trace_bound`` is ``sqrt(tr(W E_XX W) tr(E_ZZ))`` with ``W = D^-1`` for normalised rows
    (1 otherwise): a bound on ``||D^-1 (K_XZ - F_X F_Z^T)||_*``. Centring cannot raise it
    (``H`` is a contraction). With normalised rows it does not include the error of the
    normalisers themselves (``D`` is estimated, below).

    *Normalised rows (SNE, t).* ``G = D^-1 K_XZ`` with ``D`` the exact row sums over all of
    Z, which no pass measured. They are estimated from the factors, ``D~ = F_X (F_Z^T 1)``.
    Two things need care (issue 15 saw a plain version stall at a subspace error of 0.022 on
    rare clusters; ``ksvd-bench sampling`` runs ``pivots="plain"`` beside, for comparison):

    1. the pivots. ``G``'s rows are ``K_XZ``'s divided by ``D``: a rare cluster of x (few z
       nearby, small ``D``) is magnified. Plain RPCholesky samples by the residual of K,
       not of ``D^-1 K D^-1``, and so under-resolves exactly those rows. After a first half
       of plain pivots (which give ``D~``), pivots are drawn from the residual of the
       scaled kernel ``S K S``, ``S = diag(a D~^-1, b I)`` with ``a, b`` balancing the two
       traces: its off-diagonal block is ``a b D^-1 K_XZ``, i.e. G itself, so this is
       RPCholesky on the PSD kernel whose block G is.
    2. the normalisers. The rows of ``F_X F_Z^T`` sum to ``D~`` exactly, so dividing by
       ``D~`` (not by any other estimate of D) keeps the rows of the approximation summing
       to one as G's do. A row sum at or below ``1e-12`` of the largest is not resolved
       (the kernel between that x and every pivot is at rounding or underflow level, as for
       a small gamma): that row of the answer is 0 rather than 1e12 times too large, and
       ``info["unresolved_rows"]`` counts it. With no row sum resolved at all (every
       ``exp(-|x - z|^2 / gamma^2)`` underflows, e.g. gamma = 1e-2 on unit-scale points)
       there is no answer to give: ValueError. The scaled pivots start after at least one
       plain pivot (``n_pivots = 1`` used to draw them from an empty factor, dividing by 0).

    *How far the normalisers are from G's* (issue 32). ``D - D~ = E_XZ 1`` and for the
    PSD residual ``|(E_XZ 1)_i| <= sqrt(E_ii) sqrt(1^T E_ZZ 1) <= sqrt(E_ii M tr(E_ZZ))``;
    divided by ``D~_i`` this bounds the relative error of row ``i``'s normaliser, from what
    the factorisation knows (``normaliser_bound``: the largest over the rows, inf where a
    row is unresolved; ``normaliser_bound_median``). It is loose (``M tr(E_ZZ)`` for
    ``1^T E_ZZ 1``); ``asym_nystrom``'s row-sampled certificate measures the answer against
    G's own rows, exact normalisers included.

    *Centring* ``H G H`` is applied to the factors: ``A = H D~^-1 F_X``, ``B = H F_Z``
    (subtracting column means), exact algebra on ``A B^T``.
    """
    jp = _joint_kernel(src)
    n_x, n_z = int(jp.n_x), int(jp.n_z)
    n = n_x + n_z
    for name, value, low, high in (("rank", rank, 1, min(n_x, n_z)), ("n_pivots", n_pivots, 1, n)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{name} must be an int, got {type(value).__name__}")
        if not low <= value <= high:
            raise ValueError(f"{name} must be in [{low}, {high}], got {value}")
    if n_pivots < rank:
        raise ValueError(f"n_pivots must be >= rank={rank}, got {n_pivots}")
    normalise, center = bool(jp.normalise), bool(jp.center)
    pivots = check_choice("pivots", pivots, ("scaled", "plain"))
    weights = None
    d0 = np.array(jp.diag(), dtype=np.float64)
    if normalise and pivots == "scaled":

        def weights(F, t):
            D = _row_sums(F, n_x)
            top = float(np.max(D, initial=0.0))
            if not top > 0:
                return None  # no row sum resolved yet: plain pivots
            # (top / D)^2 rather than 1 / D^2: no overflow when every row sum is tiny
            w = np.ones(n)
            w[:n_x] = (top / np.maximum(D, top * _NORMALISER_FLOOR)) ** 2
            # balance the traces of the two diagonal blocks of S K S
            tx = float(np.dot(w[:n_x], d0[:n_x]))
            tz = float(d0[n_x:].sum())
            if tx > 0 and tz > 0:
                w[:n_x] *= tz / tx
            return w

    # the scaled pivots need a normaliser estimate, i.e. at least one plain pivot first
    F, piv, resid, entries = rpcholesky(
        jp,
        int(n_pivots),
        rng=rng,
        weights=weights,
        weights_from=max(1, int(n_pivots) // 2),
        diag=d0,
    )
    k = F.shape[0]
    # A^T and B^T are views of F's rows, scaled and centred in place (F is not used again)
    At, Bt = F[:, :n_x], F[:, n_x:]
    wx = np.ones(n_x)
    unresolved = 0
    if normalise:
        wx, unresolved = _inverse_normaliser(F, n_x, jp)
        At *= wx
    if center:
        At -= At.mean(axis=1, keepdims=True)
        Bt -= Bt.mean(axis=1, keepdims=True)
    U, s, V = _orth_svd(At, Bt, rank, rng)
    tr_x = float(np.dot(wx**2, resid[:n_x]))
    tr_z = float(resid[n_x:].sum())
    norm_err = np.full(n_x, np.nan)
    if normalise:
        # |D_i - D~_i| = |(E_XZ 1)_i| <= sqrt(E_ii) sqrt(1^T E_ZZ 1) <= sqrt(E_ii M tr E_ZZ)
        # (E PSD: Cauchy-Schwarz, then 1^T E_ZZ 1 <= ||1||^2 lambda_max <= M tr): relative
        # to D~_i, where the answer's rows divide by D~ instead of G's D
        norm_err = np.sqrt(resid[:n_x] * n_z * tr_z) * wx
        norm_err[wx == 0] = np.inf
    info = {
        "entries_read": int(entries),
        "n_passes": float(entries) / (n_x * n_z),
        "n_pivots": int(k),
        "pivots_x": np.sort(piv[piv < n_x]).astype(np.int64),
        "pivots_z": np.sort(piv[piv >= n_x] - n_x).astype(np.int64),
        "trace_bound": float(np.sqrt(tr_x * tr_z)),
        "trace_residual": float(resid.sum()),
        "normalise": normalise,
        "center": center,
        "unresolved_rows": int(unresolved),
        # bounds on |D_i / D~_i - 1| over the rows (NaN: rows not normalised): see Notes
        "normaliser_bound": float(np.max(norm_err, initial=0.0)),
        "normaliser_bound_median": float(np.median(norm_err)),
        # where the answer's rows may be off: the residual diagonal on the rows of G's
        # scale (importance weights of the row-sampled certificate; asym_nystrom pops it)
        "row_residual": wx**2 * resid[:n_x],
    }
    dtype = np.dtype(dtype)
    return U.astype(dtype, copy=False), s.astype(dtype), V.astype(dtype, copy=False), info
