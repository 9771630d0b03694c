"""Accuracy of approximate singular triplets: eta, subspace angles, low-rank error, residuals.

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

Repeated and clustered singular values
--------------------------------------
eta pairs ``u_i`` with ``u~_i``. When ``lambda_i = lambda_j`` the exact vectors are any
orthonormal basis of their common subspace, so two exact answers can score eta ~ 1. Every
measure here therefore groups the reference values into *clusters*
(:func:`singular_value_groups`): consecutive values belong to one cluster when
``lambda_i - lambda_{i+1} <= cluster_rtol * lambda_1``. The default :data:`CLUSTER_RTOL`
(``1e-6``) is measured against ``lambda_1 = ||G||_2`` because every solver's backward error
scales with ``||G||_2``: an answer with relative residual ``rho`` determines a vector up to
``rho / gap``, so gaps above ``1e-6 ||G||_2`` are resolved by any answer that is accurate
enough to be scored at all, and only values equal to about six digits are grouped. A simple
(one-value) cluster keeps the paper's literal term. Inside a cluster of ``m`` values eta uses
the reference basis of the cluster's subspace that best matches the answer (orthogonal
Procrustes): with ``X`` the ``m`` reference vectors and ``Y`` the ``p`` normalised approximate
ones scored there, the cluster contributes ``sum_j w_j - ||X^T Y diag(w)||_*`` (nuclear norm).
That is zero exactly when ``Y`` is an orthonormal basis of a subspace of ``span(X)``, equals
``sum_l w (1 - cos theta_l)`` over the principal angles when ``Y`` is orthonormal and the
weights equal, reduces to the literal term for ``m = p = 1``, and keeps ``0 <= eta <= 2 *
mean(w)`` and the invariance to sign flips. A cluster cut by ``r`` (``p < m``: the reference
holds triplets beyond ``r``) compares the ``p`` scored approximate vectors with the *whole*
cluster's reference subspace, so any ``p``-dimensional part of it scores zero. The reference
must hold those extra triplets: :func:`ksvd_bench.driver.reference_svd` with ``cluster_rtol``
returns them. The last cluster, when it reaches down to ``cluster_rtol * lambda_1`` (the
*null cluster*: exact low rank, or the zero values of a rectangular ``G``), contains every
smaller singular value, including those the reference does not hold, so its subspace is the
orthogonal complement of the reference vectors before it. As in the literal definition, the
``U`` and ``V`` parts are scored separately.

A gap-robust measure
--------------------
:func:`lowrank_error` does not look at individual vectors: it compares the rank-``r``
approximation ``U~ U~^T G`` with the optimum ``G_r``, the criterion of randomized numerical
linear algebra (Halko, Martinsson and Tropp 2011; Musco and Musco 2015).

Accuracy without a reference
----------------------------
:func:`residuals` and :func:`residual_estimate` need only products with ``G`` and ``G^T``; see
:func:`residual_estimate` for the derivation of the eta estimate and its caveats.

Whole triplets
--------------
eta, :func:`subspace_error` and :func:`lowrank_error` read only the vectors (the last only
``U~``): an answer with the right left subspace but wrong singular values or a random ``V~``
passes them. :func:`sv_error` scores the values against the reference
(``max_i |s~_i - s_i| / s_1``) and :func:`triplet_residual` ties ``U~``, ``s~`` and ``V~``
together (``max(||G V~ - U~ S~||_F, ||G^T U~ - V~ S~||_F) / ||G_r||_F``); the driver accepts an
answer only when these are within tolerance too.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import scipy.linalg as sla

from solvers import as_source

__all__ = [
    "WEIGHTS",
    "CLUSTER_RTOL",
    "LOWRANK_FLOOR_RTOL",
    "LOWRANK_PASS_MAX_ENTRIES",
    "singular_value_groups",
    "eta",
    "subspace_error",
    "lowrank_error",
    "frobenius_norm",
    "residuals",
    "residual_estimate",
    "sv_error",
    "triplet_residual",
]

WEIGHTS = ("singular_values", "relative", "uniform")
#: Default relative gap (to the largest singular value) below which singular values form a cluster.
CLUSTER_RTOL = 1e-6
#: Default floor of :func:`lowrank_error`'s denominator, relative to ``||G||_F``, per method.
LOWRANK_FLOOR_RTOL = {"pass": 1e-6, "products": 1e-4}
#: Largest ``N * M`` for which :func:`lowrank_error`'s ``method="auto"`` makes a pass over ``G``.
LOWRANK_PASS_MAX_ENTRIES = 40_000_000
# Columns per chunk of a pass over G: about 8 MiB of float64 per chunk.
_PASS_CHUNK_BYTES = 8 * 2**20


# ---------------------------------------------------------------------------------------------
# argument checks
# ---------------------------------------------------------------------------------------------


def _check_weights(weights):
    if weights not in WEIGHTS:
        raise ValueError(f"weights must be one of {WEIGHTS}, got {weights!r}")


def _check_cluster_rtol(cluster_rtol):
    """``cluster_rtol`` as a float >= 0, or None (no grouping: the literal definitions)."""
    if cluster_rtol is None:
        return None
    if isinstance(cluster_rtol, bool) or not isinstance(cluster_rtol, numbers.Real):
        raise TypeError(f"cluster_rtol must be a number or None, got {cluster_rtol!r}")
    if not (math.isfinite(cluster_rtol) and 0 <= cluster_rtol < 1):
        raise ValueError(f"cluster_rtol must be in [0, 1) or None, got {cluster_rtol!r}")
    return float(cluster_rtol)


def _check_reference_values(s, name="reference.s"):
    """Reference singular values must be non-negative and non-increasing (clusters need it)."""
    if s.size and s.min() < 0:
        raise ValueError(f"{name} must be non-negative singular values, got min {float(s.min())!r}")
    # A few ulps of disorder (values computed apart, then sorted) is not an error.
    slack = 64 * np.finfo(np.float64).eps * (s[0] if s.size else 0.0)
    if s.size > 1 and np.any(np.diff(s) > slack):
        raise ValueError(f"{name} must be in non-increasing order (largest first)")


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


def _check_scored_rank(rank, k):
    """The number of scored triplets: ``rank``, default all ``k`` of the reference."""
    if rank is None:
        return k
    if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)):
        raise TypeError(f"rank must be an int or None, got {type(rank).__name__}")
    if not 1 <= rank <= k:
        raise ValueError(f"rank must be in [1, {k}] (the reference's triplets), got {rank}")
    return int(rank)


def _pair(reference, approx, rank=None):
    """Reference triplets (all of them) and the approximation's first ``r`` triplets.

    Returns ``U, s, V, Ua, Va, r``: the reference's triplets beyond ``r`` are kept, since
    they complete a cluster cut by ``r``.
    """
    U, s, V = _triplets(reference, "reference")
    _check_reference_values(s)
    Ua, _, Va = _triplets(approx, "approx")
    r = _check_scored_rank(rank, s.shape[0])
    if Ua.shape[0] != U.shape[0] or Va.shape[0] != V.shape[0]:
        raise ValueError(
            f"approx has U of {Ua.shape[0]} rows and V of {Va.shape[0]} rows, the reference "
            f"{U.shape[0]} and {V.shape[0]}"
        )
    if Ua.shape[1] < r:
        raise ValueError(
            f"approx holds {Ua.shape[1]} triplets, fewer than the reference's rank {r} "
            f"(the number of triplets scored)"
        )
    return U, s, V, Ua[:, :r], Va[:, :r], r


# ---------------------------------------------------------------------------------------------
# clusters of singular values
# ---------------------------------------------------------------------------------------------


def singular_value_groups(s, *, cluster_rtol=CLUSTER_RTOL):
    """Split non-increasing singular values into clusters of nearly equal values.

    Parameters
    ----------
    s : array_like of shape (k,)
        Non-negative singular values, largest first.
    cluster_rtol : float or None, default=CLUSTER_RTOL
        Consecutive values ``s[i] >= s[i+1]`` share a cluster when
        ``s[i] - s[i+1] <= cluster_rtol * s[0]`` (chained, so a cluster can span more than
        ``cluster_rtol * s[0]`` in all). ``0`` groups exact ties only; None groups nothing.

    Returns
    -------
    groups : list of (int, int)
        Half-open index ranges ``[start, stop)``, in order, covering ``range(k)``.

    Raises
    ------
    ValueError
        On negative or increasing values, or ``cluster_rtol`` outside ``[0, 1)``.

    Examples
    --------
    >>> singular_value_groups([5.0, 5.0, 3.0, 1.0, 1.0 - 1e-9])
    [(0, 2), (2, 3), (3, 5)]
    """
    s = np.asarray(s, dtype=np.float64)
    if s.ndim != 1 or not np.all(np.isfinite(s)):
        raise ValueError("s must be a 1-d array of finite singular values")
    _check_reference_values(s, "s")
    rtol = _check_cluster_rtol(cluster_rtol)
    if rtol is None:
        return [(i, i + 1) for i in range(s.size)]
    breaks = np.flatnonzero(s[:-1] - s[1:] > rtol * s[0]) + 1 if s.size else []
    bounds = [0, *(int(b) for b in breaks), int(s.size)]
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def _scored_groups(s, r, cluster_rtol):
    """``(start, stop, null)`` for each cluster holding one of the ``r`` scored triplets.

    ``null`` marks a last cluster that reaches ``cluster_rtol * s[0]``: every smaller value of
    ``G``, held by the reference or not (and the zero values a rectangular ``G`` has on its
    longer side), is in it, so its subspace is the orthogonal complement of the vectors
    before it.
    """
    groups = singular_value_groups(s, cluster_rtol=cluster_rtol)
    rtol = _check_cluster_rtol(cluster_rtol)
    out = []
    for a, b in groups:
        if a < r:
            null = rtol is not None and b == s.size and s[-1] <= rtol * s[0]
            out.append((a, b, bool(null)))
    return out


def _cut_group(groups, r):
    """``(start, stop)`` of the cluster that the cut at ``r`` splits, or None.

    ``stop`` is None for the null cluster, which always extends past the reference.
    """
    for a, b, null in groups:
        if null:
            return a, None
        if a < r < b:
            return a, b
    return None


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
# low-rank approximation error
# ---------------------------------------------------------------------------------------------


def _column_chunks(src, chunk=None):
    """Consecutive column blocks of ``G`` as float64 arrays: one pass, never all of ``G``."""
    N, M = (int(n) for n in src.shape)
    step = chunk if chunk is not None else max(1, _PASS_CHUNK_BYTES // (8 * max(N, 1)))
    whole = getattr(src, "G", None)  # the dense adapter: slices cost nothing
    for start in range(0, M, step):
        stop = min(M, start + step)
        if isinstance(whole, np.ndarray):
            block = whole[:, start:stop]
        else:
            block = src.cols(np.arange(start, stop))
        yield np.asarray(block, dtype=np.float64)


def _check_chunk(chunk):
    if chunk is not None and (isinstance(chunk, bool) or not isinstance(chunk, (int, np.integer))
                              or chunk < 1):
        raise ValueError(f"chunk must be a positive int or None, got {chunk!r}")


def frobenius_norm(G, *, chunk=None) -> float:
    """``||G||_F`` of any matrix source, without forming ``G`` unless it is dense already.

    Parameters
    ----------
    G : ndarray, sparse matrix, LinearOperator or matrix source
    chunk : int, optional
        Columns per block of the pass (default: blocks of about 8 MiB).

    Returns
    -------
    norm : float
        From the source's own ``frobenius_norm()`` if it has one and it returns a number (an
        optional member that must be exact to rounding: an upper bound such as
        ``norm_bound()`` will not do; None where the source cannot tell), else
        its ``col_norms_sq()`` or ``row_norms_sq()`` (dense and sparse inputs), else one pass
        over column blocks (``cols``: as many kernel evaluations as forming ``G``).
    """
    _check_chunk(chunk)
    src = as_source(G)
    if callable(getattr(src, "frobenius_norm", None)):
        value = src.frobenius_norm()  # None: the source cannot tell without a pass
        if value is not None:
            return float(value)
    for member in ("col_norms_sq", "row_norms_sq"):
        if callable(getattr(src, member, None)):
            return float(math.sqrt(max(float(np.sum(getattr(src, member)())), 0.0)))
    return float(math.sqrt(sum(float(np.einsum("ij,ij->", C, C))
                               for C in _column_chunks(src, chunk))))


def _projection_errors_pass(src, bases, chunk):
    """``||G||_F^2`` and ``||G - B B^T G||_F^2`` for each basis ``B``, in one column pass."""
    fro2 = 0.0
    errs = [0.0] * len(bases)
    for C in _column_chunks(src, chunk):
        fro2 += float(np.einsum("ij,ij->", C, C))
        for k, B in enumerate(bases):
            R = C - B @ (B.T @ C)
            errs[k] += float(np.einsum("ij,ij->", R, R))
    return fro2, errs


def _projection_error_products(src, B, fro2):
    """``||G - B B^T G||_F^2`` from one rmatmat (the identity is in :func:`lowrank_error`)."""
    Gt_B = np.asarray(src.rmatmat(B), dtype=np.float64)
    return fro2 - 2.0 * float(np.sum(Gt_B * Gt_B)) + float(np.sum((Gt_B @ (B.T @ B)) * Gt_B))


def _resolve_lowrank_method(method, shape):
    if method not in ("auto", "pass", "products"):
        raise ValueError(f"method must be 'auto', 'pass' or 'products', got {method!r}")
    if method == "auto":
        return "pass" if shape[0] * shape[1] <= LOWRANK_PASS_MAX_ENTRIES else "products"
    return method


def _check_norm_fro(norm_fro):
    if norm_fro is None:
        return None
    if isinstance(norm_fro, bool) or not isinstance(norm_fro, numbers.Real):
        raise TypeError(f"norm_fro must be a number or None, got {norm_fro!r}")
    if not (math.isfinite(norm_fro) and norm_fro >= 0):
        raise ValueError(f"norm_fro must be a finite number >= 0, got {norm_fro!r}")
    return float(norm_fro)


def _check_floor_rtol(floor_rtol, method):
    if floor_rtol is None:
        return LOWRANK_FLOOR_RTOL[method]
    if isinstance(floor_rtol, bool) or not isinstance(floor_rtol, numbers.Real):
        raise TypeError(f"floor_rtol must be a number or None, got {floor_rtol!r}")
    if not (math.isfinite(floor_rtol) and 0 <= floor_rtol <= 1):
        raise ValueError(f"floor_rtol must be in [0, 1] or None, got {floor_rtol!r}")
    return float(floor_rtol)


def _excess(error, optimum, floor):
    """``(error - optimum) / max(optimum, floor)``, 0 when both scales vanish (G = 0)."""
    scale = max(optimum, floor)
    if scale <= 0:
        return 0.0
    # error >= optimum by Eckart-Young; rounding can dip a hair below.
    return max(0.0, (error - optimum) / scale)


def lowrank_error(
    G,
    reference,
    approx,
    *,
    rank=None,
    method="auto",
    norm_fro=None,
    floor_rtol=None,
    chunk=None,
    return_terms=False,
):
    """Excess of the rank-``r`` approximation error over the optimum: a gap-robust measure.

    Parameters
    ----------
    G : ndarray, sparse matrix, LinearOperator or matrix source
        The matrix; used through column blocks (``cols``) or one ``rmatmat``, never formed
        unless it is dense already.
    reference : SVDResult or object with ``U`` (N, k), ``s`` (k,), ``V`` (M, k)
        The exact SVD (at least ``r`` triplets); gives the optimum ``||G - G_r||_F``.
    approx : SVDResult or object with ``U`` (N, k'), ``s``, ``V`` (M, k'), ``k' >= r``
        Its first ``r`` left vectors, each divided by its norm, form ``U~``.
    rank : int, optional
        ``r``, default all ``k`` triplets of the reference.
    method : {"auto", "pass", "products"}, default="auto"
        ``"pass"``: one pass over column blocks of ``G`` computes ``||G - U~ U~^T G||_F`` and
        ``||G - U U^T G||_F = ||G - G_r||_F`` (reference vectors) directly, accurate to
        rounding. ``"products"``: one ``rmatmat`` with ``U~`` and the identities
        ``||G - U~ U~^T G||_F^2 = ||G||_F^2 - 2 ||U~^T G||_F^2 + <U~^T G, U~^T U~ U~^T G>``
        and ``||G - G_r||_F^2 = ||G||_F^2 - sum_{i <= r} s_i^2``; cheap, but the subtraction
        loses about ``eps_mach (||G||_F / error)^2`` relative accuracy. ``"auto"``: a pass
        up to :data:`LOWRANK_PASS_MAX_ENTRIES` entries, products beyond.
    norm_fro : float, optional
        ``||G||_F`` if known (``"products"`` only; saves the norm's pass on sources without
        ``col_norms_sq``; see :func:`frobenius_norm`).
    floor_rtol : float, optional
        Floor of the denominator relative to ``||G||_F`` (Returns); default
        :data:`LOWRANK_FLOOR_RTOL` of the method: ``1e-6`` for a pass, ``1e-4`` for products.
    chunk : int, optional
        Columns per block of a pass.
    return_terms : bool, default=False
        Also return a dict: ``error``, ``optimum``, ``norm_fro``, ``floor``, ``method``.

    Returns
    -------
    excess : float
        ``(||G - U~ U~^T G||_F - ||G - G_r||_F) / max(||G - G_r||_F, floor_rtol ||G||_F)``,
        ``>= 0``. An answer meets ``||G - U~ U~^T G||_F <= (1 + eps) ||G - G_r||_F`` (the
        criterion of Halko, Martinsson and Tropp 2011 and Musco and Musco 2015) exactly when
        ``excess <= eps``, as long as the optimum is above the floor.
    terms : dict
        Only if ``return_terms``.

    Notes
    -----
    *Gap-robust.* Unlike eta, the measure needs no pairing of vectors: any basis of any
    optimal subspace scores 0, however the singular values repeat or cluster.

    *Exact low rank.* When ``||G - G_r||_F`` vanishes (``rank(G) <= r``) the ratio is
    undefined and, in floating point, both norms are rounding noise. The floor makes the
    measure ``(error - optimum) / (floor_rtol ||G||_F)`` there: an error below
    ``eps * floor_rtol * ||G||_F`` passes. The defaults sit well above each method's rounding
    noise (about ``1e-15 ||G||_F`` for a pass, ``1e-8 ||G||_F`` through products), so every
    exact answer scores below ``1e-8`` with a pass. A zero ``G`` scores 0.

    *Vectors as given.* ``U~`` is used with unit columns but not re-orthogonalised, so
    nearly parallel vectors are penalised (Eckart-Young still gives ``excess >= 0``). The
    measure checks the left subspace only (``V~`` is not read); pair it with
    :func:`residuals` for the vectors and values.

    Examples
    --------
    >>> import numpy as np
    >>> from types import SimpleNamespace
    >>> G = np.diag([3.0, 2.0, 2.0, 1.0])
    >>> ref = SimpleNamespace(U=np.eye(4)[:, :2], s=np.array([3.0, 2.0]), V=np.eye(4)[:, :2])
    >>> other = SimpleNamespace(U=np.eye(4)[:, [0, 2]], s=ref.s, V=np.eye(4)[:, [0, 2]])
    >>> lowrank_error(G, ref, other)  # the other basis of the repeated value is as good
    0.0
    """
    _check_chunk(chunk)
    src = as_source(G)
    U, s, _, Ua, Va, r = _pair(reference, approx, rank)
    shape = tuple(int(n) for n in src.shape)
    if shape != (U.shape[0], Va.shape[0]):
        raise ValueError(
            f"approx and reference have {U.shape[0]} rows in U and {Va.shape[0]} in V, but G "
            f"has shape {shape}"
        )
    method = _resolve_lowrank_method(method, shape)
    norm_fro = _check_norm_fro(norm_fro)
    floor_rtol = _check_floor_rtol(floor_rtol, method)
    Un = _normalised_columns(Ua)
    if method == "pass":
        fro2, (err2, opt2) = _projection_errors_pass(src, [Un, U[:, :r]], chunk)
    else:
        fro2 = (norm_fro if norm_fro is not None else frobenius_norm(src, chunk=chunk)) ** 2
        err2 = _projection_error_products(src, Un, fro2)
        opt2 = fro2 - float(np.sum(s[:r] ** 2))
    fro = math.sqrt(max(fro2, 0.0))
    error, optimum = math.sqrt(max(err2, 0.0)), math.sqrt(max(opt2, 0.0))
    floor = floor_rtol * fro
    excess = _excess(error, optimum, floor)
    if return_terms:
        return excess, {"error": error, "optimum": optimum, "norm_fro": fro, "floor": floor,
                        "method": method}
    return excess


# ---------------------------------------------------------------------------------------------
# residuals and the residual estimate of eta
# ---------------------------------------------------------------------------------------------


def _products(G, approx, products=None):
    """The source, the triplets and ``(G V~, G^T U~)``: given, or two products."""
    src = as_source(G)
    U, s, V = _triplets(approx, "approx")
    if tuple(src.shape) != (U.shape[0], V.shape[0]):
        raise ValueError(
            f"approx has U with {U.shape[0]} rows and V with {V.shape[0]} rows, but G has "
            f"shape {tuple(src.shape)}"
        )
    if products is not None:
        return (src, U, s, V, *_check_products(products, U, V))
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
            gaps[i] = min(_gap_to_other_clusters(mu, labels, i),
                          tail - mu[i] if tail_outside else np.inf)
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
    src, U, _, V, GV, GtU = _products(G, approx, products)
    k = U.shape[1]
    if rank is None:
        rank = k
    if not (isinstance(rank, (int, np.integer)) and 1 <= rank <= k):
        raise ValueError(f"rank must be an int in [1, {k}], got {rank!r}")
    labels_rtol = _check_cluster_rtol(cluster_rtol)
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
    estimate = float(w @ terms / rank)
    if return_terms:
        return estimate, {"terms": terms, "gaps": gaps, "mu": mu[:rank], "tail": tail,
                          "ritz": bool(is_ritz), "weights": w, "sigma_upper": upper,
                          "res_u": ru[:rank], "res_v": rv[:rank]}
    return estimate


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


def _check_scale(scale):
    if scale is None:
        return None
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real):
        raise TypeError(f"scale must be a number or None, got {type(scale).__name__}")
    if not (math.isfinite(scale) and scale >= 0):
        raise ValueError(f"scale must be a finite number >= 0 or None, got {scale!r}")
    return float(scale)


def _check_products(products, U, V):
    try:
        GV, GtU = products
    except (TypeError, ValueError):
        raise TypeError("products must be a pair (G @ V~, G.T @ U~)") from None
    GV = np.asarray(GV, dtype=np.float64)
    GtU = np.asarray(GtU, dtype=np.float64)
    if GV.shape != U.shape or GtU.shape != V.shape:
        raise ValueError(
            f"products must have shapes {U.shape} (G @ V~) and {V.shape} (G.T @ U~), got "
            f"{GV.shape} and {GtU.shape}"
        )
    return GV, GtU


def triplet_residual(G, approx, *, rank=None, reference=None, scale=None, products=None,
                     return_terms=False):
    """How well ``U~``, ``s~`` and ``V~`` fit together as singular triplets of ``G``.

    Parameters
    ----------
    G : ndarray, sparse matrix, LinearOperator or matrix source
        Used through one ``matmat`` with ``V~`` and one ``rmatmat`` with ``U~`` (fused into
        one ``sketch`` pass where the source has it), unless ``products`` are given.
    approx : SVDResult or object with ``U`` (N, k), ``s`` (k,), ``V`` (M, k)
        The answer; its first ``r`` triplets are scored, vectors as given (not
        renormalised: a vector of the wrong length is an error of the triplet).
    rank : int, optional
        ``r``, default all ``k`` triplets of ``approx``.
    reference : SVDResult, optional
        The exact SVD: its values give the scale ``||G_r||_F = sqrt(sum_{i <= r} s_i^2)``.
    scale : float, optional
        The scale to divide by, overriding the reference's. Without both, the answer's own
        ``sqrt(sum_{i <= r} s~_i^2)`` (an inflated ``s~`` then also inflates the scale, but
        not the residual of the vectors, so a wrong answer still scores about 1 or more).
    products : tuple of ndarray, optional
        ``(G @ V~[:, :r], G.T @ U~[:, :r])`` if already computed (the driver computes them in
        one pass with its probes); then ``G`` is not multiplied.
    return_terms : bool, default=False
        Also return a dict with ``"u"`` (``||G V~ - U~ S~||_F``), ``"v"``
        (``||G^T U~ - V~ S~||_F``, both absolute) and ``"scale"``.

    Returns
    -------
    residual : float
        ``max(||G V~ - U~ S~||_F, ||G^T U~ - V~ S~||_F) / scale``; 0 for exact triplets (to
        rounding). Meaningful with either sign convention of a triplet only if ``u~_i`` and
        ``v~_i`` are paired as the solver returned them (a flipped ``v~_i`` alone is a wrong
        triplet and scores ``2 s_i``).
    terms : dict
        Only if ``return_terms``.

    Raises
    ------
    TypeError, ValueError
        On bad shapes, non-finite entries, a bad ``rank`` or ``scale``.

    Notes
    -----
    Cost: one ``matmat`` with ``r`` columns and one ``rmatmat`` with ``r`` columns (a pass
    over a lazy ``G``), plus ``O((N + M) r)``. The residual is first order in the error of the
    vectors (``~ s_{r+1} sin theta`` for Rayleigh-Ritz answers), where eta,
    :func:`lowrank_error` and :func:`sv_error` are second order; measured against
    ``||G_r||_F`` (not ``s_1``) it stayed below ``eps`` wherever those met ``eps`` (1e-2 and
    1e-1, every randomized solver, a decaying and an RBF spectrum, rank 10), so the driver
    holds it to the same ``eps`` by default (see
    :func:`ksvd_bench.driver.solve_to_tolerance`). A wrong pairing (a random ``V~``, two
    vectors of a repeated value combined differently on the two sides) scores about 1.

    Examples
    --------
    >>> import numpy as np
    >>> from types import SimpleNamespace
    >>> G = np.diag([3.0, 2.0, 1.0])
    >>> I = np.eye(3)[:, :2]
    >>> triplet_residual(G, SimpleNamespace(U=I, s=np.array([3.0, 2.0]), V=I))
    0.0
    >>> swapped = SimpleNamespace(U=I, s=np.array([3.0, 2.0]), V=I[:, ::-1])
    >>> round(triplet_residual(G, swapped), 3)
    1.414
    """
    U, s, V = _triplets(approx, "approx")
    k = U.shape[1]
    r = k if rank is None else _check_scored_rank(rank, k)
    U, s, V = U[:, :r], s[:r], V[:, :r]
    scale = _check_scale(scale)
    if scale is None and reference is not None:
        ref_s = _triplets(reference, "reference")[1]
        _check_reference_values(ref_s)
        if ref_s.size < r:
            raise ValueError(f"reference holds {ref_s.size} triplets, fewer than rank={r}")
        scale = float(np.linalg.norm(ref_s[:r]))
    if scale is None:
        scale = float(np.linalg.norm(s))
    if products is None:
        src = as_source(G)
        if tuple(src.shape) != (U.shape[0], V.shape[0]):
            raise ValueError(
                f"approx has U with {U.shape[0]} rows and V with {V.shape[0]} rows, but G "
                f"has shape {tuple(src.shape)}"
            )
        sketch = getattr(src, "sketch", None)
        if callable(sketch):
            GV, GtU = sketch(V, U)
        else:
            GV, GtU = src.matmat(V), src.rmatmat(U)
    else:
        GV, GtU = products
    GV, GtU = _check_products((GV, GtU), U, V)
    ru = float(np.linalg.norm(GV - U * s))
    rv = float(np.linalg.norm(GtU - V * s))
    worst = max(ru, rv)
    residual = worst / scale if scale > 0 else worst
    if return_terms:
        return residual, {"u": ru, "v": rv, "scale": scale}
    return residual
