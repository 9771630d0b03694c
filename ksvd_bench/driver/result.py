"""What :func:`~ksvd_bench.driver.solve_to_tolerance` returns."""

from __future__ import annotations

from dataclasses import dataclass, field

from ksvd_bench.scoring import STATUSES
from solvers import SVDResult

__all__ = ["STATUSES", "STOPPED_BY", "ToleranceResult"]

#: Why the sweep stopped growing the effort (``ToleranceResult.stopped_by``): an answer was
#: accepted; a reference-free stop fired on an answer the reference shows wrong (the
#: sweep stops there, as that stop would without a reference); the schedule's cap; the
#: time limit.
STOPPED_BY = ("converged", "stopped_early", "cap", "time_limit")


@dataclass
class ToleranceResult:
    """Outcome of :func:`solve_to_tolerance`.

    Attributes
    ----------
    method : str
    effort : int
        Effort of the returned answer (``result.info["effort"]``: ``m`` for Nyström,
        ``n_oversamples`` for RSVD and generalized Nyström, ``n_iter`` for block Krylov,
        what the solver reports for TSVD).
    eta : float
        eta of the returned answer against the reference (NaN when there is none).
    seconds : float
        Median wall time over ``repeats`` runs at that effort (JIT warm-up excluded).
    converged : bool
        ``status == "converged"``: the answer was accepted. Its stopping quantity is at
        most ``eps``, its ``triplet_residual`` at most ``triplet_tol``, it is
        ``reliable``, and, whenever a reference is given (for every ``stop``), its
        ``metric`` is at most ``eps`` and its ``sv_error`` at most ``sv_tol``: the
        whole-triplet rule. When False, the answer is the one the stop fired on
        (``stopped_by="stopped_early"``) or the best one seen (lowest ``metric``, or lowest
        reference-free estimate without a reference).
    status : {"converged", "not converged", "unreliable", "stopped early, wrong"}
        The verdict (:data:`STATUSES`): ``"stopped early, wrong"`` where a reference-free
        stop (``"estimate"``, ``"residual"``) fired on an answer that the reference shows
        fails the rule (show it with ``sv_error`` and ``value``); ``"unreliable"`` where
        the returned answer was marked so by its solver; ``"not converged"`` otherwise.
    result : SVDResult
        The answer.
    history : list of dict
        One entry per effort tried: ``effort``, ``eta``, ``lowrank``, ``subspace``,
        ``value`` (of ``metric``), ``residual_estimate``, ``sv_error``,
        ``triplet_residual``, ``error_estimate``, ``relative_error_estimate``,
        ``estimate_kind`` (``"gap"``, ``"fused_gap"``, ``"fused_exact"``, ``"fused_loo"``
        or ``"probes"``: see :func:`solve_to_tolerance`), ``solver_error_estimate`` (the
        solver's own ``info["error_estimate"]``), ``stop_value`` (what
        ``stop`` compares with ``eps``: ``value``, the estimate times its safety factor, or
        ``residual_estimate``), ``n_warnings``,
        ``warnings``, ``reliable``, ``seconds``, ``status`` (that answer's verdict, one of
        :data:`STATUSES`), ``converged`` (``status == "converged"``), ``n_matvec``,
        ``n_block_entries``, ``n_passes``. A measure not computed is NaN.
    residual_estimate : float
        Residual estimate of eta for the returned answer (NaN if not computed).
    eps, stop, weights, metric :
        The request (``stop`` resolved: ``"reference"``, ``"estimate"`` or ``"residual"``).
    all_seconds : list of float
        The ``repeats`` timings behind ``seconds``.
    stopped_by : {"converged", "stopped_early", "cap", "time_limit"}
        Why the effort stopped growing (:data:`STOPPED_BY`).
    value : float
        ``metric`` of the returned answer against the reference (NaN when there is none).
    lowrank : float
        :func:`~ksvd_bench.metrics.lowrank_error` of the returned answer (NaN unless
        ``metric="lowrank"`` or ``"lowrank"`` in ``track``).
    subspace : float
        The larger of the two :func:`~ksvd_bench.metrics.subspace_error` sines (NaN unless
        ``metric="subspace"`` or ``"subspace"`` in ``track``).
    sv_error : float
        :func:`~ksvd_bench.metrics.sv_error` of the answer, ``max_i |s~_i - s_i| / s_1``
        against the reference (NaN without one).
    triplet_residual : float
        :func:`~ksvd_bench.metrics.triplet_residual` of the answer,
        ``max(||G V~ - U~ S~||_F, ||G^T U~ - V~ S~||_F) / ||G_r||_F`` (``||G_r||_F`` from the
        reference's values; without one from the answer's).
    n_warnings : int
        Warnings the solver raised while computing the returned answer.
    warnings : list of str
        Their messages, deduplicated.
    reliable : bool
        ``result.info["reliable"]`` (True where the solver does not set it).
    error_estimate : float
        Reference-free estimate of ``||G - U~ U~^T G||_F`` (absolute; see
        :func:`solve_to_tolerance`, Notes).
    relative_error_estimate : float
        ``error_estimate / ||G||_F`` (what ``stop="estimate"`` compares, times its safety
        factor where the estimate is randomized: leave-one-out or probes).
    """

    method: str
    effort: int
    eta: float
    seconds: float
    converged: bool
    result: SVDResult
    history: list = field(default_factory=list)
    residual_estimate: float = float("nan")
    eps: float = float("nan")
    stop: str = "reference"
    weights: str = "singular_values"
    all_seconds: list = field(default_factory=list)
    stopped_by: str = "converged"
    metric: str = "eta"
    value: float = float("nan")
    lowrank: float = float("nan")
    subspace: float = float("nan")
    sv_error: float = float("nan")
    triplet_residual: float = float("nan")
    n_warnings: int = 0
    warnings: list = field(default_factory=list)
    reliable: bool = True
    error_estimate: float = float("nan")
    relative_error_estimate: float = float("nan")
    status: str = ""

    def __post_init__(self):
        if not self.status:  # built by hand: the verdict follows converged
            self.status = "converged" if self.converged else "not converged"
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")

    def __repr__(self):
        # eta is shown once: as the metric, or beside it when another metric is used
        shown = [f"{self.metric}={self.value:.3g}"]
        if self.metric != "eta":
            shown.append(f"eta={self.eta:.3g}")
        if self.stop == "estimate":
            shown.append(f"relative_error_estimate={self.relative_error_estimate:.3g}")
        shown += [f"sv_error={self.sv_error:.3g}", f"triplet_residual={self.triplet_residual:.3g}"]
        return (
            f"ToleranceResult(method={self.method!r}, {', '.join(shown)}, "
            f"eps={self.eps:g}, stop={self.stop!r}, converged={self.converged}, "
            f"effort={self.effort}, seconds={self.seconds:.3g}, "
            f"stopped_by={self.stopped_by!r}, status={self.status!r}, "
            f"n_warnings={self.n_warnings}, "
            f"reliable={self.reliable})"
        )
