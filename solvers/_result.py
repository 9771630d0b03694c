"""The result type shared by every solver, and the normalisation applied to every answer."""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field

import numpy as np

from .scaling import SAFE_EXPONENT

__all__ = ["SVDResult", "fix_signs"]


@dataclass
class SVDResult:
    """Top singular triplets of a matrix ``G`` (N x M) as returned by :func:`solvers.svd`.

    Attributes
    ----------
    U : ndarray of shape (N, rank)
        Left singular vectors (orthonormal columns unless a method documents otherwise).
    s : ndarray of shape (rank,)
        Singular values, largest first.
    V : ndarray of shape (M, rank)
        Right singular vectors, ``G ~ U @ diag(s) @ V.T``.
    info : dict
        ``"method"`` (str), ``"effort"`` (int, the method's effort parameter),
        ``"n_matvec"`` (int, number of vectors multiplied by ``G`` or ``G.T``),
        ``"n_block_entries"`` (int, entries of ``G`` read through ``rows``/``cols``/``block``),
        ``"n_products"`` (int, calls of ``matmat``/``rmatmat``/``sketch``: each reads all of
        ``G`` once, whatever its width), ``"n_passes"`` (float, ``n_products +
        n_block_entries / (N * M)``: the cost in whole passes over ``G``, comparable across
        methods), ``"seconds"`` (float, wall time of the call), ``"reliable"`` (True only where
        the product certificate vouches for the answer, :func:`solvers._check.final_reliable`
        (``tsvd``: its eigensolver converged); False when the solver's own checks say the
        answer cannot be trusted, always together with a ``RuntimeWarning``; None,
        "unknown", where no evidence certifies it: every method with ``check_passes=0``,
        whose cheap checks can say False, never True) and method-specific keys; ``rsvd`` and
        ``block_krylov`` add ``"error_estimate"`` (float, their own estimate of
        ``||G - U S V^T||_F`` from their sketch, absolute), ``"error_estimate_kind"``
        (``"exact"``, ``"gap"`` or ``"loo"``) where they could make one, and ``"fro2"``
        (``||G||_F^2``) where the source knows it.

    Notes
    -----
    Sign convention: for every ``i`` the entry of largest magnitude in ``U[:, i]`` is positive
    (the first such entry on ties) and ``V[:, i]`` is flipped with it, so that
    ``U[:, i] * s[i] * V[:, i].T`` is unchanged and equal answers compare equal.
    """

    U: np.ndarray
    s: np.ndarray
    V: np.ndarray
    info: dict = field(default_factory=dict)

    @property
    def rank(self) -> int:
        """Number of triplets."""
        return int(self.s.shape[0])

    def __repr__(self) -> str:
        # Short on purpose: the arrays can have millions of entries.
        head = [f"{v:.5g}" for v in np.asarray(self.s[:5], dtype=float)]
        if self.rank > 5:
            head.append("...")
        parts = [f"U={self.U.shape}", f"s=[{', '.join(head)}]", f"V={self.V.shape}"]
        for key, fmt in (
            ("method", "{!r}"),
            ("effort", "{}"),
            ("n_passes", "{:.4g}"),
            ("seconds", "{:.3g}"),
        ):
            if key in self.info:
                parts.append(f"{key}=" + fmt.format(self.info[key]))
        return f"SVDResult({', '.join(parts)})"

    def __iter__(self):
        # Lets ``U, s, V = solvers.svd(...)`` work like ``np.linalg.svd`` (with V, not V^T).
        return iter((self.U, self.s, self.V))


def fix_signs(U, V):
    """Flip column pairs in place so the largest-magnitude entry of each ``U[:, i]`` is > 0.

    The convention of :func:`sklearn.utils.extmath.svd_flip` (``u_based_decision=True``) on
    ``U`` and ``V^T``, the first entry of largest magnitude deciding on ties; a zero column of
    ``U`` (and its ``V`` column) is left as it is.

    Parameters
    ----------
    U, V : ndarray of shape (N, k) and (M, k)
        Left and right singular vectors; both are modified in place.

    Returns
    -------
    U, V : ndarray
        The same arrays, for chaining. ``U[:, i] * V[:, i].T`` is unchanged.

    Notes
    -----
    The largest and smallest entries of each column (``argmax``, ``argmin``: no temporary
    of U's size, where ``svd_flip`` forms ``|U|`` and multiplies every column; 3.1 s of the
    1e6 RPCholesky run, issue 32) decide the sign, and only the columns that change are
    negated, in place.
    """
    if U.shape[1] == 0 or U.shape[0] == 0:
        return U, V
    cols = np.arange(U.shape[1])
    hi, lo = np.argmax(U, axis=0), np.argmin(U, axis=0)
    top, bottom = U[hi, cols], U[lo, cols]
    # the entry of largest magnitude is negative, or ties with a positive one further down
    flip = (-bottom > top) | ((-bottom == top) & (lo < hi) & (top != 0))
    for i in np.flatnonzero(flip):
        U[:, i] *= -1
        V[:, i] *= -1
    return U, V


def finish(U, s, V, *, method, effort, tracker, t0, dtype, reliable=True, **extra):
    """Order triplets by decreasing ``s``, apply the sign convention, cast, and build info.

    ``tracker`` is the counting wrapper the method used (see ``validation.Tracked``): every
    method's counters, ``n_passes`` included, come from it, so they are computed one way.
    ``t0`` is the ``time.perf_counter()`` value taken when the call started. ``reliable``
    is False only where the method's own checks flagged the answer (and warned).
    """
    scale = getattr(tracker, "value_scale", 1.0)
    if method != "tsvd" and getattr(tracker, "check_finite", False):
        reliable, extra = _check_magnitude(method, s, reliable, extra)
    order = np.argsort(-np.asarray(s), kind="stable")
    # Fancy indexing already copies (fix_signs then writes in place): no second copy.
    U = np.asarray(U[:, order], dtype=dtype)
    V = np.asarray(V[:, order], dtype=dtype)
    s = np.asarray(np.asarray(s) / scale, dtype=dtype)[order]
    fix_signs(U, V)
    info = {
        "method": method,
        "effort": int(effort),
        "n_matvec": int(tracker.n_matvec),
        "n_block_entries": int(tracker.n_block_entries),
        "n_products": int(tracker.n_products),
        "n_passes": float(tracker.n_passes),
        "seconds": time.perf_counter() - t0,
        "reliable": None if reliable is None else bool(reliable),
    }
    info.update(extra if scale == 1.0 else _unscaled(extra, scale))
    return SVDResult(U=U, s=s, V=V, info=info)


def _check_magnitude(method, s, reliable, extra):
    """A lazy source's answer of extreme magnitude is unreliable, and has no error estimate.

    Concrete inputs are rescaled up front (``check_args``); a lazy source is not (its size
    is unknown until read). Where its largest value lies outside ``2^+-SAFE_EXPONENT`` the
    squared norms of the method's estimates and certificates may have underflowed or
    overflowed: that makes them unknown, never small. (``tsvd`` rescales on its own.)
    """
    top = float(np.max(np.abs(s), initial=0.0))
    if top == 0.0 or (np.isfinite(top) and abs(math.frexp(top)[1]) <= SAFE_EXPONENT):
        return reliable, extra
    warnings.warn(
        f"{method}: the largest value found, {top:.3g}, lies outside [2^-{SAFE_EXPONENT}, "
        f"2^{SAFE_EXPONENT}], where the squared norms of the method's checks underflow or "
        "overflow: the answer cannot be certified (info['reliable'] = False) and has no "
        "error estimate. To fix, scale the source by a power of two (a dense or sparse G "
        "is rescaled automatically)",
        RuntimeWarning,
        stacklevel=4,
    )
    extra = {k: v for k, v in extra.items() if k not in ("error_estimate", "error_estimate_kind")}
    return False, extra


#: ``info`` entries (also inside ``info["certificate"]`` and its ``"sampled"`` part) that are
#: magnitudes of ``G``; ``fro2`` is a squared one. Every other number in ``info`` is
#: dimensionless (a sine, a relative error, a probability, a count, seconds).
_MAGNITUDES = frozenset(
    {
        "lower_bounds",
        "s_nystrom",
        "block_singular_values",
        "error_estimate",
        "inflation_estimate",
        "deflated",
        "deflated_upper",
        "gap",
        "residual",
        "threshold",
        "fro_error",
        "fro_error_se",
        "fro_error_low",
        "fro_error_high",
    }
)
_SQUARED_MAGNITUDES = frozenset({"fro2"})


def _unscaled(info, scale):
    """``info`` of an answer computed on ``scale * G``, in the units of ``G``.

    ``scale`` is a power of two (see ``check_args``), so the division is exact.
    """
    out = {}
    for key, value in info.items():
        if isinstance(value, dict):
            value = _unscaled(value, scale)
        elif value is not None and key in _MAGNITUDES:
            value = value / scale
        elif value is not None and key in _SQUARED_MAGNITUDES:
            value = value / scale / scale
        out[key] = value
    return out
