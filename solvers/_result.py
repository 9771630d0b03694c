"""The result type shared by every solver, and the normalisation applied to every answer."""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field

import numpy as np

from ._records import Certificate, Record, record
from .scaling import SAFE_EXPONENT

__all__ = ["SVDResult", "SolveInfo", "fix_signs"]


@record
class SolveInfo(Record):
    """What one solve did, and how far its answer is trusted: ``SVDResult.info``.

    A dict with declared fields (:mod:`solvers._records`): ``info.fro2`` and ``info["fro2"]``
    are one value. A field the solve did not set is absent (``"fro2" in info`` is False,
    ``info["fro2"]`` raises KeyError) and its attribute reads None. Entries no field
    declares (a method's options echoed back, as ``n_iter``) are kept (``info.extra``).
    Every solver sets the fields down to ``reliable``; the others are method-specific.

    Attributes
    ----------
    method : str
        The method that answered (``"rsvd"``, ``"block_krylov"``, ...).
    effort : int
        The method's effort parameter (the knob the driver raises).
    n_matvec : int
        Number of vectors multiplied by ``G`` or ``G.T``.
    n_block_entries : int
        Entries of ``G`` read through ``rows``/``cols``/``block``.
    n_products : int
        Calls of ``matmat``/``rmatmat``/``sketch``: each reads all of ``G`` once, whatever
        its width.
    n_passes : float
        ``n_products + n_block_entries / (N * M)``: the cost in whole passes over ``G``,
        comparable across methods.
    seconds : float
        Wall time of the call.
    reliable : bool or None
        True only where the product certificate vouches for the answer
        (:func:`solvers._check.final_reliable`; ``tsvd``: its eigensolver converged); False
        when the solver's own checks say the answer cannot be trusted, always together with
        a ``RuntimeWarning``; None, "unknown", where no evidence certifies it: every method
        with ``check_passes=0``, whose cheap checks can say False, never True.
    check_passes : int
        Passes the product certificate spent (the methods with a ``check_passes`` option).
    certificate : Certificate
        The product certificate (:class:`solvers.Certificate`).
    lower_bounds : ndarray of shape (rank,) or None
        Certified lower bounds on ``G``'s top singular values (None where no product ran).
    error_estimate : float
        ``rsvd``, ``block_krylov``: their own estimate of ``||G - U S V^T||_F`` from their
        sketch, absolute (absent where they could not make one).
    error_estimate_kind : str
        How ``error_estimate`` was made: ``"exact"``, ``"gap"`` or ``"loo"``.
    fro2 : float
        ``||G||_F^2`` where the source knows it (``rsvd``, ``block_krylov``).
    entries_read : int
        Nyström methods: entries of ``G`` read, the sampler's and any norm pass included.
    row_indices : ndarray
        Nyström methods: the sampled rows.
    col_indices : ndarray or None
        Nyström methods: the sampled columns (None: ``sym_nystrom``).
    numerical_rank : int
        Nyström methods: directions the core kept.
    s_nystrom : ndarray
        ``sym_nystrom``: the raw Nyström values, before the pairing product.
    oblique_norm : float
        ``asym_nystrom`` (stable core): the oblique projector's norm, a bound on how far its
        values can be inflated.
    inflation_estimate : float
        ``generalized_nystrom``: its estimate of how far the values are inflated.
    exact_path : str
        ``tsvd``: the exact route taken where one applied.
    """

    __slots__ = ()

    method: str
    effort: int
    n_matvec: int
    n_block_entries: int
    n_products: int
    n_passes: float
    seconds: float
    reliable: bool | None
    check_passes: int
    certificate: Certificate
    lower_bounds: np.ndarray | None
    error_estimate: float
    error_estimate_kind: str
    fro2: float
    entries_read: int
    row_indices: np.ndarray
    col_indices: np.ndarray | None
    numerical_rank: int
    s_nystrom: np.ndarray
    oblique_norm: float
    inflation_estimate: float
    exact_path: str

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        cert = dict.get(self, "certificate")
        # the one place a certificate becomes its record (solvers._certificate builds dicts)
        if isinstance(cert, dict) and not isinstance(cert, Certificate):
            dict.__setitem__(self, "certificate", Certificate(cert))


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
    info : SolveInfo
        What the solve did and how far its answer is trusted: the common fields
        (``method``, ``effort``, the counters, ``seconds``, ``reliable``) and each method's
        own (see :class:`SolveInfo`). It reads as the dict it has always been
        (``info["reliable"]``, ``info.get("fro2")``); a plain dict given here is made one.

    Notes
    -----
    Sign convention: for every ``i`` the entry of largest magnitude in ``U[:, i]`` is positive
    (the first such entry on ties) and ``V[:, i]`` is flipped with it, so that
    ``U[:, i] * s[i] * V[:, i].T`` is unchanged and equal answers compare equal.
    """

    U: np.ndarray
    s: np.ndarray
    V: np.ndarray
    info: SolveInfo = field(default_factory=SolveInfo)

    def __post_init__(self):
        if not isinstance(self.info, SolveInfo):
            self.info = SolveInfo(self.info or {})

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
    info = SolveInfo(
        {
            "method": method,
            "effort": int(effort),
            "n_matvec": int(tracker.n_matvec),
            "n_block_entries": int(tracker.n_block_entries),
            "n_products": int(tracker.n_products),
            "n_passes": float(tracker.n_passes),
            "seconds": time.perf_counter() - t0,
            "reliable": None if reliable is None else bool(reliable),
        },
        **(extra if scale == 1.0 else _unscaled(extra, scale)),
    )
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
