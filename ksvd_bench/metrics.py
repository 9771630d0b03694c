"""Accuracy of approximate singular triplets: the paper's eta, subspace angles and residuals.

Three weightings of eta
-----------------------
The paper measures an approximate top-``r`` SVD ``(U~, s~, V~)`` of ``G`` against the exact one
``(U, s, V)`` by

::

    eta = (1/r) sum_i w_i (1 - |u_i . u~_i| / |u~_i|) + (1/r) sum_i w_i (1 - |v_i . v~_i| / |v~_i|)

with ``w_i = lambda_i`` the exact singular values (``weights="singular_values"``, the literal
definition). Each bracket lies in ``[0, 1]``, so ``0 <= eta <= 2 * mean(w)``.

The literal weighting makes eta depend on the scale of ``G`` and lets the leading triplet decide
almost everything. On the SNE kernels of Cora and Citeseer (the paper's graph benchmarks,
uncentred) ``sigma_1 ~ 1.15`` while ``sigma_2 .. sigma_20 ~ 0.008 .. 0.002``: the top singular
vector of a row-stochastic matrix is found by any method, and an answer whose other 19 vectors
are pure noise still scores ``eta ~ (1/20) * 19 * 0.005 * 2 ~ 1e-2``. Centred, every
``sigma_i`` is below 0.01, so ``eta <= 2 * mean(sigma) < 1e-2`` holds for *any* answer.
Measured on Cora (top 20, eps = 1e-2): the asymmetric Nyström method meets the literal
tolerance with 40 sampled columns, while its uniform eta is still 1.86 (nearly orthogonal
vectors) with 380. A tolerance met by nearly any answer ranks solvers by speed alone. Hence two
more weightings:

* ``"relative"``: ``w_i = lambda_i / lambda_1``; scale-free, same emphasis on the top triplet.
* ``"uniform"``: ``w_i = 1``; every requested vector counts equally (the strict variant used for
  the headline tolerance benchmarks).

Accuracy without a reference
----------------------------
:func:`residuals` and :func:`residual_estimate` need only products with ``G`` and ``G^T``; see
:func:`residual_estimate` for the derivation of the eta estimate and its caveats.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg as sla

from solvers._source import as_source

__all__ = ["WEIGHTS", "eta", "subspace_error", "residuals", "residual_estimate"]

WEIGHTS = ("singular_values", "relative", "uniform")


def _check_weights(weights):
    if weights not in WEIGHTS:
        raise ValueError(f"weights must be one of {WEIGHTS}, got {weights!r}")


def _triplets(obj, name):
    """Return ``(U, s, V)`` of an SVD-like object as float64 arrays after checking shapes."""
    try:
        U, s, V = obj.U, obj.s, obj.V
    except AttributeError:
        raise TypeError(
            f"{name} must have attributes U, s and V (an SVDResult), got {type(obj).__name__}"
        ) from None
    U = np.asarray(U, dtype=np.float64)
    s = np.asarray(s, dtype=np.float64)
    V = np.asarray(V, dtype=np.float64)
    if U.ndim != 2 or V.ndim != 2 or s.ndim != 1:
        raise ValueError(
            f"{name}: U and V must be 2-d and s 1-d, got ndim {U.ndim}, {s.ndim}, {V.ndim}"
        )
    if not (U.shape[1] == s.shape[0] == V.shape[1]):
        raise ValueError(
            f"{name}: U, s and V must hold the same number of triplets, got U {U.shape}, "
            f"s {s.shape}, V {V.shape}"
        )
    if s.shape[0] == 0:
        raise ValueError(f"{name} holds no singular triplets")
    for arr, part in ((U, "U"), (s, "s"), (V, "V")):
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{name}.{part} contains non-finite values")
    return U, s, V


def _pair(reference, approx):
    """Reference and approximation triplets, the approximation cut to the reference's rank."""
    U, s, V = _triplets(reference, "reference")
    Ua, sa, Va = _triplets(approx, "approx")
    r = s.shape[0]
    if Ua.shape[0] != U.shape[0] or Va.shape[0] != V.shape[0]:
        raise ValueError(
            f"approx has U of {Ua.shape[0]} rows and V of {Va.shape[0]} rows, the reference "
            f"{U.shape[0]} and {V.shape[0]}"
        )
    if Ua.shape[1] < r:
        raise ValueError(
            f"approx holds {Ua.shape[1]} triplets, fewer than the reference's rank {r}"
        )
    return U, s, V, Ua[:, :r], sa[:r], Va[:, :r]


def _weights(s, weights):
    if weights == "singular_values":
        return s.copy()
    if weights == "relative":
        return s / s[0] if s[0] > 0 else np.ones_like(s)
    return np.ones_like(s)


def _misalignment(X, Xa):
    """``1 - |x_i . xa_i| / |xa_i|`` per column; a zero approximate vector counts as 1."""
    norms = np.linalg.norm(Xa, axis=0)
    dots = np.abs(np.einsum("ij,ij->j", X, Xa))
    cos = np.divide(dots, norms, out=np.zeros_like(dots), where=norms > 0)
    # Rounding can push |cos| a hair above 1; eta is non-negative by definition.
    return np.clip(1.0 - cos, 0.0, 1.0)


def eta(reference, approx, *, weights="singular_values") -> float:
    """The paper's accuracy measure eta of an approximate SVD against a reference.

    Parameters
    ----------
    reference : SVDResult or object with ``U`` (N, r), ``s`` (r,), ``V`` (M, r)
        The exact (reference) top-``r`` SVD; ``r`` is taken from it. Its columns are assumed
        to have unit norm (any SVD routine's are).
    approx : SVDResult or object with ``U`` (N, k), ``s`` (k,), ``V`` (M, k), ``k >= r``
        The approximation; its first ``r`` triplets are scored. Columns need not be unit
        vectors: each is divided by its norm, as in the paper.
    weights : {"singular_values", "relative", "uniform"}, default="singular_values"
        ``w_i = lambda_i`` (the paper), ``lambda_i / lambda_1`` or ``1``, with ``lambda`` the
        reference's singular values. See the module docstring for why three exist.

    Returns
    -------
    eta : float
        ``(1/r) sum_i w_i (1 - |u_i.u~_i|/|u~_i|) + (1/r) sum_i w_i (1 - |v_i.v~_i|/|v~_i|)``,
        in ``[0, 2 * mean(w)]``; 0 for an exact answer, invariant to sign flips of triplets.

    Raises
    ------
    ValueError
        On an unknown ``weights``, mismatching shapes, fewer than ``r`` triplets in
        ``approx`` or non-finite entries.

    Examples
    --------
    >>> import numpy as np
    >>> from types import SimpleNamespace
    >>> G = np.diag([3.0, 2.0, 1.0])
    >>> U, s, Vt = np.linalg.svd(G)
    >>> ref = SimpleNamespace(U=U[:, :2], s=s[:2], V=Vt[:2].T)
    >>> flipped = SimpleNamespace(U=-U[:, :2], s=s[:2], V=-Vt[:2].T)
    >>> eta(ref, flipped, weights="uniform")
    0.0
    """
    _check_weights(weights)
    U, s, V, Ua, _, Va = _pair(reference, approx)
    w = _weights(s, weights)
    r = s.shape[0]
    return float(w @ _misalignment(U, Ua) / r + w @ _misalignment(V, Va) / r)


def _sin_max(X, Y):
    """Sine of the largest principal angle between span(X) and span(Y) (equal column counts)."""
    r = X.shape[1]
    # A rank-deficient approximation misses a whole direction: angle pi/2.
    if np.linalg.matrix_rank(Y) < r:
        return 1.0
    return float(min(1.0, np.sin(sla.subspace_angles(X, Y)[0])))


def subspace_error(reference, approx) -> tuple[float, float]:
    """Sine of the largest principal angle between exact and approximate singular subspaces.

    Parameters
    ----------
    reference : SVDResult or object with ``U`` (N, r), ``s``, ``V`` (M, r)
    approx : SVDResult or object with ``U`` (N, k), ``s``, ``V`` (M, k), ``k >= r``
        Its first ``r`` columns span the subspaces compared.

    Returns
    -------
    sin_U, sin_V : float
        ``sin theta_max`` between ``span(U)`` and ``span(U~[:, :r])``, and likewise for ``V``;
        in ``[0, 1]``. Unlike eta it ignores how the vectors are paired and rotated inside the
        subspace (computed with :func:`scipy.linalg.subspace_angles`, accurate for small
        angles).
    """
    U, _, V, Ua, _, Va = _pair(reference, approx)
    return _sin_max(U, Ua), _sin_max(V, Va)


def _products(G, approx):
    src = as_source(G)
    U, s, V = _triplets(approx, "approx")
    if tuple(src.shape) != (U.shape[0], V.shape[0]):
        raise ValueError(
            f"approx has U with {U.shape[0]} rows and V with {V.shape[0]} rows, but G has "
            f"shape {tuple(src.shape)}"
        )
    GV = np.asarray(src.matmat(V), dtype=np.float64)
    GtU = np.asarray(src.rmatmat(U), dtype=np.float64)
    return src, U, s, V, GV, GtU


def residuals(G, approx) -> dict:
    """Residuals of approximate singular triplets, relative to the top approximate value.

    Parameters
    ----------
    G : ndarray, sparse matrix, LinearOperator or matrix source
        The matrix (anything :func:`solvers.as_source` accepts); used through one ``matmat``
        and one ``rmatmat`` with ``k`` columns.
    approx : SVDResult or object with ``U`` (N, k), ``s`` (k,), ``V`` (M, k)

    Returns
    -------
    res : dict
        ``"u"``: ``|G v~_i - s~_i u~_i| / s~_1`` per triplet, shape ``(k,)``;
        ``"v"``: ``|G^T u~_i - s~_i v~_i| / s~_1``; ``"max"``: the largest of both (float).
        Vectors are used as given (not renormalised). All zero for an exact SVD.
    """
    _, U, s, V, GV, GtU = _products(G, approx)
    scale = s[0] if s[0] > 0 else 1.0
    ru = np.linalg.norm(GV - U * s, axis=0) / scale
    rv = np.linalg.norm(GtU - V * s, axis=0) / scale
    return {"u": ru, "v": rv, "max": float(max(ru.max(), rv.max()))}


def _tail_norm(src, Q, n_power_iter, block, rng):
    """Lower estimate of ``||(I - Q Q^T) G||_2``, an upper bound for ``sigma_{k+1}(G)``."""
    N, M = src.shape
    if Q.shape[1] >= min(N, M):
        return 0.0
    p = min(block, M)

    def proj(Y):
        return Y - Q @ (Q.T @ Y)

    X = np.linalg.qr(rng.standard_normal((M, p)))[0]
    for _ in range(n_power_iter):
        Y = np.linalg.qr(proj(np.asarray(src.matmat(X), dtype=np.float64)))[0]
        X = np.linalg.qr(np.asarray(src.rmatmat(proj(Y)), dtype=np.float64))[0]
    Y = proj(np.asarray(src.matmat(X), dtype=np.float64))
    # X has orthonormal columns, so this never exceeds the true norm.
    return float(sla.svdvals(Y)[0])


def _is_ritz(Un, Vn, GVn, mu, rtol=1e-10):
    """Whether ``X~ = [U~; V~] / sqrt(2)`` is orthonormal and ``X~^T J X~ = diag(mu)``."""
    k = Un.shape[1]
    gram = 0.5 * (Un.T @ Un + Vn.T @ Vn) - np.eye(k)
    B = Un.T @ GVn
    off = 0.5 * (B + B.T) - np.diag(mu)
    scale = max(float(mu.max()), np.finfo(float).tiny)
    return bool(np.abs(gram).max() <= rtol and np.abs(off).max() <= rtol * scale)


def residual_estimate(
    G,
    approx,
    *,
    weights="singular_values",
    rank=None,
    n_power_iter=4,
    block=4,
    random_state=0,
    ritz="auto",
    return_terms=False,
):
    """Estimate eta from residuals alone (no reference SVD needed).

    Parameters
    ----------
    G : ndarray, sparse matrix, LinearOperator or matrix source
    approx : SVDResult or object with ``U`` (N, k), ``s`` (k,), ``V`` (M, k)
    weights : {"singular_values", "relative", "uniform"}, default="singular_values"
        As in :func:`eta`, with upper bounds of the unknown singular values (Notes).
    rank : int, optional
        Number of leading triplets scored (the ``r`` of eta), default all ``k``. Triplets
        beyond ``rank`` are used only to estimate spectral gaps: computing a few more than
        needed sharpens the estimate for the last scored triplets.
    n_power_iter : int, default=4
        Power iterations for the bound on the unresolved tail ``sigma_{k+1}``.
    block : int, default=4
        Block size of those power iterations.
    random_state : None, int or numpy.random.Generator, default=0
        Start block of the power iterations (fixed by default, so the estimate is
        deterministic).
    ritz : {"auto", True, False}, default="auto"
        Whether the triplets are Ritz triplets of their own subspaces (``U~^T G V~`` diagonal,
        ``U~`` and ``V~`` orthonormal: what TSVD and RSVD return), which allows the sharper
        bound in the Notes. ``"auto"`` checks it to rounding accuracy.
    return_terms : bool, default=False
        Also return a dict with the per-triplet terms, gaps, Rayleigh quotients and the
        tail estimate.

    Returns
    -------
    estimate : float
        Estimate of eta (the same weighting), in ``[0, 2 * mean(w)]``.
    terms : dict
        Only if ``return_terms``.

    Notes
    -----
    *Derivation.* Let ``x~ = [u~; v~] / sqrt(2)`` with unit ``u~``, ``v~`` and
    ``mu = u~^T G v~`` (the Rayleigh quotient, which minimises the residual). ``x~`` is an
    approximate eigenvector of the symmetric Jordan-Wielandt matrix ``J = [[0, G], [G^T, 0]]``,
    whose eigenvalues are ``+-sigma_j`` (and zeros), with ``x_i = [u_i; v_i] / sqrt(2)`` the
    eigenvector for ``sigma_i``. Its residual norm is
    ``rho = sqrt(|G v~ - mu u~|^2 + |G^T u~ - mu v~|^2) / sqrt(2)``. The Davis-Kahan sin-theta
    theorem (Wedin's for one triplet) gives ``sin theta <= rho / delta`` with ``delta`` the
    distance from ``mu`` to the rest of the spectrum of ``J``:
    ``delta = min(min_{j != i} |mu - sigma_j|, mu)`` (``mu`` is the distance to ``-sigma_j`` and
    to the zero eigenvalues). Since ``cos theta = (u_i.u~ + v_i.v~) / 2``, the eta term of
    triplet ``i`` satisfies ``(1 - |u_i.u~|) + (1 - |v_i.v~|) <= 2 (1 - cos theta)``, and
    ``1 - cos theta ~ sin^2 theta / 2`` for small angles, so

    ``term_i ~ sin^2 theta <= rho^2 / delta^2 = (|r_u|^2 + |r_v|^2) / (2 delta^2)``,

    capped at 2 (its largest possible value). The estimate is
    ``(1/r) sum_i w_i term_i``.

    *Weights.* The exact ``sigma_i`` are unknown, and a poor approximation can report
    ``s~_i ~ 0`` for a triplet that matters. With ``Q`` an orthonormal basis of ``span(U~)``,
    Weyl's inequality on ``G = Q Q^T G + (I - Q Q^T) G`` gives
    ``sigma_i(Q^T G) <= sigma_i(G) <= sigma_i(Q^T G) + ||(I - Q Q^T) G||_2``; the weights use
    the upper bound (``"singular_values"``) or upper over lower bound of ``sigma_1``
    (``"relative"``, capped at 1), so they err on the conservative side (one extra
    ``rmatmat``; not needed for ``"uniform"``).

    *Gaps.* The exact ``sigma_j`` are unknown. Computed ones are replaced by their Rayleigh
    quotients; for the unresolved tail ``sigma_{k+1} <= ||(I - Q Q^T) G||_2`` with ``Q`` an
    orthonormal basis of the ``k`` computed left vectors (``Q Q^T G`` has rank ``k``), and that
    norm is estimated by a few block power iterations. A triplet whose gap is not positive gets
    the cap 2 (the conservative choice).

    *Ritz triplets.* The per-triplet bound is pessimistic inside clusters of close singular
    values. When the triplets are Ritz triplets of ``span(X~)`` (``X~^T J X~`` diagonal,
    ``X~`` orthonormal), Saad's theorem (Numerical Methods for Large Eigenvalue Problems,
    Thm. 4.6) gives ``sin(x_i, x~_i) <= sin(x_i, S) sqrt(1 + gamma^2 / delta_in^2)`` with
    ``gamma = ||J X~ - X~ diag(mu)||_2``, ``delta_in = min_{j != i} |mu_i - mu_j|``, and
    ``sin(x_i, S) <= gamma / delta_out`` with ``delta_out = mu_i - lambda_max`` of ``J``
    compressed to the complement of ``S``, at most ``tail + gamma^2 / mu_min`` to second order.
    Inside a cluster this is ``~ gamma^2 / (delta_out delta_in)`` instead of
    ``rho / delta_in``; the smaller of both bounds is used.

    *Caveats.* (i) The power iteration approaches the tail norm from below, and Ritz values
    lie below the true values, so gaps can be overestimated and the estimate can undershoot;
    (ii) a cluster of nearly equal singular values makes gaps tiny and the estimate
    pessimistic (individual vectors inside a cluster are ill-determined, which eta penalises
    too, but not by as much); (iii) the bound is first order: when residuals are large
    compared with gaps the estimate saturates at the cap. It is a conservative proxy for eta,
    best read on a log scale, not an unbiased estimator.
    """
    _check_weights(weights)
    if not (isinstance(n_power_iter, (int, np.integer)) and n_power_iter >= 0):
        raise ValueError(f"n_power_iter must be a non-negative int, got {n_power_iter!r}")
    if not (isinstance(block, (int, np.integer)) and block >= 1):
        raise ValueError(f"block must be a positive int, got {block!r}")
    if ritz not in ("auto", True, False):
        raise ValueError(f"ritz must be 'auto', True or False, got {ritz!r}")
    src, U, _, V, GV, GtU = _products(G, approx)
    k = U.shape[1]
    if rank is None:
        rank = k
    if not (isinstance(rank, (int, np.integer)) and 1 <= rank <= k):
        raise ValueError(f"rank must be an int in [1, {k}], got {rank!r}")
    rng = np.random.default_rng(random_state)

    nu = np.linalg.norm(U, axis=0)
    nv = np.linalg.norm(V, axis=0)
    nu[nu == 0] = 1.0
    nv[nv == 0] = 1.0
    Un, Vn = U / nu, V / nv
    GVn, GtUn = GV / nv, GtU / nu
    mu = np.einsum("ij,ij->j", Un, GVn)
    # Signs are arbitrary per triplet; a negative quotient means u~ and v~ are paired with
    # opposite signs, which is the same triplet with |mu|.
    flip = np.where(mu < 0, -1.0, 1.0)
    mu = np.abs(mu)
    Vn, GVn = Vn * flip, GVn * flip
    ru = np.linalg.norm(GVn - Un * mu, axis=0)
    rv = np.linalg.norm(GtUn - Vn * mu, axis=0)

    Q = np.linalg.qr(Un)[0]
    tail = _tail_norm(src, Q, n_power_iter, block, rng)
    gaps = np.empty(rank)
    for i in range(rank):
        others = np.delete(mu, i)
        d = mu[i] - tail
        if others.size:
            d = min(d, np.min(np.abs(mu[i] - others)))
        gaps[i] = min(d, mu[i])
    rho2 = 0.5 * (ru[:rank] ** 2 + rv[:rank] ** 2)
    terms = np.full(rank, 2.0)
    ok = gaps > 0
    terms[ok] = np.minimum(2.0, rho2[ok] / gaps[ok] ** 2)

    is_ritz = _is_ritz(Un, Vn, GVn, mu) if ritz == "auto" else ritz
    if is_ritz:
        # Block residual of J = [[0, G], [G^T, 0]] on X~ = [U~; V~] / sqrt(2).
        R = np.vstack([GVn - Un * mu, GtUn - Vn * mu]) / np.sqrt(2.0)
        gamma = float(sla.svdvals(R)[0]) if R.size else 0.0
        mu_min = mu.min()
        # Largest eigenvalue of J compressed to the complement of X~ is at most
        # tail + O(gamma^2 / mu_min) (see Notes).
        outer = mu[:rank] - tail - (gamma**2 / mu_min if mu_min > 0 else np.inf)
        inner = np.array([np.min(np.abs(mu[i] - np.delete(mu, i))) if k > 1 else np.inf
                          for i in range(rank)])
        good = outer > 0
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            sin2 = (gamma / outer) ** 2 * (1.0 + (gamma / inner) ** 2)
        sin2 = np.where(good & np.isfinite(sin2), sin2, 2.0)
        terms = np.minimum(terms, np.minimum(2.0, sin2))
    if weights == "uniform":
        w = np.ones(rank)
        upper = np.full(rank, np.nan)
    else:
        # Weyl on G = Q Q^T G + (I - Q Q^T) G: sigma_i(Q^T G) <= sigma_i(G) <= that + tail.
        # Weighting by the upper bound keeps a poor triplet (mu ~ 0) from weighing nothing.
        lower = sla.svdvals(np.asarray(src.rmatmat(Q), dtype=np.float64))[:rank]
        upper = lower + tail
        if weights == "singular_values":
            w = upper
        else:
            w = np.minimum(1.0, upper / lower[0]) if lower[0] > 0 else np.ones(rank)
    estimate = float(w @ terms / rank)
    if return_terms:
        return estimate, {"terms": terms, "gaps": gaps, "mu": mu[:rank], "tail": tail,
                          "ritz": bool(is_ritz),
                          "weights": w, "sigma_upper": upper, "res_u": ru[:rank],
                          "res_v": rv[:rank]}
    return estimate
