"""The efforts the driver tries: one schedule per method, smallest first."""

from __future__ import annotations

import math

import solvers
from solvers import check_int

from .reference import _check_rank

__all__ = ["EFFORT_OPTION", "effort_kind", "effort_schedule"]

#: The solver option each method's effort sets (declared in ``solvers.SOLVERS``).
EFFORT_OPTION = {
    name: spec.effort_option for name, spec in solvers.SOLVERS.items() if spec.effort_option
}


def effort_kind(method):
    """How ``method``'s effort grows: ``"samples"``, ``"oversamples"``, ``"depth"`` or None
    (no effort knob), as ``solvers.SOLVERS`` declares it."""
    return solvers.SOLVERS[method].effort_kind


def _block_oversamples(method, n_oversamples):
    """The block oversampling of a Krylov method: given, else the solver's default."""
    if n_oversamples is None:
        return int(solvers.SOLVERS[method].defaults["n_oversamples"])
    return check_int("n_oversamples", n_oversamples, 0)


def _effort_range(method, rank, shape, n_oversamples):
    """``(default cap, lowest admissible effort, default first effort)`` of a method."""
    kind = effort_kind(method)
    if kind == "samples":
        return min(shape), rank, 2 * rank
    if kind == "depth":
        # Krylov depth q: the basis [G W, (G G^T) G W, ...] has (q + 1) blocks of
        # b = min(rank + p, min(N, M)) columns (the solver trims the last one), and at
        # min(N, M) columns it holds the whole range: the answer is exact.
        block = min(rank + _block_oversamples(method, n_oversamples), min(shape))
        return max(0, -(-min(shape) // block) - 1), 0, 0
    return min(shape) - rank, 0, 0  # oversampling: up to a sketch as wide as G


def _next_effort(kind, e, growth):
    if kind == "samples":
        return max(e + 1, math.ceil(e * growth))
    if kind == "depth":
        if e < 4:
            return e + 1
        # 4, 6, 8, 12, 16, 24, ...: doubling in two steps, since each step adds passes
        return e * 3 // 2 if e & (e - 1) == 0 else e * 4 // 3
    return 5 if e < 5 else 2 * e


def effort_schedule(
    method, rank, shape, *, max_effort=None, start=None, growth=1.25, n_oversamples=None
):
    """The efforts the driver tries for a method, smallest first.

    Parameters
    ----------
    method : str
        One of ``solvers.METHODS``.
    rank : int
        Number of triplets sought.
    shape : tuple of int
        ``(N, M)``.
    max_effort : int, optional
        Cap. Default ``min(N, M)`` for the Nyström methods (all columns),
        ``min(N, M) - rank`` for RSVD and generalized Nyström (a sketch as wide as the
        matrix), and for block Krylov the smallest depth ``q`` whose basis of ``q + 1``
        blocks of ``rank + n_oversamples`` columns spans ``min(N, M)`` dimensions (exact).
    start : int, optional
        First effort; default ``2 * rank`` (Nyström) or 0.
    growth : float, default=1.25
        Factor between consecutive Nyström sample sizes.
    n_oversamples : int, optional
        Block oversampling of ``block_krylov`` (its cap only); default the solver's.

    Returns
    -------
    efforts : list of int
        Strictly increasing, the last equal to the cap. Nyström: the number of sampled
        columns ``m``, geometric by ``growth``; RSVD and generalized Nyström:
        ``n_oversamples`` 0, 5, 10, 20, 40, ... (doubling after 5); block Krylov: the number
        of iterations ``n_iter`` 0, 1, 2, 3, 4, 6, 8, 12, 16, ... (the depth is what buys
        its accuracy, gap-independently, at two passes per step; the block stays
        ``rank + n_oversamples``); TSVD: ``[0]``, a single run whose accuracy is set by the
        solver's ``tol`` (``max_effort`` is ignored).

    Raises
    ------
    ValueError
        On an unknown method, a cap below the smallest admissible effort (``rank`` for
        Nyström, 0 otherwise), ``growth <= 1`` or a negative ``start``.
    """
    methods = tuple(solvers.METHODS)
    if method not in methods:
        raise ValueError(f"method must be one of {methods}, got {method!r}")
    if len(shape) != 2:
        raise ValueError(f"shape must be (N, M), got {shape!r}")
    shape = (int(shape[0]), int(shape[1]))
    rank = _check_rank(rank, shape)
    if not (isinstance(growth, (int, float)) and growth > 1):
        raise ValueError(f"growth must be a number > 1, got {growth!r}")
    if effort_kind(method) is None:
        return [0]
    default_cap, lowest, first = _effort_range(method, rank, shape, n_oversamples)
    cap = default_cap if max_effort is None else min(int(max_effort), default_cap)
    if max_effort is not None and int(max_effort) < lowest:
        raise ValueError(f"max_effort must be at least {lowest} for {method}, got {max_effort}")
    if start is not None:
        if int(start) < lowest:
            raise ValueError(f"start must be at least {lowest} for {method}, got {start}")
        first = int(start)
    efforts = []
    e = first
    while e < cap:
        efforts.append(e)
        e = _next_effort(effort_kind(method), e, growth)
    efforts.append(cap)
    return efforts
