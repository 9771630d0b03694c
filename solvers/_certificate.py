"""Certificates that see both sides of an answer: inflated values and missed directions.

:mod:`solvers._check` bounds ``sigma_i(G)`` from below and flags values above those bounds
(inflation). An answer can also be wrong the other way: it can miss a whole direction of
``G`` (a rare cluster no sampled row or column touched) and return small or zero values
with vectors that span something else. Nothing inflated, so the inflation check passes.
This module adds the checks for that side; each rests on a deterministic inequality, and
randomness only decides whether the evidence is found.

*Values below a lower bound.* ``l_i <= sigma_i(G)`` (interlacing); ``l_i > (1 + MISS_SLACK)
s_i`` proves ``s_i`` at least ``MISS_SLACK`` (10%) below the truth: unreliable.

*The deflated operator.* With the answer's orthonormal ``U`` (N x r) and ``V`` (M x r), let
``D = (I - U U^T) G (I - V V^T)``. For the exact top-r triplets ``||D||_2 = sigma_{r+1}(G)
<= sigma_r(G)``. A lower bound ``d <= ||D||_2`` with ``d > (1 + MISS_SLACK) s_r`` proves a
unit pair ``x`` outside ``span(U)``, ``y`` outside ``span(V)`` with ``x^T G y > (1 +
MISS_SLACK) s_r``: ``G`` carries more outside the answer than the answer's own r-th value,
so a top direction is missing (or ``s_r`` is 10% low). Interlacing gives ``d`` from any
block: ``sigma_1(P A Q) <= sigma_1(A)`` for orthogonal projectors ``P``, ``Q``.

*Two ways to find ``d``.*

* :func:`product_certificate` (``check_passes`` products with ``G`` or ``G^T``): block power
  iteration on ``D`` from ``b = N_EXTRA`` Gaussian starts, fused with the inflation bounds
  (the same products carry ``G V`` or ``G^T U``). Failure probability: let ``D`` have a
  singular value ``t`` above the threshold ``theta = (1 + MISS_SLACK) s_r``. After ``p``
  products the estimate is the power method's Rayleigh quotient of ``D^T D`` (or ``D D^T``)
  from each start, and by Kuczynski & Wozniakowski (1992, Thm. 3.1, in the form
  ``0.824 sqrt(n) (1 - eps)^(p / 2)`` with ``1 - eps = (theta / t)^2``) one Gaussian start
  stays below ``theta`` with probability at most ``0.824 sqrt(n) (theta / t)^p`` (``n`` the
  dimension of the start space). The block holds every start's iterate, so all ``b`` fail
  together with probability at most ``min(1, 0.824 sqrt(n) (theta / t)^p)^b``
  (:func:`power_miss_probability`). With one product this certifies only directions far
  above ``s_r`` (``t / theta >~ 2 sqrt(n)`` for 1% at ``b = 5``); every further product
  divides the bound by ``t / theta``.
* :func:`sampled_certificate` (a budget of entries, no pass): ``n_c`` random columns of the
  left residual ``(I - U U^T) G[:, J_s]`` and ``n_r`` random rows of the right residual
  ``G[I_s, :] (I - V V^T)``. Each is a column (row) submatrix of ``(I - U U^T) G``
  (``G (I - V V^T)``), so its top singular value is a lower bound on that operator's norm,
  which for the exact answer is ``sigma_{r+1}(G)``: the same test, no false alarm on an
  exact answer. A missed cluster holding a fraction ``w`` of the rows whose rows each carry
  more than ``theta`` outside ``span(V)`` is caught unless every sampled row misses it:
  probability at least ``1 - (1 - w)^{n_r}`` (sampling without replacement does better),
  and likewise for columns (:func:`catch_probability`). The same rows and columns give an
  unbiased estimate of ``||G - U S V^T||_F^2`` (``N / n_r`` times the sampled rows' share,
  ``M / n_c`` the columns'; their mean is reported, with its standard error).

Every quantity that cannot be computed (a non-finite residual, an empty sample) makes the
answer unreliable: a check that cannot run never vouches for it.

References
----------
J. Kuczynski, H. Wozniakowski, "Estimating the largest eigenvalue by the power and Lanczos
algorithms with a random start", SIAM J. Matrix Anal. Appl. 13(4), 1992.
N. Halko, P.-G. Martinsson, J. A. Tropp, "Finding structure with randomness", SIAM Review
53(2), 2011 (Sec. 4.3, the a-posteriori error estimate from Gaussian probes).
"""

from __future__ import annotations

import time
import warnings

import numpy as np
from scipy import linalg

from ._check import CHECK_FACTOR, N_EXTRA, flag_inflated, lower_bounds
from ._source import as_source

__all__ = [
    "MISS_SLACK",
    "DEFAULT_BUDGET",
    "product_certificate",
    "sampled_certificate",
    "power_miss_probability",
    "catch_probability",
    "judge",
]

#: A value more than this fraction below a proven lower bound, or a deflated norm this much
#: above ``s_r``, makes an answer unreliable.
MISS_SLACK = 0.1

#: Default budget of :func:`sampled_certificate`: this fraction of the entries the solve's
#: own sample read.
DEFAULT_BUDGET = 0.1


def _orth(X):
    if X.shape[1] == 0:
        return X
    return linalg.qr(X, mode="economic", check_finite=False)[0]


def _basis(U):
    """An orthonormal basis of ``span(U)`` (the raw extension's vectors are not orthogonal)."""
    U = np.asarray(U, dtype=np.float64)
    if not np.all(np.isfinite(U)):
        return np.full_like(U, np.nan)
    return _orth(U)


def _deflate(Q, X):
    """``(I - Q Q^T) X``, twice (classical Gram-Schmidt twice is orthogonal to rounding)."""
    for _ in range(2):
        X = X - Q @ (Q.T @ X)
    return X


def _top_sv(X):
    if X.size == 0:
        return 0.0
    if not np.all(np.isfinite(X)):
        return np.nan
    return float(linalg.svd(X, compute_uv=False, check_finite=False)[0])


def product_certificate(src, U, V, k, n_passes, rng, n_extra=N_EXTRA):
    """Lower bounds on ``sigma_1..k(G)`` and on ``||(I - U U^T) G (I - V V^T)||_2``.

    Pass 1 multiplies ``G [V, X]`` with ``X`` ``n_extra`` Gaussian columns orthogonal to
    ``V``; pass 2 ``G^T [U, Y]`` with ``Y`` an orthonormal basis of the deflated ``(I - U
    U^T) G X``; and so on, alternating. The singular values of each product bound
    ``sigma_i(G)`` from below (interlacing, elementwise best kept); the top singular value
    of its deflated part bounds ``||D||_2`` (see the module docstring, with the failure
    probability). Each product is one pass (counted by the caller's counting source).

    Returns ``lower`` (k,), ``deflated`` (float, NaN when a product was not finite) and
    ``width`` (the number of Gaussian starts).
    """
    N, M = src.shape
    U, V = _basis(U), _basis(V)
    b = max(0, min(n_extra, M - V.shape[1], N - U.shape[1]))
    X = _orth(_deflate(V, rng.standard_normal((M, b))))
    best, deflated = np.zeros(k), 0.0
    right = True
    for _ in range(n_passes):
        basis, other = (V, U) if right else (U, V)
        block = np.hstack([basis, X])
        Y = np.asarray(src.matmat(block) if right else src.rmatmat(block), np.float64)
        best = np.maximum(best, lower_bounds(Y, k))
        if not np.all(np.isfinite(Y)):  # the check cannot run: unknown, never 0
            return best, np.nan, b
        Yd = _deflate(other, Y[:, basis.shape[1]:])
        deflated = max(deflated, _top_sv(Yd))
        X = _orth(Yd)
        right = not right
    return best, deflated, b


def _budget_split(budget, shape):
    """Rows and columns a budget of entries buys, split evenly, at least one of each."""
    N, M = shape
    n_r = int(min(N, max(1, budget // (2 * M))))
    n_c = int(min(M, max(1, budget // (2 * N))))
    return n_r, n_c


def sampled_certificate(src, U, s, V, budget, rng):
    """The missed-direction test and an error estimate from random rows and columns.

    Reads ``n_r`` uniformly random rows and ``n_c`` columns (``budget`` entries split evenly
    between the sides, at least one of each) through the source's ``rows``/``cols``, which
    lazy sources compute in tiles. See the module docstring for what is proven.

    Returns a dict: ``rows``, ``cols``, ``entries``, ``seconds``, ``deflated`` (the lower
    bound on ``max(||(I - U U^T) G||, ||G (I - V V^T)||)``), ``fro_error`` (estimate of
    ``||G - U S V^T||_F``), ``fro_error_se`` (its standard error) and ``catch_1pct`` (the
    probability of catching a missed cluster holding 1% of the rows, or of the columns).
    """
    t0 = time.perf_counter()
    if not hasattr(src, "rows"):
        src = as_source(src)
    N, M = src.shape
    n_r, n_c = _budget_split(budget, (N, M))
    U, V = np.asarray(U, dtype=np.float64), np.asarray(V, dtype=np.float64)
    Qu, Qv = _basis(U), _basis(V)
    s = np.asarray(s, dtype=np.float64)
    I_s = np.sort(rng.choice(N, n_r, replace=False))
    J_s = np.sort(rng.choice(M, n_c, replace=False))
    R = np.asarray(src.rows(I_s), dtype=np.float64)
    C = np.asarray(src.cols(J_s), dtype=np.float64)
    right = _deflate(Qv, R.T).T        # rows of G (I - V V^T)
    left = _deflate(Qu, C)             # columns of (I - U U^T) G
    deflated = max(_top_sv(right), _top_sv(left))
    if not np.isfinite(deflated):
        deflated = np.nan
    # ||G - U S V^T||_F^2 from each side, each unbiased under uniform sampling.
    row_res = np.sum((R - (U[I_s] * s) @ V.T) ** 2, axis=1)
    col_res = np.sum((C - (U * s) @ V[J_s].T) ** 2, axis=0)
    est_r, est_c = N * row_res.mean(), M * col_res.mean()
    var_r = N**2 * row_res.var(ddof=1) / n_r * (1 - n_r / N) if n_r > 1 else np.inf
    var_c = M**2 * col_res.var(ddof=1) / n_c * (1 - n_c / M) if n_c > 1 else np.inf
    fro2 = (est_r + est_c) / 2
    se2 = (var_r + var_c) / 4
    return {
        "kind": "sampled",
        "rows": int(n_r),
        "cols": int(n_c),
        "entries": int(n_r * M + n_c * N),
        "budget": int(budget),
        "deflated": float(deflated),
        "fro_error": float(np.sqrt(max(fro2, 0.0))) if np.isfinite(fro2) else np.nan,
        "fro_error_se": float(np.sqrt(se2) / (2 * np.sqrt(fro2))) if fro2 > 0 else np.nan,
        "catch_1pct": float(max(catch_probability(0.01, n_r, N),
                                catch_probability(0.01, n_c, M))),
        "seconds": time.perf_counter() - t0,
    }


def power_miss_probability(ratio, n_passes, dim, width=N_EXTRA):
    """Bound on the chance that ``n_passes`` products from ``width`` Gaussian starts in a
    ``dim``-dimensional space all stay below ``theta`` when ``||D||_2 = ratio * theta``
    (Kuczynski & Wozniakowski 1992; see the module docstring)."""
    if ratio <= 1 or n_passes < 1 or width < 1:
        return 1.0
    single = min(1.0, 0.824 * np.sqrt(dim) * ratio ** (-float(n_passes)))
    return float(single**width)


def catch_probability(weight, n, total):
    """Chance that ``n`` rows drawn without replacement from ``total`` hit a cluster that
    holds a fraction ``weight`` of them (at least one of its ``ceil(weight total)`` rows)."""
    size = int(np.ceil(weight * total))
    if size <= 0:
        return 0.0
    if n + size > total:
        return 1.0
    # hypergeometric: P(no hit) = prod_{i<n} (total - size - i) / (total - i)
    i = np.arange(n)
    return float(1.0 - np.exp(np.sum(np.log1p(-size / (total - i)))))


def _threshold(s, shape, dtype):
    """``(1 + MISS_SLACK) s_r`` plus the rounding a residual can carry."""
    s = np.asarray(s, dtype=np.float64)
    top = float(np.max(s, initial=0.0))
    return (1 + MISS_SLACK) * float(s[-1]) + max(shape) * np.finfo(dtype).eps * top


def judge(method, s, shape, dtype, *, lower=None, deflated=(), advice=""):
    """``reliable`` from every bound at hand, with one ``RuntimeWarning`` saying why not.

    ``lower``: lower bounds on ``sigma_i(G)`` (inflation above ``CHECK_FACTOR`` times them,
    or values ``MISS_SLACK`` below them, are flagged). ``deflated``: ``(value, how)`` pairs,
    lower bounds on the deflated norm (see the module docstring). NaN anywhere is a check
    that could not run: unreliable.
    """
    s = np.asarray(s, dtype=np.float64)
    reasons = []
    if lower is not None:
        lower = np.asarray(lower, dtype=np.float64)[: s.size]
        bad = flag_inflated(s, lower, shape, dtype)
        if bad.size:
            i = int(bad[0])
            reasons.append(
                f"s_{i + 1} = {s[i]:.3g} is above {CHECK_FACTOR} times a lower bound "
                f"{lower[i]:.3g} on sigma_{i + 1}(G) ({bad.size} of {s.size} values)"
            )
        low = np.flatnonzero(~(lower <= (1 + MISS_SLACK) * s
                               + max(shape) * np.finfo(dtype).eps * max(s.max(), lower.max())))
        if low.size:
            i = int(low[0])
            reasons.append(
                f"s_{i + 1} = {s[i]:.3g} is below a lower bound {lower[i]:.3g} on "
                f"sigma_{i + 1}(G) ({low.size} of {s.size} values more than "
                f"{MISS_SLACK:.0%} below their bound)"
            )
    theta = _threshold(s, shape, dtype) if s.size else 0.0
    for value, how in deflated:
        if not value <= theta:  # NaN: the check could not run
            what = ("could not be computed (not finite)" if not np.isfinite(value)
                    else f"is {value:.3g}, above (1 + {MISS_SLACK}) s_{s.size} = {theta:.3g}")
            reasons.append(
                f"the norm of G outside the answer's span ({how}) {what}: a top direction "
                "is missing"
            )
    if reasons:
        warnings.warn(
            f"{method}: " + "; ".join(reasons) + ": the answer cannot be trusted "
            "(info['reliable'] = False)" + (f". To fix, {advice}" if advice else ""),
            RuntimeWarning,
            stacklevel=4,
        )
    return not reasons
