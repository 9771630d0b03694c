"""Argument checks shared by the measures, the pairing of an answer with its reference,
and the clusters of singular values they score by."""

from __future__ import annotations

import math
import numbers

import numpy as np

from solvers.scaling import power_of_two_scale

__all__ = ["WEIGHTS", "CLUSTER_RTOL", "singular_value_groups", "in_units", "unit_of"]

WEIGHTS = ("singular_values", "relative", "uniform")
#: Default relative gap (to the largest singular value) below which singular values form a cluster.
CLUSTER_RTOL = 1e-6


# ---------------------------------------------------------------------------------------------
# argument checks
# ---------------------------------------------------------------------------------------------


def _check_weights(weights):
    if weights not in WEIGHTS:
        raise ValueError(f"weights must be one of {WEIGHTS}, got {weights!r}")


def check_cluster_rtol(cluster_rtol):
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
# extreme magnitudes
# ---------------------------------------------------------------------------------------------


class _InUnits:
    """``unit * G`` of a matrix source: every block and product it gives, times ``unit``."""

    def __init__(self, src, unit):
        self.src, self.unit = src, unit
        self.shape, self.dtype = tuple(src.shape), np.dtype(np.float64)

    def _times(self, value):
        return self.unit * np.asarray(value, dtype=np.float64)

    def rows(self, idx):
        return self._times(self.src.rows(idx))

    def cols(self, idx):
        return self._times(self.src.cols(idx))

    def block(self, ridx, cidx):
        return self._times(self.src.block(ridx, cidx))

    def matmat(self, X):
        return self._times(self.src.matmat(X))

    def rmatmat(self, Y):
        return self._times(self.src.rmatmat(Y))

    def sketch(self, Omega, Psi):
        sketch = getattr(self.src, "sketch", None)
        if callable(sketch):
            GO, GtP = sketch(Omega, Psi)
        else:
            GO, GtP = self.src.matmat(Omega), self.src.rmatmat(Psi)
        return self._times(GO), self._times(GtP)

    def frobenius_norm(self):
        member = getattr(self.src, "frobenius_norm", None)
        value = member() if callable(member) else None
        return None if value is None else self.unit * float(value)


def unit_of(magnitude):
    """The unit the measures count in: 1, or a power of two where ``magnitude`` is extreme.

    Norms square their entries: a ``G`` near ``1e300`` (or ``1e-300``) overflows (underflows)
    them. Where ``magnitude`` (the size of ``G``: a singular value or an entry) lies outside
    ``2^+-SAFE_EXPONENT`` the measures work on ``unit * G`` (:func:`in_units`), ``unit`` the
    power of two bringing it near 1 (exact; as the solvers do,
    :func:`solvers.scaling.power_of_two_scale`), and multiply every value they compare
    with by ``unit`` too: their ratios do not change.
    """
    return power_of_two_scale(float(magnitude))


def in_units(src, unit):
    """``unit * G`` of the matrix source ``src``: ``src`` itself when ``unit`` is 1."""
    return src if unit == 1.0 else _InUnits(src, unit)


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
    rtol = check_cluster_rtol(cluster_rtol)
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
    rtol = check_cluster_rtol(cluster_rtol)
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
