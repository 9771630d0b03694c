"""The solver race (the paper's Tables 3 and 4): which solver reaches a tolerance fastest.

For each problem, tolerance ``eps`` and accuracy measure, every raced solver is driven to
``eps`` by :func:`ksvd_bench.driver.solve_to_tolerance` for several seeds. The measures are eta
under one of its three weightings (``"singular_values"`` is the paper's, ``"uniform"`` the
strict one) and ``"lowrank"``, the gap-robust rank-r approximation error relative to the
optimum (:func:`ksvd_bench.metrics.lowrank_error`). One summary row per (problem, eps, measure,
method) gives the time at the found effort (median over seeds), the effort, the passes over G,
the value reached, whether every seed converged, the speedup over RSVD, the kernel
construction time, an end-to-end time and the paper's own numbers. Two kinds of extra rows:

* ``"tsvd (structured)"``: the exact answer through the structured kernel operator
  (sparse square data, exp kernels), timed end to end (operator build + ARPACK);
* ``"<method> [stop=residual]"``: the same solver stopped by the reference-free residual
  estimate of eta instead of the true eta, with the eta it actually reached beside the
  estimate.

Rules of the race (see :func:`run_compare`): the reference SVD is cached and never charged;
JIT compilation is excluded (the kernel builders and every solver are warmed up first); all
solvers run with the same Numba and BLAS thread counts (recorded as used); one dtype (float64)
throughout; a solver that misses ``eps`` is reported as not converged with its best value and
no time.

:func:`run_compare` is a sequence of named steps: check the arguments (:func:`_check_settings`)
and the output directory, then per problem load it (:func:`_load_problem`), compute its
reference (:func:`_reference`), warm the solvers up (:func:`_warm_up`) and race every method
(:func:`_race_method`, which runs the seeds of each cell and summarises them), add the exact
structured rows and the speedups; finally assemble the record (:func:`_compare_meta`) and write
it (:func:`write_compare_files`).
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ksvd_bench.race.paper_runtime import (
    DEFAULT_EPS,
    DEFAULT_KERNEL,
    DEFAULT_MEASURES,
    DEFAULT_RANK,
    LOWRANK,
    MEASURES,
    PAPER_METHOD_NAMES,
    PAPER_WEIGHTS,
    paper_runtime,
    paper_speedup,
)
from ksvd_bench.race.problems import (
    DATASET_SHAPES,
    DATASETS,
    Problem,
    build_problem,
    check_threads,
    quiet_rank_warnings,
    solver_threads,
)

__all__ = [
    "CompareResult", "run_compare", "format_compare", "write_compare_files", "exact_operator",
    "STRUCTURED_NAME", "ROW_FIELDS", "RUN_FIELDS", "DEFAULT_METHODS", "VARIANTS",
]

STRUCTURED_NAME = "tsvd (structured)"
RESIDUAL_SUFFIX = " [stop=residual]"
#: raced entries beyond ``solvers.METHODS``: name -> (solver method, its options). Norm
#: sampling picks rows/columns with probability ~ squared norm, which finds localised singular
#: vectors that uniform sampling misses (PubMed's are).
VARIANTS = {"asym_nystrom_norm": ("asym_nystrom", {"sampling": "norm"})}
#: what ``compare`` races by default
DEFAULT_METHODS = ("tsvd", "rsvd", "block_krylov", "sym_nystrom", "asym_nystrom",
                   "asym_nystrom_norm", "generalized_nystrom")
#: solvers whose end-to-end time is charged on the lazy kernel source (only the blocks or the
#: one sketch pass they read), not on a dense G built first
LAZY_E2E = ("sym_nystrom", "asym_nystrom", "generalized_nystrom")
#: how the effort of each solver is labelled in the table (its solver option)
EFFORT_LABELS = {"n_samples": "m", "n_oversamples": "p", "n_iter": "q", "ncv": "ncv"}

#: fields of every summary row (CSV column order). ``value`` is the measure reached: eta
#: (``measure="eta"``, under ``weights``) or the low-rank excess (``measure="lowrank"``).
ROW_FIELDS = (
    "dataset", "shape", "kernel", "eps", "measure", "weights", "method", "stop", "n_seeds",
    "n_converged", "converged", "effort_param", "effort", "effort_min", "effort_max",
    "n_passes", "seconds", "kernel_seconds", "e2e_seconds", "e2e_source", "value",
    "value_worst", "best_value", "resid_est", "value_ok", "speedup_vs_rsvd", "paper_seconds",
    "paper_speedup", "note",
)
#: per-seed run fields
RUN_FIELDS = (
    "dataset", "eps", "measure", "weights", "method", "stop", "seed", "effort", "n_passes",
    "value", "seconds", "converged", "resid_est", "n_steps", "e2e_seconds", "e2e_value",
)


# ---------------------------------------------------------------------------------------------
# results
# ---------------------------------------------------------------------------------------------


@dataclass(repr=False)
class CompareResult:
    """Outcome of :func:`run_compare`.

    Attributes
    ----------
    rows : list of dict
        One summary row per (dataset, eps, measure, method) plus the exact and
        residual-stopping rows; keys :data:`ROW_FIELDS`.
    runs : list of dict
        Every individual run (one per seed), keys :data:`RUN_FIELDS`.
    meta : dict
        Settings, seeds, thread counts used, dtype, machine and library versions, reference
        timings.
    paths : dict
        Files written (``"json"``, ``"csv"``, ``"runs_csv"``), empty when ``out`` was None.
    """

    rows: list
    runs: list
    meta: dict
    paths: dict = field(default_factory=dict)

    def __repr__(self):
        m = self.meta
        n_conv = sum(bool(r["converged"]) for r in self.rows)
        return (f"CompareResult(datasets={m.get('datasets')}, eps={m.get('eps')}, "
                f"measures={m.get('measures')}, rows={len(self.rows)} ({n_conv} converged), "
                f"runs={len(self.runs)}, threads={m.get('threads')}, "
                f"paths={sorted(self.paths)})")

    def table(self, *, wide=False):
        """The terminal table (see :func:`format_compare`)."""
        return format_compare(self, wide=wide)


# ---------------------------------------------------------------------------------------------
# step 1: the settings, checked once
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Settings:
    """The checked arguments of one :func:`run_compare` call (what every step reads)."""

    kernel: str
    rank: int
    eps: tuple          # loose first, tightest last
    measures: tuple     # eta weightings and/or "lowrank"
    methods: tuple
    seeds: tuple        # per-run seeds derived from random_state
    center: bool
    structured: bool
    residual: bool
    max_effort: object
    budget_seconds: float | None
    sweep_limit: float | None
    repeats: int
    threads: int
    random_state: int
    problem_options: dict | None
    cache_dir: Path | None


def _check_positive_int(value, name):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return int(value)


def _check_eps(eps):
    eps = [eps] if np.isscalar(eps) else list(eps)
    if not eps:
        raise ValueError("eps must hold at least one tolerance")
    out = []
    for e in eps:
        e = float(e)
        if not (math.isfinite(e) and e > 0):
            raise ValueError(f"eps must hold finite positive tolerances, got {e!r}")
        out.append(e)
    # Loose first, tightest last: one driver run to the tightest answers them all.
    return tuple(sorted(set(out), reverse=True))


def _check_measures(weights):
    measures = [weights] if isinstance(weights, str) else list(dict.fromkeys(weights))
    if not measures:
        raise ValueError("weights must name at least one measure")
    for w in measures:
        if w not in MEASURES:
            raise ValueError(f"weights must be drawn from {MEASURES}, got {w!r}")
    return tuple(measures)


def _check_methods(methods):
    import solvers

    methods = list(DEFAULT_METHODS if methods is None else dict.fromkeys(methods))
    allowed = tuple(solvers.METHODS) + tuple(VARIANTS)
    for m in methods:
        if m not in allowed:
            raise ValueError(f"methods must be drawn from {allowed}, got {m!r}")
    return tuple(methods)


def _check_max_effort(max_effort):
    ok = (max_effort is None or max_effort == "auto" or isinstance(max_effort, dict)
          or (isinstance(max_effort, (int, np.integer)) and not isinstance(max_effort, bool)
              and max_effort >= 1))
    if not ok:
        raise ValueError(f"max_effort must be 'auto', None, a positive int or a dict, got "
                         f"{max_effort!r}")
    return max_effort


def _check_seconds(value, name):
    if value is not None and not (isinstance(value, (int, float)) and not isinstance(value, bool)
                                  and math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number > 0 or None, got {value!r}")
    return value


def _check_datasets(datasets):
    datasets = [datasets] if isinstance(datasets, (str, Problem)) else list(datasets)
    if not datasets:
        raise ValueError("datasets must name at least one problem")
    for d in datasets:
        if not isinstance(d, Problem) and d not in DATASETS:
            raise ValueError(f"datasets must be drawn from {DATASETS} or be Problem objects, "
                             f"got {d!r}")
    return datasets


def _check_rank_fits(datasets, rank, problem_options):
    """``rank <= min(N, M)`` of every problem, known before any kernel is built."""
    from ksvd_bench.race.problems import DEFAULT_SYNTHETIC_SHAPE

    for d in datasets:
        if isinstance(d, Problem):
            name, shape = d.name, d.G.shape
        elif d == "synthetic":
            name, shape = d, (problem_options or {}).get("shape") or DEFAULT_SYNTHETIC_SHAPE
        else:
            name, shape = d, DATASET_SHAPES[d]
        if rank > min(shape):
            raise ValueError(f"rank must be at most min(N, M) = {min(shape)} for {name} "
                             f"({shape[0]}x{shape[1]}), got {rank}")


def _check_settings(*, kernel, rank, eps, weights, seeds, center, methods, structured,
                    residual, max_effort, budget_seconds, sweep_limit, repeats, threads,
                    random_state, problem_options, cache_dir):
    """Every argument of :func:`run_compare` checked up front, errors naming the argument."""
    if isinstance(random_state, bool) or not isinstance(random_state, (int, np.integer)):
        raise TypeError(f"random_state must be an int (it is recorded), got {random_state!r}")
    return _Settings(
        kernel=kernel, rank=_check_positive_int(rank, "rank"), eps=_check_eps(eps),
        measures=_check_measures(weights), methods=_check_methods(methods),
        seeds=tuple(seeds_from(random_state, _check_positive_int(seeds, "seeds"))),
        center=bool(center), structured=bool(structured), residual=bool(residual),
        max_effort=_check_max_effort(max_effort),
        budget_seconds=_check_seconds(budget_seconds, "budget_seconds"),
        sweep_limit=_check_seconds(sweep_limit, "sweep_limit"),
        repeats=_check_positive_int(repeats, "repeats"), threads=check_threads(threads),
        random_state=int(random_state), problem_options=problem_options,
        cache_dir=None if cache_dir is None else Path(cache_dir))


def seeds_from(random_state, n_seeds):
    """``n_seeds`` int seeds derived from ``random_state`` (recorded with the results)."""
    state = np.random.SeedSequence(random_state).generate_state(n_seeds)
    return [int(s) for s in state]


# ---------------------------------------------------------------------------------------------
# helpers shared by the steps
# ---------------------------------------------------------------------------------------------


def _median(values):
    values = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return float(statistics.median(values)) if values else None


def _solver(name):
    """(solver method, options) of a raced entry."""
    return VARIANTS.get(name, (name, {}))


def _effort_option(name):
    """The solver option that a raced entry's effort sets (None for tsvd)."""
    from ksvd_bench.driver import _EFFORT_OPTION

    return _EFFORT_OPTION.get(_solver(name)[0])


def _is_eta(measure):
    return measure != LOWRANK


def _measure_fields(measure):
    """The ``measure`` and ``weights`` fields of a row."""
    return ({"measure": "eta", "weights": measure} if _is_eta(measure)
            else {"measure": measure, "weights": None})


def _driver_options(measure):
    """How :func:`solve_to_tolerance` is asked for one measure."""
    if _is_eta(measure):
        return {"metric": "eta", "weights": measure}
    return {"metric": measure, "weights": PAPER_WEIGHTS, "track_residual": False}


class _Scorer:
    """Scores an answer under any measure (eta weightings, ``"lowrank"``) against a reference.

    The low-rank error makes a pass over the dense G where that is small, and goes through
    products with the cheaper ``res_src`` (the structured operator) where it is not, as the
    driver does.
    """

    def __init__(self, G, res_src, reference, rank):
        from ksvd_bench.metrics import LOWRANK_PASS_MAX_ENTRIES

        self.G, self.res_src, self.reference, self.rank = G, res_src, reference, rank
        self.use_pass = G.shape[0] * G.shape[1] <= LOWRANK_PASS_MAX_ENTRIES
        self.norm_fro = None

    def __call__(self, measure, answer):
        from ksvd_bench.metrics import eta, frobenius_norm, lowrank_error

        if _is_eta(measure):
            return float(eta(self.reference, answer, weights=measure, rank=self.rank))
        if self.use_pass:
            return float(lowrank_error(self.G, self.reference, answer, rank=self.rank,
                                       method="pass"))
        if self.norm_fro is None:
            self.norm_fro = frobenius_norm(self.res_src)
        return float(lowrank_error(self.res_src, self.reference, answer, rank=self.rank,
                                   method="products", norm_fro=self.norm_fro))


def _first_hit(history, eps, key):
    """Index of the first effort whose ``key`` ("value" or "residual_estimate") is <= eps."""
    return next((i for i, h in enumerate(history) if h[key] <= eps), None)


def _history_passes(tr, i):
    """Passes over G of the answer at history index ``i`` of a driver result (None: unknown)."""
    value = tr.history[i].get("n_passes")
    return None if value is None or math.isnan(value) else float(value)


def _passes(answer):
    value = answer.info.get("n_passes")
    return None if value is None else float(value)


# ---------------------------------------------------------------------------------------------
# step 2: load a problem, compute its reference, warm the solvers up
# ---------------------------------------------------------------------------------------------


def _load_problem(item, s, bar):
    """The :class:`Problem` of a dataset name (kernel built and timed), or ``item`` itself."""
    if isinstance(item, Problem):
        return item
    bar.set_postfix_str(f"{item}: kernel")
    return build_problem(item, kernel=s.kernel, center=s.center, random_state=s.random_state,
                         **(s.problem_options or {}))


def _measure_bound(measure, ref_s, norm_fro, rank):
    """The largest value ANY answer can score: a tolerance at or above it is vacuous.

    eta: every vector orthogonal to its reference gives ``2 mean(w)``. lowrank: any
    projection leaves at most ``||G||_F``, so the excess is at most
    ``||G||_F / ||G - G_r||_F - 1``.
    """
    s = ref_s[:rank]
    if measure == "singular_values":
        return float(2 * np.mean(s))
    if measure == "relative":
        return float(2 * np.mean(s / s[0])) if s[0] > 0 else 0.0
    if measure == "uniform":
        return 2.0
    optimum = math.sqrt(max(norm_fro ** 2 - float(np.sum(s ** 2)), 0.0))
    return norm_fro / optimum - 1.0 if optimum > 0 else math.inf


def exact_operator(problem):
    """The cheapest exact form of a problem's G: the structured operator where it applies.

    The reference SVD through it is exact to rounding (ARPACK with ``tol=0`` on the exact
    operator: singular values within 1e-14 of a dense LAPACK SVD on Cora) and takes seconds
    where a dense LAPACK SVD of Cora's 2708 x 2708 G takes 10 to 100 s on 2 loaded cores.
    """
    return problem.structured_source() if problem.supports_structured else problem.G


def _reference(problem, s, bar):
    """The exact top-r SVD of the problem (cached, never charged) and what the record keeps."""
    from ksvd_bench.driver import reference_svd
    from ksvd_bench.metrics import CLUSTER_RTOL

    bar.set_postfix_str(f"{problem.name}: reference")
    t0 = time.perf_counter()
    reference = reference_svd(exact_operator(problem), s.rank, cache_dir=s.cache_dir,
                              key=problem.definition, cluster_rtol=CLUSTER_RTOL)
    seconds = time.perf_counter() - t0
    ref_s = np.asarray(reference.s, dtype=float)
    norm_fro = float(np.linalg.norm(problem.G))
    info = {"seconds_not_charged": seconds, "method": reference.info.get("method"),
            "s": ref_s[:s.rank].tolist(),
            "n_triplets": int(ref_s.size), "norm_fro": norm_fro,
            "cached": bool(reference.info.get("cached", False)),
            # Largest value any answer can score (e.g. every vector orthogonal): a
            # tolerance at or above it is met by anything.
            "value_max": {m: _measure_bound(m, ref_s, norm_fro, s.rank) for m in s.measures}}
    return reference, info


def _warm_up(G, rank, methods):
    """Compile every solver's Numba code (and fault in BLAS) before anything is timed."""
    from solvers import svd

    k = min(rank, min(G.shape) // 4) or 1
    small = np.ascontiguousarray(G[: 4 * k + 8, : 4 * k + 8])
    for name in methods:
        method, extra = _solver(name)
        opts = {"n_samples": min(small.shape) // 2} if "n_samples" == _effort_option(name) else {}
        svd(small, k, method=method, random_state=0, **opts, **extra)


def _resolve_cap(max_effort, method, rank, shape):
    """The effort cap of one method on one problem (None: the driver's own cap).

    ``"auto"`` keeps the default run short: Nystrom samples at most a quarter of the columns
    (the last steps of the schedule up to m = min(N, M) cost most of a full SVD), RSVD and
    generalized Nystrom oversample at most ``min(min(N, M) / 4, 10 * rank)`` (beyond that a
    sketch costs more than a truncated SVD of a dense G), block Krylov's basis spans at most a
    quarter of the columns. A solver that needs more is reported as not converged at the cap,
    with its best value.
    """
    from ksvd_bench.driver import effort_schedule

    option = _effort_option(method)
    if option is None:
        return None
    if isinstance(max_effort, dict):
        return max_effort.get(method)
    if max_effort != "auto":
        return max_effort
    n = min(shape)
    if option == "n_samples":
        return int(min(n, max(4 * rank, n // 4)))
    if option == "n_iter":  # block Krylov depth: the driver's cap fills all columns
        return max(1, effort_schedule(_solver(method)[0], rank, shape)[-1] // 4)
    return int(max(0, min(n - rank, max(2 * rank, min(n // 4, 10 * rank)))))


# ---------------------------------------------------------------------------------------------
# step 3: race one method (every measure, eps and seed)
# ---------------------------------------------------------------------------------------------


@dataclass
class _Context:
    """What the per-method steps of one problem share."""

    problem: Problem
    G: np.ndarray
    reference: object
    res_src: object        # cheapest exact operator of G, for residual and low-rank scores
    score: _Scorer
    base: dict             # dataset, shape, kernel fields of every row
    paper_key: str | None
    settings: _Settings
    bar: object


def _race_method(ctx, method, cap):
    """Summary rows and per-seed runs of one method, for every measure and eps."""
    s = ctx.settings
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
            if _solver(method)[0] in LAZY_E2E and ctx.problem.A is not None:
                _attach_e2e(ctx, method, cell[e], measure, e2e_cache)
            runs.extend(cell[e])
            rows.append({**ctx.base, **_summarise(ctx, cell[e], method, e, measure)})
        if s.residual and _is_eta(measure):
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
    from ksvd_bench.driver import solve_to_tolerance

    s = ctx.settings
    solver, extra = _solver(method)
    options = {"track_residual": s.residual, **_driver_options(measure), **kwargs}
    return solve_to_tolerance(ctx.G, s.rank, solver, eps, reference=ctx.reference,
                              options=extra or None, random_state=seed, max_effort=cap,
                              repeats=s.repeats, time_limit=s.sweep_limit,
                              residual_operator=ctx.res_src, **options)


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
        i = _first_hit(tr.history, e, "value")
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
        runs.append({
            "eps": e, **_measure_fields(measure), "method": method, "stop": "reference",
            "seed": seed, "effort": int(effort), "n_passes": _history_passes(tr, i),
            "value": float(value), "seconds": seconds, "converged": conv,
            "resid_est": None if math.isnan(est) else float(est),
            "n_steps": (i + 1) if conv else len(tr.history),
            "stopped_by": "converged" if conv else tr.stopped_by,
        })
    return runs, (answers[0][1] if s.repeats == 1 else None)


def _tsvd_cells(ctx):
    """TSVD is a single run per seed whatever the measure: run it once, score it every way.

    The driver's run gives the answer and its time; every measure scores that same answer
    (what separate driver calls would do, minus the repeated ARPACK runs). The
    ``[stop=residual]`` rows read the same seed-1 answer, stopped when its residual estimate
    is <= eps.
    """
    from ksvd_bench.driver import solve_to_tolerance
    from ksvd_bench.metrics import residual_estimate

    s = ctx.settings
    cells = {m: {e: [] for e in s.eps} for m in s.measures}
    res_rows = {m: [] for m in s.measures}
    t0 = time.perf_counter()
    for k, seed in enumerate(s.seeds):
        if _over_budget(s, k, t0):
            ctx.bar.update((len(s.seeds) - k) * len(s.measures))
            break
        tr = solve_to_tolerance(ctx.G, s.rank, "tsvd", s.eps[-1], reference=ctx.reference,
                                weights=PAPER_WEIGHTS, random_state=seed, repeats=s.repeats,
                                track_residual=False)
        for m in s.measures:
            value = ctx.score(m, tr.result)
            est = (residual_estimate(ctx.res_src, tr.result, weights=m)
                   if s.residual and _is_eta(m) else None)
            for e in s.eps:
                conv = value <= e
                cells[m][e].append({
                    **ctx.base, "eps": e, **_measure_fields(m), "method": "tsvd",
                    "stop": "reference", "seed": seed, "effort": int(tr.effort),
                    "n_passes": _passes(tr.result), "value": value,
                    "seconds": float(tr.seconds) if conv else None, "converged": bool(conv),
                    "resid_est": est, "n_steps": 1})
                if k == 0 and est is not None:
                    res_rows[m].append(_tsvd_residual_row(ctx, tr, m, e, value, est))
            ctx.bar.update(1)
    return cells, res_rows


def _tsvd_residual_row(ctx, tr, measure, e, value, est):
    stopped = est <= e
    note = "estimate <= eps" if stopped else "estimate > eps after the run"
    if value > e:
        note += "; true eta > eps"
    return {
        **ctx.base, "method": "tsvd" + RESIDUAL_SUFFIX, "stop": "residual", "eps": e,
        **_measure_fields(measure), "n_seeds": 1, "n_converged": int(stopped),
        "converged": bool(stopped), "effort": int(tr.effort), "n_passes": _passes(tr.result),
        "seconds": float(tr.seconds) if stopped else None, "value": float(value),
        "value_worst": float(value), "best_value": float(value), "resid_est": float(est),
        "note": note}


def _attach_e2e(ctx, method, cell, measure, cache):
    """End-to-end time of a lazy-source row: kernel source + solve, first converged seed.

    Only what the method reads is evaluated (blocks for Nystrom, one sketch pass for
    generalized Nystrom), plus the lazy source's own set-up pass (e.g. the row sums of the
    SNE normaliser and the centring means). One seed per row keeps the cost down; ``cache``
    shares runs between rows at the same (effort, seed).
    """
    from solvers import svd

    run = next((r for r in cell if r["converged"]), None)
    if run is None:
        return
    solver, extra = _solver(method)
    effort = {_effort_option(method): int(run["effort"])}
    key = (run["effort"], run["seed"])
    if key not in cache:
        if not cache:
            # First lazy solve of this method: compiles the lazy source's kernels.
            svd(ctx.problem.lazy_source(structured=False), ctx.settings.rank, method=solver,
                random_state=run["seed"], **effort, **extra)
        t0 = time.perf_counter()
        src = ctx.problem.lazy_source(structured=False)
        res = svd(src, ctx.settings.rank, method=solver, random_state=run["seed"], **effort,
                  **extra)
        cache[key] = (time.perf_counter() - t0, res, type(src).__name__)
    seconds, res, name = cache[key]
    run.update(e2e_seconds=seconds, e2e_value=ctx.score(measure, res), e2e_source=name)


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
    if not complete and any(_first_hit(hist, e, "residual_estimate") is None for e in s.eps):
        final = _solve(ctx, method, measure, s.eps[-1], s.seeds[0], cap, stop="residual",
                       track_residual=True)
        hist = final.history
    return [_residual_row(ctx, method, measure, e, hist, final) for e in s.eps]


def _residual_row(ctx, method, measure, e, hist, final):
    i = _first_hit(hist, e, "residual_estimate")
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
    return {
        **ctx.base, "method": method + RESIDUAL_SUFFIX, "stop": "residual", "eps": e,
        **_measure_fields(measure), "n_seeds": 1, "n_converged": int(stopped),
        "converged": stopped, "effort": int(h["effort"]), "n_passes": h.get("n_passes"),
        "seconds": seconds, "value": true_eta, "value_worst": true_eta,
        "best_value": true_eta, "resid_est": est, "note": note,
    }


def _summarise(ctx, runs, method, eps, measure):
    """One summary row of a (method, eps, measure) cell from its per-seed runs."""
    problem = ctx.problem
    conv = [r for r in runs if r["converged"]]
    ok = bool(runs) and len(conv) == len(runs)
    efforts = [r["effort"] for r in runs]
    values = [r["value"] for r in runs]
    row = {
        "method": method, "stop": "reference", "eps": eps, **_measure_fields(measure),
        "n_seeds": len(runs), "n_converged": len(conv), "converged": ok,
        "effort": int(statistics.median(efforts)) if ok else max(efforts),
        "effort_min": min(efforts), "effort_max": max(efforts),
        "n_passes": _median([r.get("n_passes") for r in runs]),
        # A time is shown only when every seed reached eps: never time a miss as a hit.
        "seconds": _median([r["seconds"] for r in runs]) if ok else None,
        "kernel_seconds": problem.kernel_seconds,
        "value": _median(values) if ok else None,
        "value_worst": max(values), "best_value": min(values),
        "resid_est": _median([r["resid_est"] for r in runs]),
    }
    if ok:
        row.update(_e2e_fields(problem, method, runs, row["seconds"]))
    else:
        row["note"] = f"not converged: {len(conv)}/{len(runs)} seeds reached eps"
        if any(r.get("stopped_by") == "time_limit" for r in runs):
            row["note"] += " (sweep stopped by the time limit)"
    if measure == PAPER_WEIGHTS and ctx.paper_key is not None:
        row.update(_paper_fields(ctx.paper_key, eps, method))
    return row


def _paper_fields(key, eps, method):
    """The paper's seconds and speedup over its RSVD (printed for asym Nystrom, else derived)."""
    seconds = paper_runtime(key, eps, method)
    if method == "asym_nystrom":
        return {"paper_seconds": seconds, "paper_speedup": paper_speedup(key, eps)}
    rsvd = paper_runtime(key, eps, "rsvd")
    return {"paper_seconds": seconds,
            "paper_speedup": rsvd / seconds if (seconds and rsvd) else None}


def _e2e_fields(problem, method, runs, seconds):
    if _solver(method)[0] in LAZY_E2E and problem.A is not None:
        timed = [r for r in runs if r.get("e2e_seconds") is not None]
        return {"e2e_seconds": _median([r["e2e_seconds"] for r in timed]),
                "e2e_source": timed[0]["e2e_source"] if timed else None}
    if problem.kernel_seconds is not None:
        return {"e2e_seconds": seconds + problem.kernel_seconds, "e2e_source": "dense G"}
    return {"e2e_seconds": seconds, "e2e_source": "dense G (given)"}


# ---------------------------------------------------------------------------------------------
# step 4: the exact structured entry and the speedups
# ---------------------------------------------------------------------------------------------


def _structured_rows(ctx):
    """The exact "tsvd (structured)" entry: operator build + ARPACK, end to end."""
    from ksvd_bench.metrics import residual_estimate
    from solvers import svd

    s, problem = ctx.settings, ctx.problem
    # Warm-up: compiles the structured kernels and ARPACK's path on this very problem.
    svd(problem.structured_source(), s.rank, method="tsvd", random_state=s.seeds[0])
    builds, solves, results = [], [], []
    for seed in s.seeds[: max(1, min(len(s.seeds), 3))]:
        t0 = time.perf_counter()
        src = problem.structured_source()
        t1 = time.perf_counter()
        res = svd(src, s.rank, method="tsvd", random_state=seed)
        t2 = time.perf_counter()
        builds.append(t1 - t0)
        solves.append(t2 - t1)
        results.append(res)
    res = results[0]
    rows = []
    for m in s.measures:
        values = [ctx.score(m, r) for r in results]
        est = (residual_estimate(ctx.res_src, res, weights=m, rank=s.rank)
               if _is_eta(m) else None)
        for e in s.eps:
            ok = max(values) <= e
            rows.append({
                **ctx.base, "method": STRUCTURED_NAME, "stop": "exact", "eps": e,
                **_measure_fields(m), "n_seeds": len(results),
                "n_converged": sum(x <= e for x in values), "converged": ok,
                "effort": res.info.get("effort"), "n_passes": _passes(res),
                "seconds": _median(solves) if ok else None,
                "kernel_seconds": _median(builds),
                "e2e_seconds": (_median([b + t for b, t in zip(builds, solves, strict=True)])
                                if ok else None),
                "e2e_source": "StructuredKernelSource",
                "value": _median(values), "value_worst": max(values),
                "best_value": min(values), "resid_est": est,
                "note": "exact: structured operator build + ARPACK (tol=0), end to end",
            })
    return rows


def _add_speedups(rows):
    """speedup_vs_rsvd = RSVD's time / this row's time, within the same (eps, measure)."""
    rsvd = {(r["eps"], r["measure"], r["weights"]): r["seconds"] for r in rows
            if r["method"] == "rsvd" and r["stop"] == "reference"}
    for r in rows:
        if r["stop"] == "residual":
            continue
        base = rsvd.get((r["eps"], r["measure"], r["weights"]))
        if base is not None and r.get("seconds"):
            key = "e2e_seconds" if r["stop"] == "exact" else "seconds"
            if r.get(key):
                r["speedup_vs_rsvd"] = base / r[key]


# ---------------------------------------------------------------------------------------------
# one problem, then the whole run
# ---------------------------------------------------------------------------------------------


def _paper_key(name, s):
    """The paper's table for this problem, when the settings are the paper's."""
    if name in ("cora", "citeseer", "pubmed") and s.kernel == "sne" and s.rank == 20:
        return name
    return None


def _race_problem(problem, s, bar):
    """Every method on one problem: ``(rows, runs, reference info, caps, seconds per method)``."""
    G = problem.G
    reference, ref_info = _reference(problem, s, bar)
    # Residual and low-rank scores need only products with G: the exact structured operator
    # gives them cheaply where it applies, the dense matrix elsewhere.
    res_src = exact_operator(problem)
    _warm_up(G, s.rank, s.methods)
    ctx = _Context(problem=problem, G=G, reference=reference, res_src=res_src,
                   score=_Scorer(G, res_src, reference, s.rank),
                   base={"dataset": problem.name, "shape": list(G.shape),
                         "kernel": problem.kernel},
                   paper_key=_paper_key(problem.name, s), settings=s, bar=bar)
    rows, runs, caps, stage_seconds = [], [], {}, {}
    for method in s.methods:
        t0 = time.perf_counter()
        caps[method] = _resolve_cap(s.max_effort, method, s.rank, G.shape)
        method_rows, method_runs = _race_method(ctx, method, caps[method])
        rows += method_rows
        runs += method_runs
        stage_seconds[method] = time.perf_counter() - t0
    if s.structured and problem.supports_structured and "tsvd" in s.methods:
        bar.set_postfix_str(f"{problem.name}: {STRUCTURED_NAME}")
        rows += _structured_rows(ctx)
    _add_speedups(rows)
    return rows, runs, ref_info, caps, stage_seconds


def _effort_param(method):
    if method == STRUCTURED_NAME:
        return "ncv"
    return _effort_option(method.replace(RESIDUAL_SUFFIX, "")) or "ncv"


def _finalise_rows(rows):
    """Every row with every field of :data:`ROW_FIELDS`, in that order."""
    out = []
    for row in rows:
        row = dict(row)
        row["value_ok"] = None if row.get("value") is None else bool(row["value"] <= row["eps"])
        row["effort_param"] = _effort_param(row["method"])
        out.append({k: row.get(k) for k in ROW_FIELDS})
    return out


def _compare_meta(s, names, ref_info, caps, stage_seconds, machine):
    """The record of a run: settings, seeds, threads used, references, machine."""
    return {
        "command": "compare", "datasets": names, "kernel": s.kernel, "rank": s.rank,
        "eps": list(s.eps), "measures": list(s.measures), "paper_weights": PAPER_WEIGHTS,
        "methods": list(s.methods), "center": s.center, "n_seeds": len(s.seeds),
        "seeds": list(s.seeds), "random_state": s.random_state,
        "budget_seconds": s.budget_seconds, "sweep_limit": s.sweep_limit, "max_effort": caps,
        "repeats": s.repeats,
        # The counts in force while the solvers ran (machine_info is taken inside the limits).
        "threads": machine["numba_threads"],
        "blas_threads": [b.get("num_threads") for b in machine["blas"]],
        "dtype": "float64", "reference": ref_info, "wall_seconds_per_method": stage_seconds,
        "timing": ("seconds: solve at the found effort (driver, median over repeats), median "
                   "over seeds; JIT warm-up excluded; reference not charged; e2e: kernel + "
                   "solve for dense methods, lazy source + solve for Nystrom-type methods"),
        "machine": machine,
    }


def write_compare_files(result, out):
    """Write ``compare.json``, ``compare.csv`` and ``compare_runs.csv`` under ``out``, atomically.

    Returns
    -------
    dict
        ``{"json": path, "csv": path, "runs_csv": path}`` (str).
    """
    from ksvd_bench.report import write_csv, write_json

    out = Path(out)
    return {
        "json": str(write_json(out / "compare.json",
                               {"meta": result.meta, "rows": result.rows, "runs": result.runs})),
        "csv": str(write_csv(out / "compare.csv", result.rows, list(ROW_FIELDS))),
        "runs_csv": str(write_csv(out / "compare_runs.csv", result.runs, list(RUN_FIELDS))),
    }


def run_compare(
    datasets=("cora",),
    *,
    kernel=DEFAULT_KERNEL,
    rank=DEFAULT_RANK,
    eps=DEFAULT_EPS,
    weights=DEFAULT_MEASURES,
    seeds=5,
    center=True,
    methods=None,
    structured=True,
    residual=True,
    max_effort="auto",
    budget_seconds=3.0,
    sweep_limit=20.0,
    repeats=1,
    threads=1,
    random_state=0,
    problem_options=None,
    cache_dir=None,
    out=None,
    progress=True,
):
    """Race every solver to each tolerance on each problem and summarise the results.

    Parameters
    ----------
    datasets : sequence of str or Problem, default=("cora",)
        Problems: names from :data:`ksvd_bench.race.problems.DATASETS`, or ready
        :class:`~ksvd_bench.race.problems.Problem` objects (e.g. from
        :func:`~ksvd_bench.race.problems.problem_from_data`).
    kernel : str, default="sne"
        Kernel of the named real problems.
    rank : int, default=20
        Number of singular triplets ``r``.
    eps : float or sequence of float, default=(0.1, 0.01)
        Tolerances on each measure.
    weights : sequence of str, default=("singular_values", "relative", "uniform", "lowrank")
        Accuracy measures, one row-group each: eta under a weighting (the first is the
        paper's; ``"uniform"`` is the strict one) or ``"lowrank"``, the gap-robust
        ``||G - U U^T G||_F <= (1 + eps) ||G - G_r||_F`` of
        :func:`ksvd_bench.metrics.lowrank_error`.
    seeds : int, default=5
        Seeds per (problem, method, measure); the time is the median over seeds.
    center : bool, default=True
        Centre the kernel matrices.
    methods : sequence of str, optional
        Entries to race: names of ``solvers.METHODS`` or of :data:`VARIANTS` (default
        :data:`DEFAULT_METHODS`: every solver plus asym Nystrom with norm sampling).
        ``"rsvd"`` is needed for speedups.
    structured : bool, default=True
        Add the exact ``"tsvd (structured)"`` rows where the structured operator applies.
    residual : bool, default=True
        Add ``"<method> [stop=residual]"`` rows (first seed only, eta measures) and the
        residual estimate at each found effort.
    max_effort : "auto", int, dict or None, default="auto"
        Effort cap: ``"auto"`` caps Nystrom at ``m <= min(N, M) / 4``, RSVD and generalized
        Nystrom at ``p <= min(min(N, M) / 4, 10 * rank)`` and block Krylov at a basis of a
        quarter of the columns (see ``_resolve_cap``); an int caps every method; a dict maps
        method -> cap; None leaves the driver's caps (up to m = min(N, M)).
    budget_seconds : float or None, default=3.0
        Wall-time budget per (problem, method, measure) cell: once the seeds run so far used
        it up, the remaining seeds are skipped (``n_seeds`` records how many ran). The first
        seed always runs to completion, so every cell is answered. None: no budget.
    sweep_limit : float or None, default=20.0
        Wall-clock seconds one effort sweep (one seed of one cell) may take before the
        driver stops growing the effort (``solve_to_tolerance(time_limit=...)``); such rows are
        reported as not converged, with the reason in ``note``. None: only the caps bound it.
    repeats : int, default=1
        Timings per found effort inside the driver (median).
    threads : int or None, default=1
        Numba and BLAS threads for every solver, at most :func:`max_threads` (None: Numba's
        current count). One thread by default: every solver gets the same, and on a shared
        machine spinning BLAS/Numba threads make multi-threaded timings erratic (measured
        here: 2 threads under load took 9x the CPU time of 1 thread for the same default run).
    random_state : int, default=0
        Root seed: the problem's seed and the source of the per-run seeds.
    problem_options : dict, optional
        Extra keyword arguments of :func:`~ksvd_bench.race.problems.build_problem`
        (e.g. ``shape`` and ``synthetic_options`` for ``"synthetic"``).
    cache_dir : str or Path, optional
        Directory of the reference-SVD cache (default ``<out>/reference_cache`` when ``out``
        is given, else no disk cache). Entries are keyed by the problem's definition.
    out : str or Path, optional
        Directory for ``compare.json``, ``compare.csv`` and ``compare_runs.csv``; checked
        (created, probed with a test file) before any work, written atomically after.
    progress : bool, default=True
        Show a progress bar (on stderr; counts and elapsed time, no ETA).

    Returns
    -------
    CompareResult

    Raises
    ------
    ValueError
        Naming the argument: an unknown dataset, method or measure, a non-positive rank,
        seeds, repeats, eps, budget or limit, more threads than Numba's pool, an ``out``
        that cannot be written.
    """
    from ksvd_bench.report import check_out_dir, machine_info, progress_bar

    datasets = _check_datasets(datasets)
    if cache_dir is None and out is not None:
        cache_dir = Path(out) / "reference_cache"
    s = _check_settings(kernel=kernel, rank=rank, eps=eps, weights=weights, seeds=seeds,
                        center=center, methods=methods, structured=structured,
                        residual=residual, max_effort=max_effort,
                        budget_seconds=budget_seconds, sweep_limit=sweep_limit,
                        repeats=repeats, threads=threads, random_state=random_state,
                        problem_options=problem_options, cache_dir=cache_dir)
    _check_rank_fits(datasets, s.rank, problem_options)
    if out is not None:  # found now, not after minutes of work
        out = check_out_dir(out, "out")

    rows, runs, ref_info, caps, stage_seconds = [], [], {}, {}, {}
    names = [d.name if isinstance(d, Problem) else d for d in datasets]
    n_runs = len(datasets) * len(s.methods) * len(s.measures) * len(s.seeds)
    bar = progress_bar(total=n_runs, desc="compare", unit="runs", enabled=progress)
    with bar, solver_threads(s.threads), quiet_rank_warnings():
        machine = machine_info()
        for item in datasets:
            problem = _load_problem(item, s, bar)
            p_rows, p_runs, ref_info[problem.name], caps[problem.name], \
                stage_seconds[problem.name] = _race_problem(problem, s, bar)
            rows += p_rows
            runs += p_runs
            del problem  # a dense G per problem: let it go before the next one is built

    result = CompareResult(rows=_finalise_rows(rows), runs=runs,
                           meta=_compare_meta(s, names, ref_info, caps, stage_seconds, machine))
    if out is not None:
        result.paths = write_compare_files(result, out)
    return result


# ---------------------------------------------------------------------------------------------
# the terminal table
# ---------------------------------------------------------------------------------------------

#: columns of the default table (fits 100 characters); ``wide=True`` shows :data:`_WIDE`
_NARROW = [("name", "method"), ("conv", "conv"), ("effort_label", "effort"),
           ("n_passes", "passes"), ("seconds", "time s"), ("e2e_seconds", "e2e s"),
           ("value", "value"), ("speedup", "vs RSVD"), ("paper", "paper x")]
_WIDE = [("name", "method"), ("conv", "conv"), ("effort_label", "effort"),
         ("effort_range", "range"), ("n_passes", "passes"), ("seconds", "time s"),
         ("kernel_seconds", "kernel s"), ("e2e_seconds", "e2e s"), ("value", "value"),
         ("value_worst", "worst"), ("best_value", "best"), ("resid_est", "resid est"),
         ("speedup", "vs RSVD"), ("paper_seconds", "paper s"), ("paper", "paper x")]


def _num(value, digits=3):
    """A number in at most 8 characters: 3 significant digits, '-' for none."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e5):
        return f"{value:.{digits - 1}e}"
    return f"{value:.{digits}g}" if abs(value) < 1 else f"{value:.{max(digits - 1, 1)}f}"


def ratio_text(value):
    """A speedup as text: ``22.9x``, ``1.71x``, ``0.042x`` (two significant digits below 0.1)."""
    if value >= 10:
        return f"{value:.1f}x"
    return f"{value:.2f}x" if value >= 0.1 else f"{value:.2g}x"


def _passes_text(value):
    """Passes: whole numbers for the product-based methods, 3 digits for Nystrom's fractions."""
    if value is None or math.isnan(value):
        return "-"
    return f"{value:.0f}" if value >= 10 or value == int(value) else f"{value:.3g}"


def _display_row(r, paper_key_known):
    """A summary row as the strings the table shows."""
    residual = r["method"].endswith(RESIDUAL_SUFFIX)
    name = "  " + "+ residual stop" if residual else r["method"]
    label = EFFORT_LABELS.get(r["effort_param"], r["effort_param"])
    effort = "-" if r["effort"] is None else f"{label}={r['effort']}"
    # For a miss the value column shows the best value reached (the time is '-').
    value = r["value"] if r["converged"] or r["stop"] != "reference" else r["best_value"]
    paper = r.get("paper_speedup")
    paper_method = r["method"] in PAPER_METHOD_NAMES
    return {
        "name": name,
        "conv": f"{r['n_converged']}/{r['n_seeds']}",
        "effort_label": effort,
        "effort_range": ("-" if r.get("effort_min") is None
                         else f"{r['effort_min']}-{r['effort_max']}"),
        "n_passes": _passes_text(r["n_passes"]),
        "seconds": _num(r["seconds"]), "kernel_seconds": _num(r["kernel_seconds"]),
        "e2e_seconds": _num(r["e2e_seconds"]), "value": _num(value),
        "value_worst": _num(r["value_worst"]), "best_value": _num(r["best_value"]),
        "resid_est": _num(r["resid_est"]),
        "speedup": "-" if r.get("speedup_vs_rsvd") is None else ratio_text(r["speedup_vs_rsvd"]),
        "paper_seconds": _num(r.get("paper_seconds")),
        "paper": (ratio_text(paper) if paper is not None
                  else "n/a" if paper_key_known and not paper_method and not residual
                  else "-"),
    }


def _group_label(measure, meta):
    if measure == LOWRANK:
        return "lowrank (gap-robust): ||G - U U^T G||_F <= (1 + eps) ||G - G_r||_F"
    paper = " (the paper's)" if measure == meta["paper_weights"] else ""
    return f"eta, {measure} weights{paper}"


def _ordered(rows, meta):
    """Rows of one table: per measure, methods in race order, each residual row under its own."""
    order = {m: i for i, m in enumerate(meta["methods"] + [STRUCTURED_NAME])}

    def key(r):
        base = r["method"].replace(RESIDUAL_SUFFIX, "")
        return (order.get(base, 99), r["method"].endswith(RESIDUAL_SUFFIX))

    return sorted(rows, key=key)


def format_compare(result, *, wide=False):
    """Terminal tables of a :class:`CompareResult`, one per (dataset, eps).

    Within a table the rows are grouped per accuracy measure (eta under each weighting, the
    low-rank error); "conv" counts seeds that reached eps; a missing time ("-") means not
    converged, and then the value column shows the best value reached. The default layout fits
    100 characters; ``wide=True`` adds the effort range, kernel time, worst and best values,
    the residual estimate and the paper's seconds.
    """
    from ksvd_bench.report import format_table, wrap_note

    meta = result.meta
    columns = _WIDE if wide else _NARROW
    blocks = []
    for dataset in meta["datasets"]:
        ref = meta.get("reference", {}).get(dataset, {})
        for e in meta["eps"]:
            sel = [r for r in result.rows if r["dataset"] == dataset and r["eps"] == e]
            if not sel:
                continue
            shape = "x".join(str(n) for n in sel[0]["shape"])
            kernel_s = next((r["kernel_seconds"] for r in sel if r["kernel_seconds"] is not None
                             and r["method"] != STRUCTURED_NAME), None)
            built = "" if kernel_s is None else f", kernel built in {_num(kernel_s)} s"
            title = (f"{dataset} {shape}, {sel[0]['kernel'] or 'given'} kernel, "
                     f"r={meta['rank']}, eps={e:g}{built} (threads={meta['threads']}, float64)")
            paper_known = any(r.get("paper_seconds") is not None for r in sel)
            groups = []
            for m in meta["measures"]:
                group = [r for r in sel if (r["weights"] or r["measure"]) == m]
                if group:
                    label = "-- " + _group_label(m, meta)
                    bound = ref.get("value_max", {}).get(m)
                    if bound is not None and bound <= e:
                        label += f" -- VACUOUS: any answer scores <= {bound:.3g}"
                    groups.append((wrap_note(label), [_display_row(r, paper_known)
                                           for r in _ordered(group, meta)]))
            table = format_table([], columns, title=wrap_note(title), groups=groups)
            notes = [_vacuity_note(m, bound, e)
                     for m, bound in ref.get("value_max", {}).items() if bound <= e]
            blocks.append("\n".join([table] + [wrap_note(n) for n in notes]))
    return "\n\n".join(blocks + [wrap_note(_FOOTER)])


def _vacuity_note(measure, bound, eps):
    what = ("the low-rank excess" if measure == LOWRANK
            else f"eta with {measure} weights (<= 2 mean(w))")
    return (f"NOTE: {what} is at most {bound:.3g} <= eps = {eps:g} for ANY answer (even random "
            f"vectors): this tolerance is vacuous, its times and speedups mean nothing.")


_FOOTER = (
    "conv: seeds that reached eps. time s: solve at the found effort, median over seeds (JIT "
    "and reference excluded); '-' = not converged, value then shows the best reached. value: "
    "eta, or the low-rank excess in the lowrank group. "
    "effort: m = Nystrom samples, p = oversampling, q = Krylov/power iterations, ncv = ARPACK "
    "basis. passes: passes over G (a whole-G product counts 1; Nystrom: entries read / NM).\n"
    "e2e s: kernel + solve (dense G); lazy kernel source + solve (Nystrom-type methods: only "
    "what they read is charged); structured operator build + solve (exact row). paper x: the "
    "paper's speedup over its RSVD (n/a: method not in the paper).\n"
    "+ residual stop: the method above stopped by the reference-free residual estimate of eta "
    "(seed 1 only); value is the true eta reached. --wide shows more columns."
)
