"""The sweep: grow a solver's effort until its answer meets a tolerance, and time it there.

:func:`solve_to_tolerance` reads as its steps: validate the request (grouped into the stop
and its estimate, the scoring, the effort), prepare the sources and the reference, warm up,
sweep the efforts (each answer scored by :class:`ksvd_bench.scoring.Scorer`), time the
accepted one, and return a :class:`~ksvd_bench.driver.ToleranceResult`.
"""

from __future__ import annotations

import math
import numbers
import time
from dataclasses import dataclass

import numpy as np

import solvers
from ksvd_bench.metrics import CLUSTER_RTOL, WEIGHTS
from ksvd_bench.metrics.common import check_cluster_rtol
from ksvd_bench.scoring import (
    Scorer,
    exact_fro2,
    gap_rtol,
    recording_warnings,
    reemit,
    warning_fields,
)
from solvers import N_PROBES, PROBE_SAFETY, SVDResult, as_source, check_int, check_random_state

from .reference import _check_rank, reference_svd
from .result import ToleranceResult
from .schedule import EFFORT_OPTION, effort_kind, effort_schedule

__all__ = ["METRICS", "STOPS", "solve_to_tolerance"]

#: Stopping rules of :func:`solve_to_tolerance`: the measure against a reference, the
#: reference-free estimate of the low-rank error, the residual estimate of eta.
STOPS = ("reference", "estimate", "residual")
#: Accuracy measures the driver can stop on (see :mod:`ksvd_bench.metrics`).
METRICS = ("eta", "lowrank", "subspace")
#: What ``eps`` bounds under each stop (quoted by the errors of a misdirected argument).
_BOUNDS = {
    "reference": "the measure `metric` against the reference",
    "estimate": (
        "the estimated relative low-rank error ||G - U U^T G||_F / ||G||_F (times "
        "the safety factor 2 of a randomized estimate)"
    ),
    "residual": "the residual estimate of eta (with `weights`)",
}
# Mixed into an effort's seed for its probes, so they are independent of the solver's draws.
_PROBE_SEED_SALT = 0x5EED_9A0BE
_DEFAULT_WEIGHTS = "singular_values"


# ---------------------------------------------------------------------------------------------
# the request, grouped
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StopRule:
    """The stop and its estimate: what must reach ``eps``, and the checks beside it."""

    stop: str
    eps: float
    sv_tol: float
    triplet_tol: float
    norm_fro: float | None
    n_probes: int


@dataclass(frozen=True)
class Scoring:
    """How answers are scored: the measures, the reference and where it comes from."""

    metric: str
    weights: str
    track: frozenset
    track_residual: bool
    cluster_rtol: float | None
    reference: object
    cache_dir: object
    cache_key: object
    residual_operator: object


@dataclass(frozen=True)
class Effort:
    """What the sweep varies and how long it may run."""

    schedule: object
    max_effort: int | None
    options: dict
    effort_key: str | None
    repeats: int
    time_limit: float | None


def _check_schedule(schedule, method, rank, max_effort):
    if effort_kind(method) is None:
        raise ValueError("schedule is not used by tsvd (a single run); pass schedule=None")
    if any(isinstance(e, bool) or not isinstance(e, (int, np.integer)) for e in schedule):
        raise ValueError(f"schedule must hold ints, got {list(schedule)!r}")
    efforts = [int(e) for e in schedule]
    if not efforts:
        raise ValueError("schedule must not be empty")
    if any(b <= a for a, b in zip(efforts[:-1], efforts[1:], strict=True)):
        raise ValueError(f"schedule must be strictly increasing, got {efforts}")
    lowest = rank if effort_kind(method) == "samples" else 0
    if efforts[0] < lowest:
        raise ValueError(f"schedule entries must be at least {lowest} for {method}")
    if max_effort is not None:
        efforts = [e for e in efforts if e <= max_effort]
        if not efforts:
            raise ValueError(f"no schedule entry is <= max_effort={max_effort}")
    return efforts


def _check_choice(name, value, choices):
    # the one case rule of every string option (solvers.check_choice): canonical name back
    return solvers.check_choice(name, value, tuple(choices))


def _check_eps(eps):
    if isinstance(eps, bool) or not isinstance(eps, numbers.Real):
        raise TypeError(f"eps must be a number, got {type(eps).__name__}")
    if not (np.isfinite(eps) and eps > 0):
        raise ValueError(f"eps must be a finite number > 0, got {eps!r}")


def _check_time_limit(time_limit):
    if time_limit is None:
        return
    if isinstance(time_limit, bool) or not isinstance(time_limit, numbers.Real):
        raise TypeError(
            f"time_limit must be a number of seconds or None, got {type(time_limit).__name__} "
            f"{time_limit!r}"
        )
    if not (np.isfinite(time_limit) and time_limit > 0):
        raise ValueError(f"time_limit must be a finite number > 0 or None, got {time_limit!r}")


def _check_tol(value, name):
    """An optional tolerance: None or a finite number > 0."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number or None, got {type(value).__name__}")
    if not (np.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number > 0 or None, got {value!r}")
    return float(value)


def _check_norm_fro(norm_fro):
    if norm_fro is None:
        return None
    if isinstance(norm_fro, bool) or not isinstance(norm_fro, numbers.Real):
        raise TypeError(f"norm_fro must be a number or None, got {type(norm_fro).__name__}")
    if not (np.isfinite(norm_fro) and norm_fro > 0):
        raise ValueError(
            f"norm_fro must be a finite number > 0 or None, got {norm_fro!r}: a "
            f"zero norm cannot be told from one lost to rounding (leave it None)"
        )
    return float(norm_fro)


def _certificate_seconds(info):
    """The wall time of the answer's certificate (None: it has none, or did not time it)."""
    cert = info.get("certificate")
    value = cert.get("seconds") if isinstance(cert, dict) else None
    return None if value is None else float(value)


def _unused(name, value, stop):
    return ValueError(
        f"{name}={value!r} is not used by stop={stop!r}: without a reference (none given, "
        f"no cache_dir) that stop bounds {_BOUNDS[stop]} by eps, and nothing reads {name}. "
        f"Pass reference= or cache_dir= to score against an exact SVD"
        + (", or stop='residual' for the residual estimate of eta" if name == "weights" else "")
        + ", or drop it"
    )


def _stop_rule(stop, metric, weights, eps, sv_tol, triplet_tol, norm_fro, n_probes, has_reference):
    """The resolved :class:`StopRule`; a ``metric`` or ``weights`` it cannot use is an error."""
    if stop is None:
        stop = "reference" if has_reference or metric is not None else "estimate"
    stop = _check_choice("stop", stop, STOPS)
    _check_eps(eps)
    if not has_reference and stop != "reference":
        if metric is not None:
            raise _unused("metric", metric, stop)
        if weights is not None and stop == "estimate":
            raise _unused("weights", weights, stop)
    eps = float(eps)
    sv_tol = _check_tol(sv_tol, "sv_tol")
    triplet_tol = _check_tol(triplet_tol, "triplet_tol")
    if isinstance(n_probes, bool) or not isinstance(n_probes, (int, np.integer)) or n_probes < 1:
        raise ValueError(f"n_probes must be a positive int, got {n_probes!r}")
    return StopRule(
        stop=stop,
        eps=eps,
        sv_tol=eps if sv_tol is None else sv_tol,
        triplet_tol=eps if triplet_tol is None else triplet_tol,
        norm_fro=_check_norm_fro(norm_fro),
        n_probes=int(n_probes),
    )


def _scoring(
    metric,
    weights,
    track,
    track_residual,
    stop,
    cluster_rtol,
    reference,
    cache_dir,
    cache_key,
    residual_operator,
):
    metric = "eta" if metric is None else metric
    weights = _DEFAULT_WEIGHTS if weights is None else weights
    metric = _check_choice("metric", metric, METRICS)
    weights = _check_choice("weights", weights, WEIGHTS)
    if isinstance(track, str):
        track = (track,)
    track = tuple(_check_choice("track entries", name, METRICS) for name in track)
    return Scoring(
        metric=metric,
        weights=weights,
        track=frozenset(track) | {metric},
        track_residual=bool(track_residual) or stop == "residual",
        cluster_rtol=check_cluster_rtol(cluster_rtol),
        reference=reference,
        cache_dir=cache_dir,
        cache_key=cache_key,
        residual_operator=residual_operator,
    )


def _effort(method, options, n_iter, schedule, max_effort, repeats, time_limit):
    method = _check_choice("method", method, tuple(solvers.METHODS))
    repeats = check_int("repeats", repeats, 1)
    _check_time_limit(time_limit)
    if max_effort is not None and (
        isinstance(max_effort, bool) or not isinstance(max_effort, (int, np.integer))
    ):
        raise TypeError(f"max_effort must be an int or None, got {type(max_effort).__name__}")
    options, effort_key = _solver_options(method, options, n_iter)
    return Effort(
        schedule=schedule,
        max_effort=max_effort,
        options=options,
        effort_key=effort_key,
        repeats=repeats,
        time_limit=time_limit,
    )


# ---------------------------------------------------------------------------------------------
# the steps
# ---------------------------------------------------------------------------------------------


def _solver_options(method, options, n_iter):
    """The options passed to every solve, and the name of the one the effort sets."""
    options = dict(options or {})
    effort_key = EFFORT_OPTION.get(method)
    if effort_key is not None and effort_key in options:
        raise ValueError(
            f"options must not set {effort_key!r}: the driver sets it (use schedule/max_effort)"
        )
    if "n_iter" in options:
        raise ValueError("options must not set 'n_iter': pass n_iter= to solve_to_tolerance")
    if method == "rsvd":
        options["n_iter"] = n_iter
    if method == "tsvd":
        options.setdefault("tol", 0.0)
    return options, effort_key


def _efforts(method, rank, shape, schedule, max_effort, options):
    if schedule is not None:
        return _check_schedule(schedule, method, rank, max_effort)
    return effort_schedule(
        method,
        rank,
        shape,
        max_effort=max_effort,
        n_oversamples=options.get("n_oversamples") if effort_kind(method) == "depth" else None,
    )


def _prepare_reference(G, src, rank, reference, needed, cache_dir, cache_key, cluster_rtol):
    """The reference (computed when ``needed`` and not given), with all its triplets."""
    if reference is None and (needed or cache_dir is not None):
        reference = reference_svd(
            src if cache_dir is None else G,
            rank,
            cache_dir=cache_dir,
            key=cache_key,
            cluster_rtol=cluster_rtol,
        )
    if reference is None:
        return None
    if len(reference.s) < rank:
        raise ValueError(f"reference holds {len(reference.s)} triplets, fewer than rank={rank}")
    # Triplets beyond rank are kept: they complete a cluster of singular values cut by rank.
    return SVDResult(
        U=np.asarray(reference.U),
        s=np.asarray(reference.s),
        V=np.asarray(reference.V),
        info=dict(getattr(reference, "info", {})),
    )


def _runner(src, rank, method, options, effort_key):
    """``run(effort, seed) -> (answer, seconds, caught warnings)``: one timed solve."""

    def run(effort, seed):
        kw = dict(options)
        if effort_key is not None:
            kw[effort_key] = int(effort)
        # Recorded, not shown here: they become data of the answer and are re-issued once
        # after the sweep (the recording stays outside the timed call).
        with recording_warnings() as caught:
            t0 = time.perf_counter()
            out = solvers.svd(src, rank, method=method, random_state=int(seed), **kw)
            secs = time.perf_counter() - t0
        return out, secs, list(caught)

    return run


def _sweep(run, efforts, seeds, score, time_limit, caught_all):
    """Try the efforts in order until an answer is accepted, a stop fires on a wrong answer,
    the schedule ends or time runs out.

    Returns ``(history, (index, answer, seconds), status, stopped_by)``; without
    convergence the answer is the one the stop fired on, or the best one seen. Every
    recorded warning is appended to ``caught_all``.
    """
    history = []
    best = None  # (ranking score, index, answer, seconds)
    t_start = time.perf_counter()
    for idx, effort in enumerate(efforts):
        out, secs, caught = run(effort, seeds[idx])
        caught_all.extend(caught)
        measures, stopping, ranking, status = score(out, int(seeds[idx]) ^ _PROBE_SEED_SALT)
        history.append(
            {
                "effort": int(out.info.get("effort", effort)),
                **measures,
                "stop_value": float(stopping),
                **warning_fields(caught, out.info),
                "seconds": secs,
                "status": status,
                "converged": status == "converged",
                "n_matvec": int(out.info.get("n_matvec", 0)),
                "n_block_entries": int(out.info.get("n_block_entries", 0)),
                "n_passes": float(out.info.get("n_passes", float("nan"))),
                "cert_seconds": _certificate_seconds(out.info),
            }
        )
        if best is None or ranking < best[0] or (math.isnan(best[0]) and not math.isnan(ranking)):
            best = (ranking, idx, out, secs)
        if status == "converged":
            return history, (idx, out, secs), status, "converged"
        if status == "stopped early, wrong":
            return history, (idx, out, secs), status, "stopped_early"
        spent = time.perf_counter() - t_start
        if time_limit is not None and spent > time_limit and idx + 1 < len(efforts):
            return history, best[1:], _final_status(history, best[1]), "time_limit"
    return history, best[1:], _final_status(history, best[1]), "cap"


def _final_status(history, idx):
    return "unreliable" if not history[idx]["reliable"] else "not converged"


def _initial_fro2(src, norm_fro):
    """``||G||_F^2`` when given or known to the source (its centred norm: one pass), else None."""
    if norm_fro is not None:
        return float(norm_fro) ** 2
    return exact_fro2(src)


def _sources(G, residual_operator, rank):
    """``(source, residual source, shape, rank)``, checked against each other."""
    src = as_source(G)
    shape = tuple(int(n) for n in src.shape)
    rank = _check_rank(rank, shape)
    res_src = src if residual_operator is None else as_source(residual_operator)
    if tuple(res_src.shape) != shape:
        raise ValueError(f"residual_operator has shape {tuple(res_src.shape)}, G has {shape}")
    return src, res_src, shape, rank


def _timed(run, efforts, seeds, idx, first_secs, repeats, caught_all):
    """The ``repeats`` timings at the returned effort (the sweep's run is the first)."""
    timings = [first_secs]
    for _ in range(repeats - 1):
        _, secs, caught = run(efforts[idx], seeds[idx])
        timings.append(secs)
        caught_all.extend(caught)
    return timings


def _result(method, out, h, timings, status, stopped_by, history, rule, scoring):
    return ToleranceResult(
        method=method,
        effort=h["effort"],
        eta=h["eta"],
        seconds=float(np.median(timings)),
        converged=status == "converged",
        result=out,
        history=history,
        residual_estimate=h["residual_estimate"],
        eps=rule.eps,
        stop=rule.stop,
        weights=scoring.weights,
        all_seconds=timings,
        stopped_by=stopped_by,
        metric=scoring.metric,
        value=h["value"],
        lowrank=h["lowrank"],
        subspace=h["subspace"],
        sv_error=h["sv_error"],
        triplet_residual=h["triplet_residual"],
        n_warnings=h["n_warnings"],
        warnings=list(h["warnings"]),
        reliable=h["reliable"],
        error_estimate=h["error_estimate"],
        relative_error_estimate=h["relative_error_estimate"],
        status=status,
    )


# ---------------------------------------------------------------------------------------------
# the driver
# ---------------------------------------------------------------------------------------------


def solve_to_tolerance(
    G,
    rank,
    method,
    eps,
    *,
    reference=None,
    weights=None,
    stop=None,
    metric=None,
    track=("eta",),
    random_state=None,
    schedule=None,
    max_effort=None,
    repeats=1,
    options=None,
    n_iter=4,
    cache_dir=None,
    cache_key=None,
    track_residual=True,
    time_limit=None,
    residual_operator=None,
    cluster_rtol=CLUSTER_RTOL,
    sv_tol=None,
    triplet_tol=None,
    norm_fro=None,
    n_probes=N_PROBES,
) -> ToleranceResult:
    """Grow a solver's effort until its answer meets ``eps``; time it there.

    Parameters
    ----------
    G : ndarray, sparse matrix, LinearOperator or matrix source
    rank : int
        Number of triplets sought.
    method : str
        One of ``solvers.METHODS``.
    eps : float
        Tolerance (> 0) on ``metric`` (``stop="reference"``), on the estimated relative
        low-rank error (``stop="estimate"``) or on the residual estimate of eta
        (``stop="residual"``).
    reference : SVDResult, optional
        Exact SVD with at least ``rank`` triplets; the first ``rank`` are scored, any further
        ones complete a cluster of singular values cut by ``rank``. Computed with
        :func:`reference_svd` (``cluster_rtol`` passed on, cached in ``cache_dir``) when
        not given and ``stop="reference"`` or a ``cache_dir`` is given; otherwise there is
        none. With a reference every answer is scored, whatever the ``stop``, and none is
        accepted unless it meets the whole-triplet rule (Notes).
    weights : {"singular_values", "relative", "uniform"}, optional
        Weighting of eta and of its residual estimate (see :mod:`ksvd_bench.metrics`),
        default ``"singular_values"``. Used by eta against a reference and by
        ``stop="residual"``: giving it where neither runs (``stop="estimate"`` without a
        reference) is an error naming the stop.
    stop : {"reference", "estimate", "residual"}, optional
        What must reach ``eps``:

        * ``"reference"``: ``metric`` against the reference.
        * ``"estimate"``: ``c * E / ||G||_F``, with ``E`` the reference-free estimate of the
          low-rank error ``||G - U~ U~^T G||_F`` and ``c`` = 1 where ``E`` is an exact
          Frobenius gap, :data:`solvers.PROBE_SAFETY` (2) where it is randomized (the
          solver's leave-one-out estimate or the Gaussian probes; Notes, with the failure
          probability).
        * ``"residual"``: :func:`~ksvd_bench.metrics.residual_estimate` of eta.

        Default: ``"reference"`` when a ``reference``, a ``cache_dir`` or a ``metric`` is
        given (something to score against), else ``"estimate"``: **without a reference the
        estimate stop runs, and** ``eps`` **bounds the estimated relative low-rank error**
        ``||G - U~ U~^T G||_F / ||G||_F`` (times the safety factor of a randomized
        estimate), not eta. The reference measures are recorded whenever there is a
        reference.
    metric : {"eta", "lowrank", "subspace"}, optional
        The measure against the reference (default ``"eta"``; giving it with
        ``stop="estimate"`` or ``"residual"`` and no reference nor ``cache_dir`` is an
        error: there is nothing to measure against):
        :func:`~ksvd_bench.metrics.eta` (with ``weights``),
        :func:`~ksvd_bench.metrics.lowrank_error` (gap-robust:
        ``||G - U~ U~^T G||_F <= (1 + eps) ||G - G_r||_F``; a pass over ``G`` up to
        :data:`~ksvd_bench.metrics.LOWRANK_PASS_MAX_ENTRIES` entries, one ``rmatmat`` of
        ``residual_operator`` beyond) or the larger sine of
        :func:`~ksvd_bench.metrics.subspace_error`.
    track : sequence of {"eta", "lowrank", "subspace"}, default=("eta",)
        Measures recorded at every effort besides ``metric`` (eta costs next to nothing).
    random_state : None, int >= 0 or numpy.random.Generator
        Seeds every solver call and the probes (one seed drawn per effort, so a run is
        reproducible).
    schedule : sequence of int, optional
        Efforts to try (strictly increasing), default :func:`effort_schedule`.
    max_effort : int, optional
        Cap on the effort (see :func:`effort_schedule`); ignored by TSVD.
    repeats : int, default=1
        Timed runs at the final effort; ``seconds`` is their median.
    options : dict, optional
        Passed to :func:`solvers.svd` (e.g. ``sampling``, ``tol``, ``backend``; the block
        oversampling ``n_oversamples`` of ``block_krylov``). Must not set the effort
        parameter or ``n_iter``.
    n_iter : int or "auto", default=4
        RSVD power iterations, fixed along the schedule; ignored by other methods (for block
        Krylov ``n_iter`` is the effort).
    cache_dir : str or Path, optional
        Cache directory for the reference computed here.
    cache_key : str or definition, optional
        The reference's cache key (see :func:`reference_svd`): give the problem's definition
        for a derived matrix, so the cache does not depend on its last bits.
    track_residual : bool, default=True
        Record the residual estimate of eta at every effort (costs a few products with
        ``G``); always on for ``stop="residual"``.
    time_limit : float, optional
        Wall-clock seconds the sweep may take (solves and metrics, warm-up excluded): once it
        has run that long no larger effort is tried, and the result is ``converged=False``
        with ``stopped_by="time_limit"``. The step that crosses the limit still completes, so
        the total can exceed it by one step. None: the schedule decides.
    residual_operator : matrix source, optional
        The same matrix as ``G`` in a form that is cheaper to multiply (for example the exact
        :class:`~ksvd_bench.kernels.StructuredKernelSource` of a dense kernel matrix), used for
        the triplet residual, the estimates and the product route of ``"lowrank"``.
        Default: ``G``.
    cluster_rtol : float or None, default=CLUSTER_RTOL
        Singular values closer than ``cluster_rtol * s_1`` are scored as one cluster (see
        :func:`~ksvd_bench.metrics.eta`); None: the literal, vector-by-vector measures.
    sv_tol : float, optional
        Tolerance of :func:`~ksvd_bench.metrics.sv_error`: an answer is accepted only if
        ``max_i |s~_i - s_i| <= sv_tol * s_1``. Default ``eps`` (the values get the same
        tolerance as the measure). Checked only when there is a reference.
    triplet_tol : float, optional
        Tolerance of :func:`~ksvd_bench.metrics.triplet_residual`. Default ``eps``.
    norm_fro : float, optional
        ``||G||_F`` (> 0) if known exactly: enables the Frobenius-gap estimate on sources
        that cannot give it (the dense and sparse adapters give it for free through
        ``frobenius_norm()``; the lazy kernel sources too, from their set-up pass, or for a
        centred kernel from one pass made before the sweep, and None where rounding could
        have lost it; ``norm_bound()`` is an upper bound of ``||G||_2`` and is never used
        for it).
    n_probes : int, default=10
        Gaussian probes of the error estimate per answer.

    Returns
    -------
    ToleranceResult

    Raises
    ------
    TypeError
        On a non-number ``eps``, ``time_limit``, ``sv_tol``, ``triplet_tol`` or ``norm_fro``,
        a non-int ``max_effort`` or a ``random_state`` of another type.
    ValueError
        On unknown names, a negative ``random_state``, out-of-range numbers, a reference
        with fewer than ``rank`` triplets, bad schedules or options that set the effort,
        and a ``weights`` or ``metric`` the chosen stop does not use.

    Notes
    -----
    An answer is accepted (``status="converged"``, :data:`STATUSES`) only when its stopping
    quantity is at most ``eps``; with a reference, its ``metric`` is at most ``eps`` and its
    singular values are within ``sv_tol * s_1`` of the exact ones; its triplets hang together
    (:func:`~ksvd_bench.metrics.triplet_residual` at most ``triplet_tol ||G_r||_F``); and the
    solver did not mark it unreliable (``info["reliable"]``). Where a reference-free stop fires
    on an answer that the reference shows wrong, the sweep stops there with
    ``status="stopped early, wrong"``. Efforts are tried in order, the first accepted answer is
    returned, and at the end of the schedule the result is ``converged=False``
    (``stopped_by="cap"``) with the best answer seen. Every warning a solve raised is recorded
    with its answer and issued once more after the sweep.

    Advice:

    * Without a reference ``eps`` bounds the estimated relative low-rank error
      ``||G - U~ U~^T G||_F / ||G||_F``, not eta. No rank-``rank`` answer beats
      ``||G - G_r||_F / ||G||_F``: an ``eps`` below that ratio runs to the cap.
    * Where ``||G||_F`` is known exactly (dense and sparse inputs, the lazy kernel sources
      that know it, ``norm_fro``) the estimate is an exact Frobenius gap, with no failure
      probability. Elsewhere it is randomized (the solver's leave-one-out estimate or
      Gaussian probes) and the stop asks for twice the margin (:data:`solvers.PROBE_SAFETY`).
      With ``||G||_F`` known, an answer the probes accept is wrong with a chance of at most
      0.0091 per check (none is proven for leave-one-out); where ``||G||_F`` is estimated
      the stop divides by a 99% lower confidence bound of it, and the chances add (1.9% per
      check for the probes). Give ``norm_fro`` when you know it.
    * Give ``residual_operator`` where the same matrix multiplies faster in another form
      (the structured source of a dense kernel matrix): the checks cost one pass over it per
      answer, made after the solver returns and never part of ``seconds``.
    * ``seconds`` times the solver call only (the median of ``repeats`` runs at the accepted
      effort, after one untimed warm-up run at the smallest effort).

    The estimate kinds and their failure probabilities, the cost of the checks, the
    warnings and the timing are set out in full in the manual, page "Verdicts on whole
    triplets" (``docs/guide/verdicts.md``), section "solve_to_tolerance in full".

    Examples
    --------
    A matrix whose singular values halve one after the other: rank 5 cannot get below
    ``||G - G_5||_F / ||G||_F``, about 0.029.

    >>> import numpy as np
    >>> from ksvd_bench.driver import reference_svd, solve_to_tolerance
    >>> rng = np.random.default_rng(0)
    >>> decay = np.diag(0.5 ** np.arange(30))
    >>> G = rng.standard_normal((300, 30)) @ decay @ rng.standard_normal((30, 200))

    Without a reference the estimate stop runs (here the exact Frobenius gap of a dense G):

    >>> run = solve_to_tolerance(G, 5, "rsvd", 0.05, random_state=0)
    >>> run.stop, run.status
    ('estimate', 'converged')
    >>> print(f"{run.relative_error_estimate:.3f}")
    0.029
    >>> solve_to_tolerance(G, 5, "rsvd", 0.01, random_state=0).stopped_by  # below 0.029
    'cap'

    With a reference, eta (the default ``metric``), the values and the triplets are checked:

    >>> ref = reference_svd(G, 5)
    >>> run = solve_to_tolerance(G, 5, "rsvd", 1e-6, reference=ref, random_state=0)
    >>> run.stop, run.status, bool(run.eta <= 1e-6)
    ('reference', 'converged', True)
    """
    # 1. the request, validated before any work, in three groups (names in any case)
    method = _check_choice("method", method, tuple(solvers.METHODS))
    has_reference = reference is not None or cache_dir is not None
    rule = _stop_rule(
        stop, metric, weights, eps, sv_tol, triplet_tol, norm_fro, n_probes, has_reference
    )
    scoring = _scoring(
        metric,
        weights,
        track,
        track_residual,
        rule.stop,
        cluster_rtol,
        reference,
        cache_dir,
        cache_key,
        residual_operator,
    )
    effort = _effort(method, options, n_iter, schedule, max_effort, repeats, time_limit)
    rng = check_random_state(random_state)  # a bad seed is named before any work
    # 2. the sources, the efforts and the reference
    src, res_src, shape, rank = _sources(G, residual_operator, rank)
    efforts = _efforts(method, rank, shape, effort.schedule, effort.max_effort, effort.options)
    ref = _prepare_reference(
        G,
        src,
        rank,
        reference,
        rule.stop == "reference",
        cache_dir,
        cache_key,
        scoring.cluster_rtol,
    )
    # 3. how each answer is scored (||G||_F read before any timed solve: it may cost a pass)
    score = Scorer(
        src,
        res_src,
        ref,
        rank,
        scoring.weights,
        scoring.metric,
        rule.stop,
        set(scoring.track),
        scoring.track_residual,
        scoring.cluster_rtol,
        fro2=_initial_fro2(res_src, rule.norm_fro),
        n_probes=rule.n_probes,
        safety=PROBE_SAFETY,
        eps=rule.eps,
        sv_tol=rule.sv_tol,
        triplet_tol=rule.triplet_tol,
        gap_rtol=gap_rtol(res_src),
    )
    # 4. warm up, sweep, time the answer
    seeds = rng.integers(0, 2**63 - 1, size=len(efforts) + 1)
    run = _runner(src, rank, method, effort.options, effort.effort_key)
    caught_all = []
    caught_all.extend(run(efforts[0], seeds[-1])[2])  # warm-up: JIT and first-touch costs
    try:
        history, (idx, out, first_secs), status, stopped_by = _sweep(
            run, efforts, seeds, score, effort.time_limit, caught_all
        )
        timings = _timed(run, efforts, seeds, idx, first_secs, effort.repeats, caught_all)
    finally:
        reemit(caught_all)
    return _result(method, out, history[idx], timings, status, stopped_by, history, rule, scoring)
