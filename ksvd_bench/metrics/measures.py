"""Measures against a reference SVD: eta, the subspace error and the singular-value error."""

from __future__ import annotations

import numpy as np
import scipy.linalg as sla

from .common import CLUSTER_RTOL, _check_weights, _cut_group, _pair, _scored_groups, _triplets

__all__ = ["eta", "subspace_error", "sv_error"]


# ---------------------------------------------------------------------------------------------
# eta
# ---------------------------------------------------------------------------------------------


def _weights(s, weights):
    if weights == "singular_values":
        return s.copy()
    if weights == "relative":
        return s / s[0] if s[0] > 0 else np.ones_like(s)
    return np.ones_like(s)


def _normalised_columns(X):
    norms = np.linalg.norm(X, axis=0)
    return np.divide(X, norms, out=np.zeros_like(X), where=norms > 0)


def _misalignment(X, Xa):
    """``1 - |x_i . xa_i| / |xa_i|`` per column; a zero approximate vector counts as 1."""
    norms = np.linalg.norm(Xa, axis=0)
    dots = np.abs(np.einsum("ij,ij->j", X, Xa))
    cos = np.divide(dots, norms, out=np.zeros_like(dots), where=norms > 0)
    # Rounding can push |cos| a hair above 1; eta is non-negative by definition.
    return np.clip(1.0 - cos, 0.0, 1.0)


def _cluster_misfit(X, a, b, null, Ya, w):
    """``sum(w) - ||P Y diag(w)||_*``: the literal terms with the best basis of the cluster.

    ``P`` projects on the cluster's reference subspace: ``span(X[:, a:b])``, or for the null
    cluster the complement of ``span(X[:, :a])``. ``Ya`` (n, p) holds the approximate vectors
    scored in the cluster (normalised here), ``w`` their weights.
    """
    Yn = _normalised_columns(Ya)
    if null:
        head = X[:, :a]
        inside = Yn - head @ (head.T @ Yn)
    else:
        inside = X[:, a:b].T @ Yn
    nuclear = float(np.linalg.svd(inside * w, compute_uv=False).sum())
    total = float(w.sum())
    # The nuclear norm never exceeds sum(w) (columns of P Y have norm <= 1) but rounding can.
    return min(max(total - nuclear, 0.0), total)


def _weighted_misfit(X, Xa, w, groups):
    """``sum_i w_i * misalignment_i``, with each multi-value cluster scored as a subspace."""
    r = Xa.shape[1]
    literal = _misalignment(X[:, :r], Xa)
    if all(b - a == 1 and not null for a, b, null in groups):
        return float(w @ literal)  # all values simple: the paper's definition, bit for bit
    simple = np.zeros(r, dtype=bool)
    total = 0.0
    for a, b, null in groups:
        if b - a == 1 and not null:
            simple[a] = True
        else:
            end = min(b, r)
            total += _cluster_misfit(X, a, b, null, Xa[:, a:end], w[a:end])
    return float(w[simple] @ literal[simple] + total)


def eta(reference, approx, *, weights="singular_values", rank=None, cluster_rtol=CLUSTER_RTOL):
    """The paper's accuracy measure eta of an approximate SVD against a reference.

    Parameters
    ----------
    reference : SVDResult or object with ``U`` (N, k), ``s`` (k,), ``V`` (M, k)
        The exact (reference) SVD, singular values non-negative and largest first. Its
        columns are assumed to have unit norm (any SVD routine's are).
    approx : SVDResult or object with ``U`` (N, k'), ``s`` (k',), ``V`` (M, k'), ``k' >= r``
        The approximation; its first ``r`` triplets are scored. Columns need not be unit
        vectors: each is divided by its norm, as in the paper.
    weights : {"singular_values", "relative", "uniform"}, default="singular_values"
        ``w_i = lambda_i`` (the paper), ``lambda_i / lambda_1`` or ``1``, with ``lambda`` the
        reference's singular values. See the module docstring for why three exist.
    rank : int, optional
        Number of triplets scored, ``r``; default all ``k`` of the reference. Reference
        triplets beyond ``r`` only complete a cluster that the cut at ``r`` splits.
    cluster_rtol : float or None, default=CLUSTER_RTOL
        Reference values closer than ``cluster_rtol * lambda_1`` form a cluster, scored as a
        subspace, and values below ``cluster_rtol * lambda_1`` a null cluster scored against
        the complement of the vectors before it (module docstring, "Repeated and clustered
        singular values"). None: the literal vector-by-vector definition everywhere.

    Returns
    -------
    eta : float
        In ``[0, 2 * mean(w)]``; 0 for an exact answer, invariant to sign flips of triplets.
        Where all values are simple: ``(1/r) sum_i w_i (1 - |u_i.u~_i|/|u~_i|) +
        (1/r) sum_i w_i (1 - |v_i.v~_i|/|v~_i|)``.

    Raises
    ------
    ValueError
        On an unknown ``weights``, negative or increasing reference singular values,
        mismatching shapes, fewer than ``r`` triplets in ``approx`` or non-finite entries.

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

    A repeated value: any orthonormal basis of its subspace is exact.

    >>> ref = SimpleNamespace(U=np.eye(3)[:, :2], s=np.array([1.0, 1.0]), V=np.eye(3)[:, :2])
    >>> c = np.sqrt(0.5)
    >>> rot = np.array([[c, -c], [c, c], [0.0, 0.0]])
    >>> turned = SimpleNamespace(U=rot, s=ref.s, V=rot)
    >>> round(eta(ref, turned, weights="uniform"), 12)
    0.0
    >>> round(eta(ref, turned, weights="uniform", cluster_rtol=None), 6)  # the literal eta
    0.585786
    """
    _check_weights(weights)
    U, s, V, Ua, Va, r = _pair(reference, approx, rank)
    w = _weights(s[:r], weights)
    groups = _scored_groups(s, r, cluster_rtol)
    return float(_weighted_misfit(U, Ua, w, groups) / r + _weighted_misfit(V, Va, w, groups) / r)


# ---------------------------------------------------------------------------------------------
# subspace error
# ---------------------------------------------------------------------------------------------


def _sin_max(X, Y):
    """Sine of the largest principal angle between span(X) and span(Y) (equal column counts)."""
    r = X.shape[1]
    # A rank-deficient approximation misses a whole direction: angle pi/2.
    if np.linalg.matrix_rank(Y) < r:
        return 1.0
    return float(min(1.0, np.sin(sla.subspace_angles(X, Y)[0])))


def _sin_to_valid_subspaces(X, Y, cut):
    """Distance of ``span(Y)`` (r-dim) from every exact top-r subspace of the reference ``X``.

    Without a cut cluster the exact subspace is ``span(X[:, :r])``. With a cluster ``[a, b)``
    cut by ``r`` it is any ``span(X[:, :a]) + T``, ``T`` an ``(r - a)``-dim part of
    ``span(X[:, a:b])``; ``span(Y)`` is one exactly when it lies in ``span(X[:, :b])`` and
    contains ``span(X[:, :a])``. The larger sine of those two containments is returned.
    ``b`` is None for the null cluster (everything orthogonal to ``X[:, :a]`` is exact).
    """
    r = Y.shape[1]
    if cut is None:
        return _sin_max(X[:, :r], Y)
    if np.linalg.matrix_rank(Y) < r:
        return 1.0
    a, b = cut
    Qy = np.linalg.qr(Y)[0]
    if b is None:  # the null cluster: everything after X[:, :a] is exact
        outside = 0.0
    else:
        Xb = X[:, :b]
        outside = np.linalg.norm(Qy - Xb @ (Xb.T @ Qy), 2)
    Xa = X[:, :a]
    missing = np.linalg.norm(Xa - Qy @ (Qy.T @ Xa), 2) if a else 0.0
    return float(min(1.0, max(outside, missing)))


def subspace_error(reference, approx, *, rank=None, cluster_rtol=CLUSTER_RTOL):
    """Sine of the largest principal angle between exact and approximate singular subspaces.

    Parameters
    ----------
    reference : SVDResult or object with ``U`` (N, k), ``s``, ``V`` (M, k)
    approx : SVDResult or object with ``U`` (N, k'), ``s``, ``V`` (M, k'), ``k' >= r``
        Its first ``r`` columns span the subspaces compared.
    rank : int, optional
        ``r``, default all ``k`` triplets of the reference.
    cluster_rtol : float or None, default=CLUSTER_RTOL
        When a cluster of reference values (see :func:`singular_value_groups`) is cut by
        ``r`` (the reference holds more than ``r`` triplets), or ``r`` reaches into the null
        cluster (values below ``cluster_rtol * s[0]``), the exact top-``r`` subspace is not
        unique; the error is then the distance to the nearest valid one (Notes).

    Returns
    -------
    sin_U, sin_V : float
        ``sin theta_max`` between ``span(U[:, :r])`` and ``span(U~[:, :r])``, and likewise for
        ``V``; in ``[0, 1]``. Unlike eta it ignores how the vectors are paired and rotated
        inside the subspace (computed with :func:`scipy.linalg.subspace_angles`, accurate for
        small angles). A rank-deficient approximation scores 1.

    Notes
    -----
    With a cluster ``[a, b)`` cut by ``r``, every ``span(U[:, :a]) + T`` with ``T`` an
    ``(r - a)``-dimensional subspace of the cluster's is exact. The error is then
    ``max(||(I - P_b) Q~||_2, ||(I - Q~ Q~^T) U[:, :a]||_2)`` with ``P_b`` the projector on
    ``span(U[:, :b])`` and ``Q~`` an orthonormal basis of ``span(U~[:, :r])``: zero exactly for
    the valid subspaces, and equal to ``sin theta_max`` when no cluster is cut. In the null
    cluster ``b`` is the whole space, so only the second term remains.
    """
    U, s, V, Ua, Va, r = _pair(reference, approx, rank)
    cut = _cut_group(_scored_groups(s, r, cluster_rtol), r)
    return _sin_to_valid_subspaces(U, Ua, cut), _sin_to_valid_subspaces(V, Va, cut)


# ---------------------------------------------------------------------------------------------
# whole triplets: singular values and the pairing of U, s and V
# ---------------------------------------------------------------------------------------------


def sv_error(reference, approx, *, rank=None) -> float:
    """Largest error of the approximate singular values, relative to the largest exact one.

    Parameters
    ----------
    reference : SVDResult or object with ``U``, ``s`` (k,), ``V``
        The exact SVD; its values must be non-negative and non-increasing.
    approx : SVDResult or object with ``U``, ``s`` (k',), ``V``, ``k' >= r``
        The approximation; its first ``r`` values are scored.
    rank : int, optional
        ``r``, default all ``k`` triplets of the reference.

    Returns
    -------
    error : float
        ``max_{i <= r} |s~_i - s_i| / s_1`` (absolute when ``s_1 = 0``), with both lists
        sorted in decreasing order first (the values are compared as a spectrum; how they
        pair with the vectors is :func:`triplet_residual`'s business). 0 for an exact answer.

    Raises
    ------
    TypeError
        On objects without ``U``, ``s``, ``V`` or a non-int ``rank``.
    ValueError
        On mismatching shapes, fewer than ``r`` approximate triplets, non-finite entries, or
        negative or increasing reference values.

    Notes
    -----
    Rayleigh-Ritz values err by ``O(s sin^2 theta)``, second order in the angle ``theta`` of
    the vectors, like eta and :func:`lowrank_error`, so the driver holds them to the same
    tolerance: ``max_i |s~_i - s_i| <= eps * s_1``.

    Examples
    --------
    >>> import numpy as np
    >>> from types import SimpleNamespace
    >>> I = np.eye(3)[:, :2]
    >>> ref = SimpleNamespace(U=I, s=np.array([4.0, 2.0]), V=I)
    >>> sv_error(ref, SimpleNamespace(U=I, s=np.array([4.0, 1.0]), V=I))
    0.25
    """
    _, s, _, _, _, r = _pair(reference, approx, rank)
    approx_s = _triplets(approx, "approx")[1][:r]
    exact = np.sort(s[:r])[::-1]
    got = np.sort(approx_s)[::-1]
    diff = float(np.max(np.abs(got - exact)))
    return diff / float(exact[0]) if exact[0] > 0 else diff
