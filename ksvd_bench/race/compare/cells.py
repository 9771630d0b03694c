"""The race of one problem, method by method: the per-seed runs and the summary rows.

Every step here reads a :class:`Context` (the problem, its reference, the cheapest exact
operator, the scorer, the settings). :func:`race_method` races one method under every
measure and eps (per-seed driver sweeps, read at every eps through :func:`first_hit`, the
whole-triplet rule), adds the residual-stopped rows and the end-to-end times on the lazy
source; :func:`structured_rows` adds the exact structured entry and :func:`add_speedups` the
speedups over RSVD.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass

import numpy as np

from ksvd_bench.driver import solve_to_tolerance
from ksvd_bench.metrics import eta, residual_estimate, sv_error, triplet_residual
from ksvd_bench.race.common import (
    POINT_ONLY,
    RESIDUAL_SUFFIX,
    STRUCTURED_NAME,
    counting_warnings,
    driver_options,
    effort_option,
    is_eta,
    measure_fields,
    median,
    meets,
    merge_verdicts,
    not_applicable,
    point_status,
    solver_of,
    status_of,
    verdict,
    warning_fields,
)
from ksvd_bench.race.compare.settings import LAZY_E2E, Settings
from ksvd_bench.race.paper_runtime import (
    PAPER_ASYM_ENTRY,
    PAPER_WEIGHTS,
    paper_entry_key,
    paper_runtime,
    paper_speedup,
)
from ksvd_bench.race.problems import Problem
from ksvd_bench.scoring import lowrank_score
from solvers import svd

__all__ = [
    "Context",
    "AnswerMeasure",
    "race_method",
    "structured_rows",
    "add_speedups",
    "first_hit",
    "na_rows",
    "sweep_point",
]


class AnswerMeasure:
    """The race's measure of an answer against the reference: ``(measure, answer) -> value``.

    Any eta weighting, or ``"lowrank"``, scored by the driver's code
    (:func:`ksvd_bench.scoring.lowrank_score`: a pass over the dense G where that is small,
    else products with the cheaper ``res_src``, the structured operator); ``||G||_F`` is
    computed once, on the first low-rank score that needs it.
    """

    def __init__(self, G, res_src, reference, rank):
        self.G, self.res_src, self.reference, self.rank = G, res_src, reference, rank
        self.fro2 = None

    def __call__(self, measure, answer):
        if is_eta(measure):
            return float(eta(self.reference, answer, weights=measure, rank=self.rank))
        value, self.fro2 = lowrank_score(
            self.G, self.res_src, self.reference, answer, rank=self.rank, fro2=self.fro2
        )
        return value


def first_hit(history, eps, key, *, whole=True):
    """Index of the first effort whose answer meets ``eps`` (None: none did).

    ``key`` is the measure ("value", or "residual_estimate" for the reference-free stop).
    ``whole``: the singular values and triplets must meet ``eps`` too (:func:`meets`); the
    reference-free stop cannot see them, and only asks the answer not to be unreliable.
    """
    if whole:
        return next((i for i, h in enumerate(history) if meets(h, eps, key)), None)
    return next(
        (i for i, h in enumerate(history) if h[key] <= eps and verdict(h)["reliable"]), None
    )


def _history_passes(tr, i):
    """Passes over G of the answer at history index ``i`` of a driver result (None: unknown)."""
    value = tr.history[i].get("n_passes")
    return None if value is None or math.isnan(value) else float(value)


def _share(part, whole):
    """``part / whole`` (None where either is missing or ``whole`` is not positive)."""
    if part is None or whole is None or not whole > 0:
        return None
    return float(part) / float(whole)


def _passes(answer):
    value = answer.info.get("n_passes")
    return None if value is None else float(value)


def _finite(value):
    return None if value is None or not math.isfinite(value) else float(value)


def sweep_point(ctx, seed, *, effort, seconds, passes, value, judged, status, **extra):
    """One point of a row's ``history`` (the effort sweep the report draws).

    Keys: ``seed``, ``effort``, ``seconds`` (the solve at that effort), ``passes`` (over G),
    ``entries_read`` (``passes * N * M``: Nystrom's passes are its entries read over N M;
    None where the passes are unknown), ``value`` (the row's measure), ``sv_error``,
    ``triplet_residual``, ``status`` (that answer's verdict at the row's eps) and any
    ``extra`` (the residual rows add ``residual_estimate``).
    """
    passes = _finite(passes)
    n, m = ctx.G.shape
    return {
        "seed": int(seed),
        "effort": None if effort is None else int(effort),
        "seconds": _finite(seconds),
        "passes": passes,
        "entries_read": None if passes is None else passes * n * m,
        "value": _finite(value),
        "sv_error": _finite(judged.get("sv_error")),
        "triplet_residual": _finite(judged.get("triplet_residual")),
        "status": status,
        **extra,
    }


def _sweep(ctx, history, seed, eps, key="value", **extra_keys):
    """The history points of one driver sweep, judged at ``eps`` on ``key``."""
    return [
        sweep_point(
            ctx,
            seed,
            effort=h["effort"],
            seconds=h["seconds"],
            passes=h.get("n_passes"),
            value=h[key],
            judged=verdict(h),
            status=point_status(h, eps, key),
            **{name: _finite(h[k]) for name, k in extra_keys.items()},
        )
        for h in history
    ]


@dataclass
class Context:
    """What the per-method steps of one problem share."""

    problem: Problem
    G: np.ndarray
    reference: object
    res_src: object  # cheapest exact operator of G, for residual and low-rank scores
    score: AnswerMeasure
    base: dict  # dataset, shape, kernel fields of every row
    paper_key: str | None
    settings: Settings
    bar: object
    point_source: object = None  # the lazy point source, built on first use

    def matrix_for(self, method):
        """What a raced entry solves: the lazy point source (its ``joint_psd()`` is what
        ``sampling="rpcholesky"`` factors) for :data:`POINT_ONLY` entries, else the dense G."""
        if method not in POINT_ONLY:
            return self.G
        if self.point_source is None:
            self.point_source = self.problem.lazy_source()
        return self.point_source

    def verdict_of(self, answer, caught):
        """The whole-triplet fields of an answer this study solved itself (not the driver):
        singular-value error and triplet residual against the reference, the warnings
        ``caught`` while solving, the solver's own ``reliable``."""
        rank = self.settings.rank
        return {
            "sv_error": sv_error(self.reference, answer, rank=rank),
            "triplet_residual": triplet_residual(
                self.res_src, answer, rank=rank, reference=self.reference
            ),
            **warning_fields(caught, answer.info),
        }


def race_method(ctx, method, cap):
    """Summary rows and per-seed runs of one method, for every measure and eps.

    An entry that does not apply to the problem (:func:`not_applicable`) gets one "n/a" row
    per (measure, eps) and no runs.
    """
    s = ctx.settings
    why = not_applicable(method, ctx.problem)
    if why is not None:
        ctx.bar.update(len(s.measures) * len(s.seeds))
        return na_rows(ctx, method, why), []
    rows, runs = [], []
    if method == "tsvd":
        ctx.bar.set_postfix_str(f"{ctx.problem.name}: tsvd")
        tsvd_cells, tsvd_res_rows = _tsvd_cells(ctx)
    e2e_cache = {}
    for measure in s.measures:
        ctx.bar.set_postfix_str(f"{ctx.problem.name}: {method}, {measure}")
        if method == "tsvd":
            cell, first = tsvd_cells[measure], None
        else:
            cell, first = _cell_runs(ctx, method, measure, cap)
        for e in s.eps:
            if solver_of(method)[0] in LAZY_E2E and ctx.problem.has_lazy_source:
                _attach_e2e(ctx, method, cell[e], measure, e2e_cache)
            runs.extend(cell[e])
            rows.append({**ctx.base, **_summarise(ctx, cell[e], method, e, measure)})
        if s.residual and is_eta(measure):
            if method == "tsvd":
                rows += tsvd_res_rows[measure]
            else:
                rows += _residual_rows(ctx, method, measure, cap, prior=first)
    return rows, runs


def _over_budget(s, k, t0):
    return k > 0 and s.budget_seconds is not None and time.perf_counter() - t0 > s.budget_seconds


def _cell_runs(ctx, method, measure, cap):
    """All seeds of one (method, measure) cell; later seeds are skipped once over budget."""
    s = ctx.settings
    cell = {e: [] for e in s.eps}
    first = None
    t0 = time.perf_counter()
    for k, seed in enumerate(s.seeds):
        if _over_budget(s, k, t0):
            ctx.bar.update(len(s.seeds) - k)
            break
        seed_runs, tr = _seed_runs(ctx, method, measure, seed, cap)
        for run in seed_runs:
            cell[run["eps"]].append({**ctx.base, **run})
        if k == 0:
            first = tr
        ctx.bar.update(1)
    return cell, first


def _solve(ctx, method, measure, eps, seed, cap, **kwargs):
    """One driver sweep of a raced entry to ``eps`` under ``measure``."""
    s = ctx.settings
    solver, extra = solver_of(method)
    options = {"track_residual": s.residual, **driver_options(measure), **kwargs}
    return solve_to_tolerance(
        ctx.matrix_for(method),
        s.rank,
        solver,
        eps,
        reference=ctx.reference,
        options=extra or None,
        random_state=seed,
        max_effort=cap,
        repeats=s.repeats,
        time_limit=s.sweep_limit,
        residual_operator=ctx.res_src,
        **options,
    )


def _seed_runs(ctx, method, measure, seed, cap):
    """One seed of one (method, measure) cell, answered for every eps.

    With ``repeats == 1`` a single driver run to the tightest eps answers all of them: the
    driver tries efforts in order with one seed per effort, so the first effort meeting a looser
    eps is read off its history, exactly as a separate run to that eps would have found it.
    """
    s = ctx.settings
    if s.repeats == 1:
        tr = _solve(ctx, method, measure, s.eps[-1], seed, cap)
        answers = [(e, tr) for e in s.eps]
    else:
        answers = [(e, _solve(ctx, method, measure, e, seed, cap)) for e in s.eps]
    runs = []
    for e, tr in answers:
        i = first_hit(tr.history, e, "value")
        conv = i is not None
        if conv:
            h = tr.history[i]
            # The driver's own timing (median over repeats) where it stopped, else the one
            # timing the history holds for that effort.
            seconds = tr.seconds if i == len(tr.history) - 1 and tr.converged else h["seconds"]
            effort, value, est = h["effort"], h["value"], h["residual_estimate"]
        else:
            i = next(k for k, h in enumerate(tr.history) if h["effort"] == tr.effort)
            effort, value, est, seconds = tr.effort, tr.value, tr.residual_estimate, None
        judged = verdict(tr.history[i])
        runs.append(
            {
                **judged,
                "eps": e,
                **measure_fields(measure),
                "method": method,
                "stop": "reference",
                "seed": seed,
                "effort": int(effort),
                "n_passes": _history_passes(tr, i),
                "value": float(value),
                "seconds": seconds,
                "cert_seconds": tr.history[i].get("cert_seconds"),
                "converged": conv,
                "status": status_of(conv, judged["reliable"]),
                "resid_est": None if math.isnan(est) else float(est),
                "n_steps": (i + 1) if conv else len(tr.history),
                "stopped_by": "converged" if conv else tr.stopped_by,
                "history": _sweep(ctx, tr.history, seed, e),
            }
        )
    return runs, (answers[0][1] if s.repeats == 1 else None)


def _tsvd_cells(ctx):
    """TSVD is a single run per seed whatever the measure: run it once, score it every way.

    The driver's run gives the answer and its time; every measure scores that same answer
    (what separate driver calls would do, minus the repeated ARPACK runs). The
    ``[stop=residual]`` rows read the same seed-1 answer, stopped when its residual estimate
    is <= eps.
    """
    s = ctx.settings
    cells = {m: {e: [] for e in s.eps} for m in s.measures}
    res_rows = {m: [] for m in s.measures}
    t0 = time.perf_counter()
    for k, seed in enumerate(s.seeds):
        if _over_budget(s, k, t0):
            ctx.bar.update((len(s.seeds) - k) * len(s.measures))
            break
        tr = solve_to_tolerance(
            ctx.G,
            s.rank,
            "tsvd",
            s.eps[-1],
            reference=ctx.reference,
            weights=PAPER_WEIGHTS,
            random_state=seed,
            repeats=s.repeats,
            track_residual=False,
        )
        judged = verdict(tr)  # the one answer's verdict, whatever the measure
        for m in s.measures:
            value = ctx.score(m, tr.result)
            est = (
                residual_estimate(ctx.res_src, tr.result, weights=m)
                if s.residual and is_eta(m)
                else None
            )
            for e in s.eps:
                conv = meets({**judged, "value": value}, e)
                status = status_of(conv, judged["reliable"])
                cells[m][e].append(
                    {
                        **ctx.base,
                        **judged,
                        "eps": e,
                        **measure_fields(m),
                        "method": "tsvd",
                        "stop": "reference",
                        "seed": seed,
                        "effort": int(tr.effort),
                        "n_passes": _passes(tr.result),
                        "value": value,
                        "seconds": float(tr.seconds) if conv else None,
                        "converged": bool(conv),
                        "status": status,
                        "resid_est": est,
                        "n_steps": 1,
                        "history": [
                            sweep_point(
                                ctx,
                                seed,
                                effort=tr.effort,
                                seconds=tr.seconds,
                                passes=_passes(tr.result),
                                value=value,
                                judged=judged,
                                status=status,
                            )
                        ],
                    }
                )
                if k == 0 and est is not None:
                    res_rows[m].append(_tsvd_residual_row(ctx, tr, m, e, value, est, judged))
            ctx.bar.update(1)
    return cells, res_rows


def _whole_triplet_note(judged, e):
    """What a reference-free stop could not see: singular values or triplets off by > eps."""
    off = [
        name
        for key, name in (("sv_error", "singular values"), ("triplet_residual", "triplets"))
        if judged[key] > e
    ]
    return f"; {' and '.join(off)} off by > eps" if off else ""


def _stop_note(stopped, right, note):
    """A residual row's note, led by its verdict where the stop fired on a wrong answer."""
    return f"stopped early, wrong: {note}" if stopped and not right else note


def _tsvd_residual_row(ctx, tr, measure, e, value, est, judged):
    stopped = bool(est <= e and judged["reliable"])
    # the stop fired; the row converges only if the answer it kept meets the whole rule
    right = stopped and meets({**judged, "value": value}, e)
    status = status_of(right, judged["reliable"], fired=stopped)
    note = "estimate <= eps" if stopped else "estimate > eps after the run"
    if value > e:
        note += "; true eta > eps"
    note += _whole_triplet_note(judged, e)
    return {
        **ctx.base,
        "method": "tsvd" + RESIDUAL_SUFFIX,
        "stop": "residual",
        "eps": e,
        **measure_fields(measure),
        "n_seeds": 1,
        "n_seeds_asked": 1,  # the stopping rule runs the first seed only, by design
        "n_converged": int(right),
        "converged": right,
        "status": status,
        "effort": int(tr.effort),
        "n_passes": _passes(tr.result),
        # the time the stop took, also when it fired on a wrong answer (the status says so)
        "seconds": float(tr.seconds) if stopped else None,
        "value": float(value),
        "value_worst": float(value),
        "best_value": float(value),
        "resid_est": float(est),
        **judged,
        "note": _stop_note(stopped, right, note),
        "history": [
            sweep_point(
                ctx,
                ctx.settings.seeds[0],
                effort=tr.effort,
                seconds=tr.seconds,
                passes=_passes(tr.result),
                value=value,
                judged=judged,
                status=point_status({**judged, "value": value}, e),
                residual_estimate=float(est),
            )
        ],
    }


def _attach_e2e(ctx, method, cell, measure, cache):
    """End-to-end time of a lazy-source row: kernel source + solve, first converged seed.

    Only what the method reads is evaluated (blocks for Nystrom, one sketch pass for
    generalized Nystrom), plus the lazy source's own set-up pass (e.g. the row sums of the
    SNE normaliser and the centring means). One seed per row keeps the cost down; ``cache``
    shares runs between rows at the same (effort, seed).
    """
    run = next((r for r in cell if r["converged"]), None)
    if run is None:
        return
    solver, extra = solver_of(method)
    effort = {effort_option(method): int(run["effort"])}
    key = (run["effort"], run["seed"])
    if key not in cache:
        if not cache:
            # First lazy solve of this method: compiles the lazy source's kernels (its
            # warnings are those of the timed solve below, which records them).
            with counting_warnings():
                svd(
                    ctx.problem.lazy_source(structured=False),
                    ctx.settings.rank,
                    method=solver,
                    random_state=run["seed"],
                    **effort,
                    **extra,
                )
        with counting_warnings() as caught:
            t0 = time.perf_counter()
            src = ctx.problem.lazy_source(structured=False)
            res = svd(
                src, ctx.settings.rank, method=solver, random_state=run["seed"], **effort, **extra
            )
            seconds = time.perf_counter() - t0
        cache[key] = (seconds, res, type(src).__name__, len(caught))
    seconds, res, name, n_warn = cache[key]
    # the same solve as the raced one (same effort and seed) on the lazy source: its
    # warnings are recorded apart, beside its value
    run.update(
        e2e_seconds=seconds,
        e2e_value=ctx.score(measure, res),
        e2e_source=name,
        e2e_n_warnings=n_warn,
    )


def _residual_rows(ctx, method, measure, cap, prior=None):
    """The same solver stopped by the residual estimate: what it said and what eta really was.

    ``prior`` is the seed's run stopped on eta (to the tightest eps). The driver draws one seed
    per schedule position from ``random_state``, so a residual-stopped run with the same seed
    and schedule produces the very same answers at the same efforts: where ``prior``'s history
    already reaches an effort whose residual estimate is <= eps (or walked the whole schedule),
    it answers the question without solving again; otherwise the driver is run with
    ``stop="residual"``.
    """
    s = ctx.settings
    final = prior
    hist = [] if prior is None else prior.history
    complete = prior is not None and not prior.converged
    if not complete and any(
        first_hit(hist, e, "residual_estimate", whole=False) is None for e in s.eps
    ):
        final = _solve(
            ctx, method, measure, s.eps[-1], s.seeds[0], cap, stop="residual", track_residual=True
        )
        hist = final.history
    return [_residual_row(ctx, method, measure, e, hist, final) for e in s.eps]


def _residual_row(ctx, method, measure, e, hist, final):
    i = first_hit(hist, e, "residual_estimate", whole=False)
    stopped = i is not None
    if stopped:
        last = i == len(hist) - 1 and final.converged and final.stop == "residual"
        seconds = final.seconds if last else hist[i]["seconds"]
    else:
        # What a user without a reference would keep: the lowest estimate seen.
        i = int(np.argmin([h["residual_estimate"] for h in hist]))
        seconds = None
    h = hist[i]
    true_eta, est = float(h["eta"]), float(h["residual_estimate"])
    limit = "the time limit" if final.stopped_by == "time_limit" else "the cap"
    note = "estimate <= eps" if stopped else f"estimate never <= eps up to {limit}"
    if true_eta > e:
        note += "; true eta > eps (stopped too early)" if stopped else "; true eta > eps"
    judged = verdict(h)
    note += _whole_triplet_note(judged, e)
    # the stop fired; the row converges only if the answer it kept meets the whole rule
    right = stopped and meets(h, e, "eta")
    return {
        **ctx.base,
        "method": method + RESIDUAL_SUFFIX,
        "stop": "residual",
        "eps": e,
        **measure_fields(measure),
        "n_seeds": 1,
        "n_seeds_asked": 1,  # the stopping rule runs the first seed only, by design
        "n_converged": int(right),
        "converged": right,
        "status": status_of(right, judged["reliable"], fired=stopped),
        "effort": int(h["effort"]),
        "n_passes": h.get("n_passes"),
        # the time the stop took, also when it fired on a wrong answer (the status says so)
        "seconds": seconds,
        "value": true_eta,
        "value_worst": true_eta,
        "best_value": true_eta,
        "resid_est": est,
        **judged,
        "note": _stop_note(stopped, right, note),
        "history": _sweep(
            ctx, hist, ctx.settings.seeds[0], e, "eta", residual_estimate="residual_estimate"
        ),
    }


def _summarise(ctx, runs, method, eps, measure):
    """One summary row of a (method, eps, measure) cell from its per-seed runs."""
    problem = ctx.problem
    conv = [r for r in runs if r["converged"]]
    ok = bool(runs) and len(conv) == len(runs)
    efforts = [r["effort"] for r in runs]
    values = [r["value"] for r in runs]
    merged = merge_verdicts(runs)
    row = {
        "method": method,
        "stop": "reference",
        "eps": eps,
        **measure_fields(measure),
        "n_seeds": len(runs),
        "n_seeds_asked": len(ctx.settings.seeds),
        "n_converged": len(conv),
        "converged": ok,
        "status": status_of(ok, merged["reliable"]),
        "effort": int(statistics.median(efforts)) if ok else max(efforts),
        "effort_min": min(efforts),
        "effort_max": max(efforts),
        "n_passes": median([r.get("n_passes") for r in runs]),
        # A time is shown only when every seed reached eps: never time a miss as a hit.
        "seconds": median([r["seconds"] for r in runs]) if ok else None,
        # the certificate's part of each seed's solve time (issue 32: a reader sees its price)
        "cert_share": median([_share(r.get("cert_seconds"), r["seconds"]) for r in runs])
        if ok
        else None,
        "kernel_seconds": problem.kernel_seconds,
        "value": median(values) if ok else None,
        "value_worst": max(values),
        "best_value": min(values),
        "resid_est": median([r["resid_est"] for r in runs]),
        **merged,
        # every seed's sweep; taken off the runs (compare_runs keeps one line per seed)
        "history": [p for r in runs for p in r.pop("history", [])],
    }
    if ok:
        row.update(_e2e_fields(problem, method, runs, row["seconds"]))
    else:
        row["note"] = f"not converged: {len(conv)}/{len(runs)} seeds reached eps"
        if any(r["value"] <= eps for r in runs):
            row["note"] += " (measure met; singular values, triplets or trust not)"
        if any(r.get("stopped_by") == "time_limit" for r in runs):
            row["note"] += " (sweep stopped by the time limit)"
    short = _short_of_seeds(len(runs), ctx.settings)
    if short:
        row["note"] = "; ".join(filter(None, (row.get("note"), short)))
    if measure == PAPER_WEIGHTS and ctx.paper_key is not None:
        row.update(_paper_fields(ctx.paper_key, eps, method))
    return row


def _short_of_seeds(n_run, s):
    """The note of a cell that ran fewer seeds than asked (the budget ran out), or None."""
    if n_run >= len(s.seeds):
        return None
    budget = f"{s.budget_seconds:g} s"
    return f"{n_run} of {len(s.seeds)} seeds: the cell's {budget} budget ran out first"


def _paper_fields(key, eps, method):
    """The paper's seconds and speedup over its RSVD (printed for asym Nystrom, else derived).

    Only the entries that run the paper's methods get them: the paper's asym Nystrom numbers
    go beside ``asym_nystrom_paper`` (the paper's core, no check), not beside
    ``asym_nystrom`` (the stable core + check, which is not the paper's method).
    """
    paper_method = paper_entry_key(method)
    if paper_method is None:
        return {}
    seconds = paper_runtime(key, eps, paper_method)
    if method == PAPER_ASYM_ENTRY:
        return {"paper_seconds": seconds, "paper_speedup": paper_speedup(key, eps)}
    rsvd = paper_runtime(key, eps, "rsvd")
    return {
        "paper_seconds": seconds,
        "paper_speedup": rsvd / seconds if (seconds and rsvd) else None,
    }


def na_rows(ctx, method, why):
    """The rows of an entry that does not apply to the problem: one per (measure, eps), with
    ``stop="n/a"``, no seeds and the reason in ``note``."""
    s = ctx.settings
    return [
        {
            **ctx.base,
            "method": method,
            "stop": "n/a",
            "eps": e,
            **measure_fields(m),
            "n_seeds": 0,
            "n_seeds_asked": 0,
            "n_converged": 0,
            "converged": False,
            "status": None,
            "effort": None,
            "n_passes": None,
            "seconds": None,
            "value": None,
            "n_warnings": 0,
            "warnings": [],
            "reliable": None,
            "note": why,
            "history": [],
        }
        for m in s.measures
        for e in s.eps
    ]


def _e2e_fields(problem, method, runs, seconds):
    if solver_of(method)[0] in LAZY_E2E and problem.has_lazy_source:
        timed = [r for r in runs if r.get("e2e_seconds") is not None]
        return {
            "e2e_seconds": median([r["e2e_seconds"] for r in timed]),
            "e2e_source": timed[0]["e2e_source"] if timed else None,
        }
    if problem.kernel_seconds is not None:
        return {"e2e_seconds": seconds + problem.kernel_seconds, "e2e_source": "dense G"}
    return {"e2e_seconds": seconds, "e2e_source": "dense G (given)"}


# ---------------------------------------------------------------------------------------------
# step 4: the exact structured entry and the speedups
# ---------------------------------------------------------------------------------------------


def structured_rows(ctx):
    """The exact "tsvd (structured)" entry: operator build + ARPACK, end to end."""
    s, problem = ctx.settings, ctx.problem
    # Warm-up: compiles the structured kernels and ARPACK's path on this very problem (its
    # warnings are those of the timed solves, which record them).
    with counting_warnings():
        svd(problem.structured_source(), s.rank, method="tsvd", random_state=s.seeds[0])
    builds, solves, results, judged = [], [], [], []
    for seed in s.seeds[: max(1, min(len(s.seeds), 3))]:
        with counting_warnings() as caught:
            t0 = time.perf_counter()
            src = problem.structured_source()
            t1 = time.perf_counter()
            res = svd(src, s.rank, method="tsvd", random_state=seed)
            t2 = time.perf_counter()
        builds.append(t1 - t0)
        solves.append(t2 - t1)
        results.append(res)
        judged.append(ctx.verdict_of(res, caught))
    res = results[0]
    rows = []
    for m in s.measures:
        values = [ctx.score(m, r) for r in results]
        est = residual_estimate(ctx.res_src, res, weights=m, rank=s.rank) if is_eta(m) else None
        for e in s.eps:
            met = [meets({**j, "value": v}, e) for j, v in zip(judged, values, strict=True)]
            ok = all(met)
            merged = merge_verdicts(judged)
            history = [
                sweep_point(
                    ctx,
                    seed,
                    effort=r.info.get("effort"),
                    seconds=t,
                    passes=_passes(r),
                    value=v,
                    judged=j,
                    status=status_of(hit, j["reliable"]),
                )
                for seed, r, t, v, j, hit in zip(
                    s.seeds, results, solves, values, judged, met, strict=False
                )
            ]
            rows.append(
                {
                    **ctx.base,
                    "method": STRUCTURED_NAME,
                    "stop": "exact",
                    "eps": e,
                    **measure_fields(m),
                    "n_seeds": len(results),
                    "n_seeds_asked": len(results),  # an exact answer: at most 3 seeds asked
                    **merged,
                    "n_converged": sum(met),
                    "converged": ok,
                    "status": status_of(ok, merged["reliable"]),
                    "history": history,
                    "effort": res.info.get("effort"),
                    "n_passes": _passes(res),
                    "seconds": median(solves) if ok else None,
                    "kernel_seconds": median(builds),
                    "e2e_seconds": (
                        median([b + t for b, t in zip(builds, solves, strict=True)]) if ok else None
                    ),
                    "e2e_source": "StructuredKernelSource",
                    "value": median(values),
                    "value_worst": max(values),
                    "best_value": min(values),
                    "resid_est": est,
                    "note": "exact: structured operator build + ARPACK (tol=0), end to end",
                }
            )
    return rows


def add_speedups(rows):
    """speedup_vs_rsvd = RSVD's time / this row's time, within the same (eps, measure)."""
    rsvd = {
        (r["eps"], r["measure"], r["weights"]): r["seconds"]
        for r in rows
        if r["method"] == "rsvd" and r["stop"] == "reference"
    }
    for r in rows:
        if r["stop"] in ("residual", "n/a"):
            continue
        base = rsvd.get((r["eps"], r["measure"], r["weights"]))
        if base is not None and r.get("seconds"):
            key = "e2e_seconds" if r["stop"] == "exact" else "seconds"
            if r.get(key):
                r["speedup_vs_rsvd"] = base / r[key]
