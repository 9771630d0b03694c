"""The residual estimate of eta: an estimate of the paper's measure without a reference."""

from __future__ import annotations

import numpy as np
import scipy.linalg as sla

from .common import CLUSTER_RTOL, _check_weights, check_cluster_rtol
from .residuals import _products

__all__ = ["residual_estimate"]


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


def _check_estimate_options(weights, n_power_iter, block, ritz):
    _check_weights(weights)
    if not (isinstance(n_power_iter, (int, np.integer)) and n_power_iter >= 0):
        raise ValueError(f"n_power_iter must be a non-negative int, got {n_power_iter!r}")
    if not (isinstance(block, (int, np.integer)) and block >= 1):
        raise ValueError(f"block must be a positive int, got {block!r}")
    if ritz not in ("auto", True, False):
        raise ValueError(f"ritz must be 'auto', True or False, got {ritz!r}")


def _rayleigh_triplets(U, V, GV, GtU):
    """Unit vectors, their products and Rayleigh quotients ``mu >= 0``, plus the residuals."""
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
    return Un, Vn, GVn, GtUn, mu, ru, rv


def _cluster_labels(mu, cluster_rtol):
    """A cluster label per Rayleigh quotient (values within ``cluster_rtol * max(mu)``, chained)."""
    if cluster_rtol is None or mu.size == 0:
        return np.arange(mu.size)
    order = np.argsort(-mu, kind="stable")
    sorted_mu = mu[order]
    starts = np.concatenate([[True], sorted_mu[:-1] - sorted_mu[1:] > cluster_rtol * mu.max()])
    labels = np.empty(mu.size, dtype=np.intp)
    labels[order] = np.cumsum(starts) - 1
    return labels


def _null_cluster(mu, labels, cluster_rtol):
    """Members of the cluster of the smallest quotient, if it reaches ``cluster_rtol * max``.

    As in :func:`eta`, that cluster contains every smaller singular value of ``G``.
    """
    if cluster_rtol is None or mu.size == 0 or mu.min() > cluster_rtol * mu.max():
        return np.zeros(mu.size, dtype=bool)
    return labels == labels[np.argmin(mu)]


def _gap_to_other_clusters(mu, labels, i):
    """``min |mu_i - mu_j|`` over ``j`` outside the cluster of ``i`` (inf when there is none)."""
    others = mu[labels != labels[i]]
    return float(np.min(np.abs(mu[i] - others))) if others.size else np.inf


def _davis_kahan_terms(mu, labels, null, tail, ru, rv, rank):
    """Per-triplet ``rho^2 / delta^2`` (capped at 2) and the gaps ``delta`` (Notes)."""
    gaps = np.empty(rank)
    tail_outside = not null.any() or tail > mu[null].max()
    for i in range(rank):
        if null[i]:
            # The null cluster holds the zeros and -sigma_j of J near 0: only values outside
            # it (and the tail, when it lies outside) bound the angle.
            gaps[i] = min(
                _gap_to_other_clusters(mu, labels, i), tail - mu[i] if tail_outside else np.inf
            )
        else:
            gaps[i] = min(mu[i] - tail, _gap_to_other_clusters(mu, labels, i), mu[i])
    rho2 = 0.5 * (ru[:rank] ** 2 + rv[:rank] ** 2)
    terms = np.full(rank, 2.0)
    ok = gaps > 0
    with np.errstate(divide="ignore", over="ignore"):
        terms[ok] = np.minimum(2.0, rho2[ok] / gaps[ok] ** 2)
    return terms, gaps


def _ritz_terms(Un, Vn, GVn, GtUn, mu, labels, tail, rank):
    """Saad's sharper per-triplet bound for Ritz triplets, capped at 2 (Notes)."""
    # Block residual of J = [[0, G], [G^T, 0]] on X~ = [U~; V~] / sqrt(2).
    R = np.vstack([GVn - Un * mu, GtUn - Vn * mu]) / np.sqrt(2.0)
    gamma = float(sla.svdvals(R)[0]) if R.size else 0.0
    mu_min = mu.min()
    # Largest eigenvalue of J compressed to the complement of X~ is at most
    # tail + O(gamma^2 / mu_min) (see Notes).
    outer = mu[:rank] - tail - (gamma**2 / mu_min if mu_min > 0 else np.inf)
    inner = np.array([_gap_to_other_clusters(mu, labels, i) for i in range(rank)])
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        sin2 = (gamma / outer) ** 2 * (1.0 + (gamma / inner) ** 2)
    sin2 = np.where((outer > 0) & np.isfinite(sin2), sin2, 2.0)
    return np.minimum(2.0, sin2)


def _estimate_weights(src, Q, tail, rank, weights):
    """Weights from Weyl's upper bounds of the unknown singular values, and those bounds."""
    if weights == "uniform":
        return np.ones(rank), np.full(rank, np.nan)
    # Weyl on G = Q Q^T G + (I - Q Q^T) G: sigma_i(Q^T G) <= sigma_i(G) <= that + tail.
    # Weighting by the upper bound keeps a poor triplet (mu ~ 0) from weighing nothing.
    lower = sla.svdvals(np.asarray(src.rmatmat(Q), dtype=np.float64))[:rank]
    upper = lower + tail
    if weights == "singular_values":
        return upper, upper
    w = np.minimum(1.0, upper / lower[0]) if lower[0] > 0 else np.ones(rank)
    return w, upper


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
    cluster_rtol=CLUSTER_RTOL,
    return_terms=False,
    products=None,
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
    cluster_rtol : float or None, default=CLUSTER_RTOL
        Rayleigh quotients closer than ``cluster_rtol * max(mu)`` form a cluster, estimated
        as a subspace, as eta scores it (Notes). None: every triplet on its own.
    return_terms : bool, default=False
        Also return a dict with the per-triplet terms, gaps, Rayleigh quotients and the
        tail estimate.
    products : pair of ndarray, optional
        ``(G @ V~, G.T @ U~)`` if already computed (the driver's scoring pass has them):
        then the estimate makes no product with ``G`` for them.

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
    (ii) close singular values that are not grouped (gap above ``cluster_rtol``) make gaps
    tiny and the estimate pessimistic (their individual vectors are ill-determined, which eta
    penalises too, but not by as much); (iii) the bound is first order: when residuals are large
    compared with gaps the estimate saturates at the cap. It is a conservative proxy for eta,
    best read on a log scale, not an unbiased estimator.

    *Clusters.* Eta scores a cluster of (nearly) equal singular values as a subspace (see
    :func:`eta`). The estimate follows it: triplets whose Rayleigh quotients form a cluster
    are bounded by the Davis-Kahan theorem for the cluster's subspace, so their gaps
    ``delta`` (and Saad's ``delta_in``) are measured to the quotients *outside* the cluster
    only. Quotients in the cluster of the smallest one, when it reaches
    ``cluster_rtol * max(mu)``, form the null cluster (with the zeros and ``-sigma_j`` of
    ``J`` near 0); their gap is the distance to the quotients outside it and to the tail
    when that lies above. A cluster cut by ``k`` (the tail ``sigma_{k+1}`` belongs to it)
    still makes the gap vanish: compute a few more triplets than ``rank``.
    """
    _check_estimate_options(weights, n_power_iter, block, ritz)
    src, U, _, V, GV, GtU, unit = _products(G, approx, products)  # in units where extreme
    k = U.shape[1]
    if rank is None:
        rank = k
    if not (isinstance(rank, (int, np.integer)) and 1 <= rank <= k):
        raise ValueError(f"rank must be an int in [1, {k}], got {rank!r}")
    labels_rtol = check_cluster_rtol(cluster_rtol)
    rng = np.random.default_rng(random_state)

    Un, Vn, GVn, GtUn, mu, ru, rv = _rayleigh_triplets(U, V, GV, GtU)
    Q = np.linalg.qr(Un)[0]
    tail = _tail_norm(src, Q, n_power_iter, block, rng)
    labels = _cluster_labels(mu, labels_rtol)
    null = _null_cluster(mu, labels, labels_rtol)
    terms, gaps = _davis_kahan_terms(mu, labels, null, tail, ru, rv, rank)
    is_ritz = _is_ritz(Un, Vn, GVn, mu) if ritz == "auto" else ritz
    if is_ritz:
        terms = np.minimum(terms, _ritz_terms(Un, Vn, GVn, GtUn, mu, labels, tail, rank))
    w, upper = _estimate_weights(src, Q, tail, rank, weights)
    if weights == "singular_values":
        w = w / unit  # the paper's weights are the values themselves, in G's own units
    estimate = float(w @ terms / rank)
    if return_terms:
        return estimate, {
            "terms": terms,
            "gaps": gaps,
            "mu": mu[:rank] / unit,
            "tail": tail / unit,
            "ritz": bool(is_ritz),
            "weights": w,
            "sigma_upper": upper / unit,
            "res_u": ru[:rank] / unit,
            "res_v": rv[:rank] / unit,
        }
    return estimate
