"""Error estimates of a low-rank approximation without a reference SVD (pure numerics).

Three estimates of the Frobenius error ``||G - P G||_F`` of a projection ``P`` onto the span
of a basis, each from numbers a randomized solver (or a driver checking its answer) already
has or gets in one pass:

* :func:`frobenius_gap`: ``||G - Q Q^T G||_F^2 = ||G||_F^2 - ||Q^T G||_F^2`` for orthonormal
  ``Q``. Exact, and free when ``||G||_F`` is known and ``Q^T G`` was formed, but the
  subtraction cancels: it loses about ``eps_mach ||G||_F^2 / error^2`` relative accuracy, so
  it is used only while the error is large (above ``sqrt(GAP_RTOL) ||G||_F``).
* :func:`leave_one_out_error`: the leave-one-out estimator of Epperly & Tropp (2023) on the
  randomized sketch ``Y = G Omega`` (or a power / Krylov basis built from it), with no product
  beyond those the solver made.
* :func:`probe_error`: the posterior check of Halko, Martinsson & Tropp (2011, §4.3) with a
  few Gaussian probes ``G Omega_p``: one product of ``N_PROBES`` columns, independent of how
  the approximation was built, so it applies to every method. It is unbiased for the squared
  error; :func:`probe_failure_probability` gives the chance that it underestimates the error
  by a factor, and :func:`probe_fro2_lower` the lower confidence bound on ``||G||_F^2`` that
  a relative error divides by where the norm itself comes from probes.

Randomized: the leave-one-out and probe estimates, and ``||G||_F`` from probes; every one is
used with its confidence factor. The Frobenius gap and a truncation error are deterministic.

The module imports nothing from ``ksvd_bench``.

References
----------
.. [1] E. N. Epperly and J. A. Tropp, "Efficient error and variance estimation for randomized
   matrix computations", SIAM J. Sci. Comput. 46 (2024); arXiv:2207.06342 (2023).
.. [2] N. Halko, P.-G. Martinsson and J. A. Tropp, "Finding structure with randomness:
   probabilistic algorithms for constructing approximate matrix decompositions", SIAM Review
   53 (2011), §4.3.
"""

from __future__ import annotations

import math
import numbers
import time

import numpy as np

__all__ = [
    "GAP_RTOL",
    "GAP_RTOL_FLOAT32",
    "LOO_FLOPS",
    "N_PROBES",
    "PROBE_SAFETY",
    "frobenius_gap",
    "krylov_leave_one_out_error",
    "leave_one_out_error",
    "probe_error",
    "probe_failure_probability",
    "probe_fro2_lower",
    "NORM_FAILURE",
    "row_sample_error",
    "MIN_SAMPLED_ROWS",
    "sketch_error_estimate",
    "truncation_error",
]

#: Smallest ``error^2 / ||G||_F^2`` at which :func:`frobenius_gap` is trusted: there the
#: rounding of the two sums (about ``n eps_mach ||G||_F^2``) is below 1e-4 of the gap.
GAP_RTOL = 1e-8
#: The same for a sketch computed in float32: ``Q^T G`` carries relative rounding of about
#: ``1e-6``, so the gap is trusted only while the error is above 3% of ``||G||_F``.
GAP_RTOL_FLOAT32 = 1e-3
#: Flops a leave-one-out estimate may spend beyond the SVD of its basis. Past it the average
#: runs over an evenly spaced subset of the test vectors (each term is unbiased on its own);
#: with fewer than :data:`LOO_MIN_TERMS` affordable terms no estimate is made (NaN).
LOO_FLOPS = 2e9
LOO_MIN_TERMS = 4
#: Gaussian probes of :func:`probe_error` by default (Halko, Martinsson & Tropp use 10).
N_PROBES = 10
#: Multiple of a probe estimate that a stopping rule compares with its tolerance:
#: ``P(probe estimate < error / 2) <= P(chi2_10 <= 2.5) = 0.0091`` (rank-one residual, the
#: worst case; see :func:`probe_failure_probability`).
PROBE_SAFETY = 2.0
#: Failure probability of :func:`probe_fro2_lower`, the lower confidence bound on
#: ``||G||_F^2`` that a relative estimate divides by where the norm itself comes from probes.
NORM_FAILURE = 0.01
#: Fewest rows :func:`row_sample_error` reads, whatever its budget: below that its interval
#: rests on too few terms to be an interval.
MIN_SAMPLED_ROWS = 64
#: Rows of G that :func:`row_sample_error` holds at once (``chunk x M`` values).
_ROW_CHUNK = 8


def _check_nonneg(value, name):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return float(value)


def _check_matrix(X, name, min_cols=1):
    A = np.asarray(X)
    if A.ndim != 2:
        raise ValueError(f"{name} must be a 2-d array, got ndim {A.ndim}")
    if np.iscomplexobj(A):
        raise ValueError(f"{name} must be real, got dtype {A.dtype}")
    A = A.astype(np.float64, copy=False)
    if A.shape[1] < min_cols:
        raise ValueError(f"{name} must have at least {min_cols} columns, got {A.shape[1]}")
    if not np.all(np.isfinite(A)):
        raise ValueError(f"{name} contains non-finite values")
    return A


def frobenius_gap(fro2, captured_fro2, *, rtol=GAP_RTOL):
    """``sqrt(||G||_F^2 - ||Q^T G||_F^2)``: the projection error, exact while it is large.

    Parameters
    ----------
    fro2 : float
        ``||G||_F^2`` (exact to rounding; an upper bound such as a padded norm makes the
        result an upper estimate).
    captured_fro2 : float
        ``||Q^T G||_F^2`` for an orthonormal ``Q`` (the energy the projection keeps).
    rtol : float, default=GAP_RTOL
        The gap is returned only when ``fro2 - captured_fro2 >= rtol * fro2``; below that the
        cancellation of the subtraction makes it unreliable and NaN is returned.

    Returns
    -------
    error : float
        ``||G - Q Q^T G||_F``, or NaN when the gap is too small to resolve, and NaN for
        ``fro2 = 0``: a norm that reads 0 is not told apart from one lost to rounding (a
        centred kernel far from the origin), so it never vouches for an answer.

    Raises
    ------
    TypeError, ValueError
        On non-numbers, negative or non-finite inputs.

    Examples
    --------
    >>> frobenius_gap(25.0, 16.0)
    3.0
    >>> import math
    >>> math.isnan(frobenius_gap(1.0, 1.0 - 1e-12))
    True
    """
    fro2 = _check_nonneg(fro2, "fro2")
    captured = _check_nonneg(captured_fro2, "captured_fro2")
    rtol = _check_nonneg(rtol, "rtol")
    if fro2 == 0.0:
        return float("nan")
    gap = fro2 - captured
    if gap < rtol * fro2:
        return float("nan")
    return math.sqrt(gap)


def _terms(s, cost_per_term):
    """Indices of the test vectors a leave-one-out average runs over (None: unaffordable)."""
    k = int(min(s, LOO_FLOPS // max(float(cost_per_term), 1.0)))
    if k >= s:
        return np.arange(s)
    if k < LOO_MIN_TERMS:
        return None
    return np.unique(np.linspace(0, s - 1, k).round().astype(np.intp))


def _check_factors(factors, s):
    out = []
    for k, F in enumerate(factors):
        F = np.asarray(F, dtype=np.float64)
        if F.shape != (s, s):
            raise ValueError(f"factors[{k}] must have shape ({s}, {s}), got {F.shape}")
        if not np.all(np.isfinite(F)):
            raise ValueError(f"factors[{k}] contains non-finite values")
        out.append(np.triu(F))
    return out


def leave_one_out_error(Y, G_Omega=None, *, n_blocks=1, factors=(), rank_deficient="drop"):
    """The leave-one-out estimate of ``||G - P_Y G||_F`` (Epperly & Tropp 2023).

    Parameters
    ----------
    Y : array_like of shape (N, n_blocks * s)
        The basis whose span ``P_Y`` projects on, built from ``s`` Gaussian test vectors
        ``omega_i``: the sketch ``G Omega`` of the randomized SVD, a power-iterated sketch, or
        a block Krylov basis ``[G Omega, (G G^T) G Omega, ...]`` stored block after block
        (column ``i + j s`` comes from ``omega_i``). Need not be orthonormal.
    G_Omega : array_like of shape (N, s), optional
        The products ``G omega_i``. Default ``Y`` itself (then ``n_blocks`` must be 1: the
        plain sketch of the randomized SVD).
    n_blocks : int, default=1
        Number of blocks of ``s`` columns in ``Y``.
    factors : sequence of array_like of shape (s, s), default=()
        Upper triangular ``U_1, ..., U_k`` with ``Y = Y_0 U_1^{-1} ... U_k^{-1}``, where
        ``Y_0`` is the basis whose column ``i`` comes from ``omega_i`` alone: the
        re-normalisations of a power iteration (``Q = Y U^{-1}`` by QR or LU between the
        products mixes each column with the earlier ones; ``Y`` is then the last product,
        ``G Q_{2q}``). Only with ``n_blocks=1``. The factors are applied by triangular
        solves, never inverted into ``Y_0`` (which would lose the small directions).
    rank_deficient : {"drop", "nan"}, default="drop"
        What to do when ``Y`` is numerically rank-deficient: drop the directions below
        rounding (right for a ``G`` of lower rank), or return NaN (for a sketch that lost
        directions of ``G`` to rounding, as an un-normalised power iteration does: the
        kept basis is then poorer than the one the solver used, and the estimate would
        err high, by 5 to 13 times in our trials).

    Returns
    -------
    error : float
        ``sqrt((1/s) sum_i ||(I - P_{-i}) G omega_i||^2)``, with ``P_{-i}`` the projector on
        the span of ``Y`` without the columns built from ``omega_i``. NaN when even
        ``LOO_MIN_TERMS`` terms would cost more than :data:`LOO_FLOPS` (a rank-deficient
        ``Y`` with thousands of columns).

    Raises
    ------
    ValueError
        On shapes that do not fit, non-finite or complex entries, ``s < 2``.

    Notes
    -----
    Since ``omega_i`` is independent of ``P_{-i}``, each term has expectation
    ``||G - P_{-i} G||_F^2``: the estimate is unbiased for the error of the approximation
    built from ``s - 1`` test vectors, which is at least that of all ``s`` in expectation
    (a slight, safe overestimate). No product with ``G`` is needed: with ``Y_0 = Q R``
    (``R`` invertible), the part of ``span(Y)`` that leaving ``omega_i`` out removes is
    ``span(Q Z_i)``, ``Z_i = R^{-T} E_i`` (``E_i`` the columns of ``omega_i``), because
    ``Z_i^T R`` vanishes on the other columns. Hence
    ``(I - P_{-i}) x = (I - Q Q^T) x + Q W_i W_i^T Q^T x`` with ``W_i`` an orthonormal basis
    of ``span(Z_i)``, and the two parts are orthogonal. ``R`` is replaced by ``Sigma V^T`` of
    the SVD of ``Y`` (times ``U_k ... U_1`` with ``factors``: ``Z_i = Sigma^{-1} V^T
    U_k^{-T} ... U_1^{-T} e_i``). Where singular values fall below ``max(N, l) eps_mach
    s_1`` (a numerically rank-deficient sketch, e.g. ``G`` of lower rank) or a factor is
    singular, those directions are dropped and the removed space is the null space of
    ``R[:, others]^T`` (one small SVD per test vector). For ``Y = G Omega`` this reduces to
    the paper's ``(1/s) sum_i 1 / ||R^{-1}[i, :]||^2``. Cost ``O(N l^2)`` plus, with
    ``k`` factors, ``O(k l^2)`` per term; the terms are thinned to an evenly spaced subset
    past :data:`LOO_FLOPS`.

    References
    ----------
    E. N. Epperly and J. A. Tropp, "Efficient error and variance estimation for randomized
    matrix computations", SIAM J. Sci. Comput. 46 (2024), §2; arXiv:2207.06342.
    """
    Y = _check_matrix(Y, "Y", min_cols=2)
    if isinstance(n_blocks, bool) or not isinstance(n_blocks, (int, np.integer)) or n_blocks < 1:
        raise ValueError(f"n_blocks must be a positive int, got {n_blocks!r}")
    n_blocks = int(n_blocks)
    if G_Omega is None:
        if n_blocks != 1:
            raise ValueError("G_Omega must be given when n_blocks > 1 (Y is not G Omega)")
        X = Y
    else:
        X = _check_matrix(G_Omega, "G_Omega", min_cols=2)
    N, width = Y.shape
    s = X.shape[1]
    if X.shape[0] != N:
        raise ValueError(f"G_Omega has {X.shape[0]} rows, Y has {N}")
    if width != n_blocks * s:
        raise ValueError(f"Y must have n_blocks * s = {n_blocks} * {s} columns, got {width}")
    factors = _check_factors(factors, s)
    if factors and n_blocks != 1:
        raise ValueError("factors can only be given with n_blocks=1")
    W, sig, Vt = np.linalg.svd(Y, full_matrices=False)
    if sig.size == 0 or sig[0] == 0.0:
        # Y = 0: the projection is 0 and the error is ||G||_F, estimated by the probes X.
        return float(np.linalg.norm(X) / math.sqrt(s))
    tol = max(N, width) * np.finfo(np.float64).eps * sig[0]
    keep = sig > tol
    singular = any(not np.all(np.abs(np.diag(F)) > 0) for F in factors)
    full_rank = bool(keep.all()) and not singular
    if rank_deficient not in ("drop", "nan"):
        raise ValueError(f"rank_deficient must be 'drop' or 'nan', got {rank_deficient!r}")
    if not full_rank and rank_deficient == "nan":
        return float("nan")
    W, sig, Vt = W[:, keep], sig[keep], Vt[keep]
    QtX = W.T @ X
    # formed, not subtracted from ||x_i||^2: the difference would cancel for small errors
    rest = X - W @ QtX
    outside = np.einsum("ij,ij->j", rest, rest)
    if full_rank:
        idx = _terms(s, len(factors) * width**2 + width * n_blocks**2)
    else:
        idx = _terms(s, width**3)
    if idx is None:
        return float("nan")
    R = sig[:, None] * Vt  # Y = W R
    if factors and full_rank:
        from scipy.linalg import solve_triangular

        # rows i of T = U_1^{-1} ... U_k^{-1}: solve U_1^T x = e_i, then U_2^T, ...
        T_rows = np.eye(s)[:, idx]
        for F in factors:
            T_rows = solve_triangular(F, T_rows, trans="T", lower=False, check_finite=False)
        Z = (Vt @ T_rows) / sig[:, None]
        Z /= np.linalg.norm(Z, axis=0)
        removed = np.einsum("ij,ij->j", Z, QtX[:, idx])
        return math.sqrt(float(np.sum(outside[idx] + removed**2)) / idx.size)
    if factors:
        # R_0 = R U_k ... U_1: the coordinates of Y_0 (no inversion: products only)
        for F in reversed(factors):
            R = R @ F
    total = 0.0
    for i in idx:
        cols = np.arange(i, width, s)
        if full_rank:
            # Z_i = R^{-T} E_i with R = diag(sig) Vt: the removed directions, in Q's basis.
            Wi = np.linalg.qr(Vt[:, cols] / sig[:, None])[0]
        else:
            # Rank-deficient Y: the directions no other column reaches, the null space of
            # R[:, others]^T (often empty: the other columns still span everything).
            others = np.delete(R, cols, axis=1)
            Uo, so, _ = np.linalg.svd(others, full_matrices=True)
            Wi = Uo[:, int(np.sum(so > tol)) :]
        removed = Wi.T @ QtX[:, i]
        total += float(outside[i]) + float(removed @ removed)
    return math.sqrt(total / idx.size)


def _orth(Z, reference=None):
    """Orthonormal basis of ``span(Z)``, dropping directions below rounding (an exhausted
    Krylov space must not gain noise directions, which would shrink the removed space)."""
    Uz, sz, _ = np.linalg.svd(Z, full_matrices=False)
    top = sz[0] if reference is None and sz.size else (reference or 0.0)
    return Uz[:, sz > Z.shape[0] * np.finfo(np.float64).eps * max(top, 0.0)]


def krylov_leave_one_out_error(R, C0, H):
    """Leave-one-out estimate of ``||A - P_K A||_F`` for a block Krylov space ``K``.

    For the space ``K = A [Omega, (A^T A) Omega, ..., (A^T A)^q Omega]`` (``Omega`` an
    ``M x s`` Gaussian block) held, as :func:`solvers.block_krylov` holds it, through an
    orthonormal basis ``Q`` (``M x n``, ``n = (q + 1) s``) of the right-side space, built
    block by block with the products ``Z_k = A^T A Q_k`` and ``A Q = P R`` (``P``
    orthonormal, ``span(P) = K``).

    Parameters
    ----------
    R : array_like of shape (n, n)
        The triangular factor of ``A Q = P R``.
    C0 : array_like of shape (n, s)
        ``Q^T Omega``: the start block in ``Q``'s coordinates.
    H : array_like of shape (n, q * s)
        ``Q^T A^T A Q[:, :q s]``: the products made while building ``Q`` (``Q^T Z_k``,
        block after block), exact because each ``Z_k`` lies in ``span(Q)``.

    Returns
    -------
    error : float
        ``sqrt((1/s) sum_i ||(I - P_{-i}) A omega_i||^2)`` with ``P_{-i}`` the projector on
        the Krylov space of ``Omega`` without its column ``i``; NaN when even
        ``LOO_MIN_TERMS`` terms cost more than :data:`LOO_FLOPS` (a basis of more than about
        a thousand columns).

    Notes
    -----
    The estimate of :func:`leave_one_out_error` with ``n_blocks = q + 1``, computed without
    the power basis ``[A Omega, (A A^T) A Omega, ...]``, whose columns line up with the top
    singular vectors and whose SVD would lose the small directions. In ``Q``'s
    coordinates the Krylov space of ``Omega`` without column ``i`` is the block Krylov space
    of the small matrix ``H`` started from ``C0`` without column ``i`` (``A^T A`` maps the
    span of the first ``q`` blocks of ``Q`` into ``span(Q)`` as ``H``), built here with
    orthonormalised blocks, as the solver built ``Q``. Mapped by ``R`` to ``K``'s
    coordinates, its orthogonal complement is the removed space ``W_i``; ``A omega_i`` has
    coordinates ``R C0[:, i]`` and no part outside ``K``, so the term is
    ``||W_i^T R C0[:, i]||^2``. Cost ``O(q n^2 s)`` per term. NaN where ``R`` is
    singular (``A Q`` rank-deficient: ``G`` of lower rank than the basis).
    """
    R = _check_matrix(R, "R", min_cols=2)
    C0 = _check_matrix(C0, "C0", min_cols=2)
    n, s = C0.shape
    if R.shape != (n, n):
        raise ValueError(f"R must have shape ({n}, {n}), got {R.shape}")
    H = np.asarray(H, dtype=np.float64)
    if H.ndim != 2 or H.shape[0] != n or H.shape[1] % s:
        raise ValueError(f"H must have {n} rows and a multiple of s = {s} columns, got {H.shape}")
    if not np.all(np.isfinite(H)):
        raise ValueError("H contains non-finite values")
    q = H.shape[1] // s
    if n != (q + 1) * s:
        raise ValueError(f"R must be (q + 1) s = {(q + 1) * s} square, got {n}")
    idx = _terms(s, (q + 1) * n * n * s + n**3)
    if idx is None:
        return float("nan")
    X = R @ C0  # A omega_i in P's coordinates
    scale = np.linalg.norm(R, 2)
    if scale == 0.0:
        return 0.0
    tol = n * np.finfo(np.float64).eps * scale
    h_norm = float(np.linalg.norm(H, 2)) if H.size else 0.0
    if np.min(np.abs(np.diag(R))) <= tol:
        return float("nan")  # A Q rank-deficient: a G of lower rank, the space exhausted
    from scipy.linalg import solve_triangular

    extra = 6  # Gaussian vectors beyond the complement's dimension
    probes = np.random.default_rng(0).standard_normal((n, n + extra))
    total = 0.0
    for i in idx:
        blocks = [_orth(np.delete(C0, i, axis=1))]
        for _ in range(q):
            Z = H @ blocks[-1][: H.shape[1]]
            basis = np.hstack(blocks)
            for _ in range(2):  # block Gram-Schmidt twice
                Z = Z - basis @ (basis.T @ Z)
            blocks.append(_orth(Z, reference=h_norm))
        S = np.hstack(blocks)
        # The complement of span(R S) is R^{-T} times that of span(S): the latter from
        # Gaussian vectors with S projected out (twice), O(n^2 q) rather than a full SVD.
        P = probes[:, : n - S.shape[1] + extra]
        for _ in range(2):
            P = P - S @ (S.T @ P)
        Up, sp_, _ = np.linalg.svd(P, full_matrices=False)
        perp = Up[:, sp_ > 1e-8 * sp_[0]] if sp_.size and sp_[0] > 0 else Up[:, :0]
        if perp.shape[1] == 0:
            continue
        Wi = np.linalg.qr(solve_triangular(R, perp, trans="T", lower=False, check_finite=False))[0]
        removed = Wi.T @ X[:, i]
        total += float(removed @ removed)
    return math.sqrt(total / idx.size)


def probe_error(G_Omega, U=None):
    """The Gaussian probe estimate of ``||(I - U U^T) G||_F`` (Halko, Martinsson & Tropp §4.3).

    Parameters
    ----------
    G_Omega : array_like of shape (N, k)
        ``G Omega`` for ``k`` independent standard Gaussian probes ``Omega`` (M x k), drawn
        independently of ``U``.
    U : array_like of shape (N, r), optional
        The basis whose residual is probed (orthonormal columns: ``U U^T`` is then the
        projector; otherwise the estimate is of ``||(I - U U^T) G||_F`` as written). None:
        estimate ``||G||_F``.

    Returns
    -------
    error : float
        ``||(I - U U^T) G Omega||_F / sqrt(k)``.

    Raises
    ------
    ValueError
        On shapes that do not fit, non-finite or complex entries.

    Notes
    -----
    With ``R = (I - U U^T) G = sum_j rho_j a_j b_j^T``, ``||R Omega||_F^2 = sum_j rho_j^2
    chi2_k(j)`` (independent chi-square variables with ``k`` degrees of freedom): the squared
    estimate is unbiased, with relative standard deviation ``sqrt(2 / k)`` at most (rank-one
    ``R``) and less the more singular values share ``||R||_F``. See
    :func:`probe_failure_probability` for its tails.

    References
    ----------
    N. Halko, P.-G. Martinsson and J. A. Tropp, SIAM Review 53 (2011), §4.3.
    """
    X = _check_matrix(G_Omega, "G_Omega")
    if U is not None:
        U = _check_matrix(U, "U")
        if U.shape[0] != X.shape[0]:
            raise ValueError(f"U has {U.shape[0]} rows, G_Omega has {X.shape[0]}")
        X = X - U @ (U.T @ X)
    return float(np.linalg.norm(X) / math.sqrt(X.shape[1]))


def probe_failure_probability(n_probes=N_PROBES, factor=PROBE_SAFETY):
    """Worst-case chance that :func:`probe_error` is below ``error / factor``.

    Parameters
    ----------
    n_probes : int, default=N_PROBES
    factor : float, default=PROBE_SAFETY
        Must exceed 1.

    Returns
    -------
    p : float
        ``P(chi2_k <= k / factor^2)``: exact for a rank-one residual; for residuals of higher
        rank the squared estimate is an average of more chi-square variables and the chance
        is smaller (checked by simulation: weights (0.5, 0.5) give 3e-4 against 9.1e-3 for
        ``k = 10``, ``factor = 2``). So a rule that stops when ``factor * estimate <= tol``
        stops with an error above ``tol`` with at most this probability, per check.

    Examples
    --------
    >>> round(probe_failure_probability(10, 2.0), 4)
    0.0091
    """
    if isinstance(n_probes, bool) or not isinstance(n_probes, (int, np.integer)) or n_probes < 1:
        raise ValueError(f"n_probes must be a positive int, got {n_probes!r}")
    factor = _check_nonneg(factor, "factor")
    if factor <= 1:
        raise ValueError(f"factor must be > 1, got {factor!r}")
    from scipy import stats  # only here: scipy.stats is slow to import

    return float(stats.chi2.cdf(n_probes / factor**2, n_probes))


def sketch_error_estimate(s, rank, *, fro2=None, loo=None, exact=False, rtol=GAP_RTOL):
    """A randomized solver's estimate of ``||G - U_r U_r^T G||_F``, with no extra product.

    For a solver that projected ``G`` on an orthonormal basis ``Q`` and returned
    ``U_r = Q`` times the top ``rank`` left singular vectors of ``B = Q^T G`` (singular
    values ``s``, all of them):

    * ``exact``: ``Q`` spans all of ``R^N``, so the error is that of the truncation alone,
      ``sqrt(sum(s[rank:]^2))`` (kind ``"exact"``);
    * ``fro2`` known: ``||G - U_r U_r^T G||_F^2 = ||G||_F^2 - sum(s[:rank]^2)``, the
      Frobenius gap (:func:`frobenius_gap`), used while it is resolved (kind ``"gap"``);
    * else the leave-one-out estimate of the basis error ``loo()`` (called only then: it
      costs dense work), extended to the truncation by :func:`truncation_error`
      (kind ``"loo"``).

    Parameters
    ----------
    s : array_like
        All singular values of ``B``, descending.
    rank : int
        Number kept.
    fro2 : float, optional
        ``||G||_F^2``, exact to rounding.
    loo : callable, optional
        ``loo() -> float``: the leave-one-out estimate of ``||G - Q Q^T G||_F`` (may be NaN).
    exact : bool, default=False
        ``Q`` spans ``R^N``.
    rtol : float, default=GAP_RTOL
        Passed to :func:`frobenius_gap` (:data:`GAP_RTOL_FLOAT32` for a float32 sketch).

    Returns
    -------
    estimate : float
        NaN where none applies.
    kind : {"exact", "gap", "loo"} or None
    """
    s = np.asarray(s, dtype=np.float64).ravel()
    kept2 = float(s[:rank] @ s[:rank])
    if exact:
        return truncation_error(0.0, s[rank:]), "exact"
    if fro2 is not None:
        gap = frobenius_gap(float(fro2), kept2, rtol=rtol) if kept2 <= fro2 else math.nan
        if math.isfinite(gap):
            return gap, "gap"
    if loo is not None:
        value = float(loo())
        if math.isfinite(value) and value >= 0:
            return truncation_error(value, s[rank:]), "loo"
    return math.nan, None


def truncation_error(error, dropped):
    """Error of the rank-``r`` truncation from the error of the whole basis.

    Parameters
    ----------
    error : float
        ``||G - Q Q^T G||_F`` (or an estimate: :func:`leave_one_out_error`).
    dropped : array_like
        The singular values of ``B = Q^T G`` beyond the ``r`` kept.

    Returns
    -------
    error_r : float
        ``sqrt(error^2 + sum(dropped^2)) = ||G - U_r U_r^T G||_F`` with ``U_r = Q`` times the
        top ``r`` left singular vectors of ``B`` (exact: ``(I - Q Q^T) G`` and
        ``Q (B - B_r)`` are orthogonal).
    """
    error = _check_nonneg(error, "error")
    d = np.asarray(dropped, dtype=np.float64).ravel()
    if not np.all(np.isfinite(d)):
        raise ValueError("dropped contains non-finite values")
    return math.sqrt(error**2 + float(d @ d))


def probe_fro2_lower(sum_sq, n_probes, failure=NORM_FAILURE):
    """Lower confidence bound on ``||G||_F^2`` from Gaussian probes: ``sum_sq / q``.

    Parameters
    ----------
    sum_sq : float
        ``||G Omega||_F^2`` for a Gaussian ``Omega`` with ``n_probes`` columns (pooled over
        independent draws: their squared norms and column counts add).
    n_probes : int
        Columns of ``Omega`` in all.
    failure : float, default=NORM_FAILURE
        In ``(0, 1)``.

    Returns
    -------
    lower : float
        ``sum_sq / chi2.ppf(1 - failure, n_probes)``; ``P(lower > ||G||_F^2) <= failure``.

    Notes
    -----
    ``||G Omega||_F^2 = sum_i sigma_i^2 X_i`` with independent ``X_i ~ chi2_k``
    (``k = n_probes``), so ``sum_sq / k`` is unbiased for ``||G||_F^2`` but overestimates it
    as often as it underestimates: divided into an error, it makes a relative error look
    smaller than it is (issue 32: 4-34% high on Student-t RBF kernels, and block Krylov
    stopped at eps = 0.1 with a true error of 0.1038). With the weights ``sigma_i^2 /
    ||G||_F^2`` summing to 1, the upper tail of the sum is largest for a rank-one ``G``
    (all weight on one ``chi2_k``: the worst case of the Gaussian trace estimator, Roosta-
    Khorasani & Ascher 2015), so ``P(sum_sq > q ||G||_F^2) <= P(chi2_k > q) = failure``.
    At ``k = 10`` and 1% the bound is ``sum_sq / 23.2``: ``||G||_F`` is taken 1.52 times
    below the unbiased estimate; pooled over 100 columns, 1.17 times.

    References
    ----------
    F. Roosta-Khorasani, U. Ascher, "Improved bounds on sample size for implicit matrix
    trace estimators", Found. Comput. Math. 15 (2015).

    Examples
    --------
    >>> round(probe_fro2_lower(10.0, 10), 4)
    0.4309
    """
    if isinstance(n_probes, bool) or not isinstance(n_probes, (int, np.integer)) or n_probes < 1:
        raise ValueError(f"n_probes must be a positive int, got {n_probes!r}")
    sum_sq = _check_nonneg(sum_sq, "sum_sq")
    if not 0 < failure < 1:
        raise ValueError(f"failure must lie in (0, 1), got {failure!r}")
    from scipy import stats  # only here: scipy.stats is slow to import

    return float(sum_sq / stats.chi2.ppf(1.0 - failure, n_probes))


def _implied_bounds(U, s, V, high):
    """What ``||G - U S V^T||_F <= high`` says of the answer against the SVD of ``G``.

    With ``R = G - U S V^T`` and orthonormal ``U``, ``V``: Weyl, ``|sigma_i(G) - s_i| <=
    ||R||_2 <= high``, and ``sigma_(r+1)(G) <= high`` (``U S V^T`` has rank r); Wedin,
    ``sin theta <= max(||R V||, ||R^T U||) / (s_r - sigma_(r+1)(G)) <= high / (s_r -
    high)``. ``sv_error_high`` is relative to ``s_1 - high`` (a lower bound on
    ``sigma_1(G)``); ``sin_theta_high`` is inf where ``s_r <= high``, and both are NaN
    where the vectors are not orthonormal (to 1e-8), which Wedin's bound needs.
    """
    s = np.asarray(s, dtype=np.float64)
    ok = s.size and all(
        float(np.abs(B.T @ B - np.eye(B.shape[1])).max()) <= 1e-8
        for B in (np.asarray(U, np.float64), np.asarray(V, np.float64))
    )
    if not (ok and math.isfinite(high)):
        return {"sv_error_high": math.nan, "sin_theta_high": math.nan}
    top, low = float(s[0]) - high, float(s[-1]) - high
    return {
        "sv_error_high": high / top if top > 0 else math.inf,
        "sin_theta_high": high / low if low > 0 else math.inf,
    }


def row_sample_error(src, U, s, V, n_rows, rng, *, failure=0.01, weights=None):
    """``||G - U S V^T||_F`` estimated from uniformly sampled rows of ``G``, with an interval.

    Parameters
    ----------
    src : matrix source with ``rows(idx)``
        Read ``n_rows`` rows, a few at a time (``_ROW_CHUNK``): no product, no column.
    U, s, V : ndarray
        The answer (``V`` with orthonormal columns).
    n_rows : int
        Rows to read (at most N), drawn uniformly without replacement.
    rng : numpy.random.Generator
    failure : float, default=0.01
        Nominal chance that the interval misses the error.
    weights : ndarray of shape (N,) or None
        Where the error may sit (nonnegative; e.g. a factorisation's residual diagonal):
        rows are then drawn with replacement with probabilities ``p_i = 1 / (2 N) + w_i /
        (2 sum w)`` (half uniform, half by weight) and each term divided by ``p_i``.

    Returns
    -------
    dict
        ``kind`` (``"sampled_rows"``), ``rows``, ``fro_error`` (the estimate of
        ``||G - U S V^T||_F``), ``fro_error_low``/``fro_error_high`` (the interval),
        ``relative_error`` (``fro_error`` over the same rows' estimate of ``||G||_F``),
        ``sv_error_high`` and ``sin_theta_high`` (what the interval's upper end implies
        for the values, relative to ``sigma_1(G)``, and the top-r subspaces, against the
        SVD of ``G`` itself: Weyl and Wedin; they hold wherever the interval does),
        ``failure``, ``cluster_weight`` (a set of rows holding at least this fraction of the
        rows has a row in the sample with probability at least ``1 - failure``) and
        ``seconds``.

    Notes
    -----
    With ``e_i = ||G[i] - (U S)[i] V^T||^2`` (residual rows, formed directly: no
    cancellation) and a uniform sample ``I`` of ``n`` rows, ``T = (N / n) sum_I e_i`` is
    unbiased for ``||G - U S V^T||_F^2``; its standard error is
    ``N sqrt((1 - n / N) var(e) / n)`` (finite population), and the interval is ``T`` plus or
    minus Student's ``t_{n-1}`` quantile at ``1 - failure / 2`` times it, square-rooted (its
    lower end at 0). This is a large-sample interval, not a bound: where the error sits on a
    few rows it rests on the sample having seen them. A set of rows holding a fraction ``w``
    is missed by every sampled row with probability at most ``(1 - w)^n``;
    ``cluster_weight`` is the ``w`` at which that is ``failure``. With ``weights`` the same
    holds with the probabilities ``p_i`` (unbiased for any positive ``p``: ``T = mean(e_i /
    p_i)``); rows the weights point to are read far more often, and a set of rows of
    fraction ``w`` is missed with probability at most ``(1 - w / 2)^n``. Measured on the
    rare-cluster SNE family (N = M = 3000, RPCholesky at 80 pivots, 64 rows): uniform rows
    gave the interval [0.0065, 0.0069] around a true error of 0.0082 (the rows of a small
    cluster, where the error sits, were not in the sample). The rows are ``G``'s own
    (for a normalised kernel, each divided by its exact row sum): the estimate measures the
    answer against ``G`` itself, whatever the method approximated (RPCholesky's normalisers,
    for one, are estimates).
    """
    # start-up: scipy.stats loads most of SciPy (optimize, spatial, interpolate, special)
    from scipy import stats

    t0 = time.perf_counter()
    N = int(src.shape[0])
    n = int(min(max(int(n_rows), 2), N))
    if weights is None:
        idx = np.sort(rng.choice(N, size=n, replace=False))
        inv_p = np.full(n, float(N))
        fpc = max(1.0 - n / N, 0.0)  # without replacement: the finite population factor
        catch = 1.0
    else:
        w = np.nan_to_num(np.asarray(weights, dtype=np.float64), nan=0.0, posinf=0.0)
        w = np.maximum(w, 0.0)
        p = np.full(N, 0.5 / N) + (0.5 * w / w.sum() if w.sum() > 0 else 0.5 / N)
        p /= p.sum()
        idx = np.sort(rng.choice(N, size=n, replace=True, p=p))
        inv_p, fpc, catch = 1.0 / p[idx], 1.0, 0.5
    US = np.asarray(U, dtype=np.float64) * np.asarray(s, dtype=np.float64)
    Vt = np.asarray(V, dtype=np.float64).T
    e = np.empty(n)
    g = np.empty(n)
    for a in range(0, n, _ROW_CHUNK):
        rows = idx[a : a + _ROW_CHUNK]
        R = np.asarray(src.rows(rows), dtype=np.float64)
        g[a : a + rows.size] = np.einsum("ij,ij->i", R, R)
        R -= US[rows] @ Vt
        e[a : a + rows.size] = np.einsum("ij,ij->i", R, R)
    terms = e * inv_p
    total = float(np.mean(terms))
    se = math.sqrt(fpc * float(np.var(terms, ddof=1)) / n)
    q = float(stats.t.ppf(1.0 - failure / 2.0, n - 1))
    fro2 = float(np.mean(g * inv_p))
    high = math.sqrt(total + q * se)
    return {
        "kind": "sampled_rows",
        "rows": n,
        "fro_error": math.sqrt(total),
        "fro_error_low": math.sqrt(max(total - q * se, 0.0)),
        "fro_error_high": high,
        **_implied_bounds(U, s, V, high),
        "relative_error": math.sqrt(total / fro2) if fro2 > 0 else math.nan,
        "failure": float(failure),
        "cluster_weight": float((1.0 - failure ** (1.0 / n)) / catch),
        "weighted": weights is not None,
        "seconds": time.perf_counter() - t0,
    }
