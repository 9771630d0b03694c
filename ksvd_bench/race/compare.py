"""The solver race (the paper's Tables 3 and 4): which solver reaches eta <= eps fastest.

For each problem, tolerance ``eps`` and weighting of eta, every solver of :data:`solvers.METHODS`
is driven to ``eps`` by :func:`ksvd_bench.driver.solve_to_tolerance` for several seeds. One
summary row per (problem, eps, weights, method) gives the time at the found effort (median over
seeds), the effort, eta reached, whether every seed converged, the speedup over RSVD, the kernel
construction time, an end-to-end time and the paper's own numbers. Two kinds of extra rows:

* ``"tsvd (structured)"``: the exact answer through the structured kernel operator of issue 6
  (sparse square data, exp kernels), timed end to end (operator build + ARPACK);
* ``"<method> [stop=residual]"``: the same solver stopped by the reference-free residual
  estimate instead of the true eta, with the eta it actually reached beside the estimate.

Rules of the race (see :func:`run_compare`): the reference SVD is cached and never charged;
JIT compilation is excluded (every solver is warmed up first); all solvers run with the same
Numba and BLAS thread counts (recorded); one dtype (float64) throughout; a solver that misses
``eps`` is reported as not converged with its best eta and no time.
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
    DEFAULT_RANK,
    DEFAULT_WEIGHTS,
    PAPER_WEIGHTS,
    paper_runtime,
    paper_speedup,
)
from ksvd_bench.race.problems import (
    DATASETS,
    Problem,
    build_problem,
    quiet_rank_warnings,
)

__all__ = [
    "CompareResult", "run_compare", "format_compare", "STRUCTURED_NAME", "ROW_FIELDS",
]

STRUCTURED_NAME = "tsvd (structured)"
#: raced entries beyond ``solvers.METHODS``: name -> (solver method, its options). Norm
#: sampling picks rows/columns with probability ~ squared norm, which finds localised singular
#: vectors that uniform sampling misses (PubMed's are).
VARIANTS = {"asym_nystrom_norm": ("asym_nystrom", {"sampling": "norm"})}
#: what ``compare`` races by default
DEFAULT_METHODS = ("tsvd", "rsvd", "sym_nystrom", "asym_nystrom", "asym_nystrom_norm")


def _eta_weights(s, weights):
    if weights == "singular_values":
        return s
    if weights == "relative":
        return s / s[0]
    return np.ones_like(s)


def _solver(name):
    """(solver method, options) of a raced entry."""
    return VARIANTS.get(name, (name, {}))
RESIDUAL_SUFFIX = " [stop=residual]"
#: fields of every summary row (CSV column order)
ROW_FIELDS = (
    "dataset", "shape", "kernel", "eps", "weights", "method", "stop", "n_seeds", "n_converged",
    "converged", "effort", "effort_min", "effort_max", "seconds", "kernel_seconds",
    "e2e_seconds", "e2e_source", "eta", "eta_worst", "best_eta", "resid_est", "eta_ok",
    "speedup_vs_rsvd", "paper_seconds", "paper_speedup", "note",
)
#: per-seed run fields
RUN_FIELDS = (
    "dataset", "eps", "weights", "method", "stop", "seed", "effort", "eta", "seconds",
    "converged", "resid_est", "n_steps", "e2e_seconds", "e2e_eta",
)


@dataclass
class CompareResult:
    """Outcome of :func:`run_compare`.

    Attributes
    ----------
    rows : list of dict
        One summary row per (dataset, eps, weights, method) plus the exact and residual-stopping
        rows; keys :data:`ROW_FIELDS`.
    runs : list of dict
        Every individual run (one per seed), keys ``RUN_FIELDS``.
    meta : dict
        Settings, seeds, thread counts, dtype, machine and library versions, reference timings.
    paths : dict
        Files written (``"json"``, ``"csv"``, ``"runs_csv"``), empty when ``out`` was None.
    """

    rows: list
    runs: list
    meta: dict
    paths: dict = field(default_factory=dict)

    def table(self):
        """The terminal table (see :func:`format_compare`)."""
        return format_compare(self)


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
    return sorted(set(out), reverse=True)


def _median(values):
    values = [v for v in values if v is not None]
    return float(statistics.median(values)) if values else None


def seeds_from(random_state, n_seeds):
    """``n_seeds`` int seeds derived from ``random_state`` (recorded with the results)."""
    state = np.random.SeedSequence(random_state).generate_state(n_seeds)
    return [int(s) for s in state]


def _warm_up(G, rank, methods):
    """Compile every solver's Numba code (and fault in BLAS) before anything is timed."""
    from solvers import svd

    k = min(rank, min(G.shape) // 4) or 1
    small = np.ascontiguousarray(G[: 4 * k + 8, : 4 * k + 8])
    for name in methods:
        method, extra = _solver(name)
        opts = {"n_samples": min(small.shape) // 2} if "nystrom" in method else {}
        svd(small, k, method=method, random_state=0, **opts, **extra)


def _resolve_cap(max_effort, method, rank, shape):
    """The effort cap of one method on one problem (None: the driver's own cap).

    ``"auto"`` keeps the default run short: Nystrom samples at most a quarter of the columns (the
    last steps of the schedule up to m = min(N, M) cost most of a full SVD), RSVD
    oversamples at most ``min(min(N, M) / 4, 10 * rank)`` (beyond that a sketch costs more
    than a truncated SVD of a dense G). A solver that needs more is reported as not
    converged at the cap, with its best eta.
    """
    if method == "tsvd":
        return None
    if isinstance(max_effort, dict):
        return max_effort.get(method)
    if max_effort != "auto":
        return max_effort
    n = min(shape)
    if "nystrom" in method:
        return int(min(n, max(4 * rank, n // 4)))
    return int(max(0, min(n - rank, max(2 * rank, min(n // 4, 10 * rank)))))


def _cell_runs(G, rank, method, eps_list, weights, seeds, reference, cap, repeats, residual,
               budget, sweep_limit, res_src, base, bar):
    """All seeds of one (method, weights) cell; later seeds are skipped once over budget."""
    cell = {e: [] for e in eps_list}
    first = None
    t0 = time.perf_counter()
    for k, seed in enumerate(seeds):
        if k > 0 and budget is not None and time.perf_counter() - t0 > budget:
            bar.update(len(seeds) - k)
            break
        seed_runs, tr = _seed_runs(G, rank, method, eps_list, weights, seed, reference, cap,
                                   repeats, residual, sweep_limit, res_src)
        for run in seed_runs:
            cell[run["eps"]].append({**base, **run})
        if k == 0:
            first = tr
        bar.update(1)
    return cell, first


def _tsvd_cells(G, rank, eps_list, weights_list, seeds, reference, residual, repeats, budget,
                base, bar, res_src):
    """TSVD is a single run per seed whatever the weighting: run it once, score it thrice.

    The driver's run for the first weighting gives the answer and its time; the other
    weightings score that same answer (what separate driver calls would do, minus the repeated
    ARPACK runs). The ``[stop=residual]`` rows read the same seed-1 answer, stopped when its
    residual estimate is <= eps.
    """
    from ksvd_bench.driver import solve_to_tolerance
    from ksvd_bench.metrics import eta, residual_estimate

    cells = {w: {e: [] for e in eps_list} for w in weights_list}
    res_rows = {w: [] for w in weights_list}
    t0 = time.perf_counter()
    for k, seed in enumerate(seeds):
        if k > 0 and budget is not None and time.perf_counter() - t0 > budget:
            bar.update((len(seeds) - k) * len(weights_list))
            break
        tr = solve_to_tolerance(G, rank, "tsvd", eps_list[-1], reference=reference,
                                weights=weights_list[0], random_state=seed, repeats=repeats,
                                track_residual=False)
        for w in weights_list:
            value = eta(reference, tr.result, weights=w)
            est = residual_estimate(res_src, tr.result, weights=w) if residual else None
            for e in eps_list:
                conv = value <= e
                cells[w][e].append({
                    **base, "eps": e, "weights": w, "method": "tsvd", "stop": "reference",
                    "seed": seed, "effort": int(tr.effort), "eta": float(value),
                    "seconds": float(tr.seconds) if conv else None, "converged": bool(conv),
                    "resid_est": est, "n_steps": 1})
                if k == 0 and residual:
                    stopped = est <= e
                    note = "estimate <= eps" if stopped else "estimate > eps after the run"
                    if value > e:
                        note += "; true eta > eps"
                    res_rows[w].append({
                        **base, "method": "tsvd" + RESIDUAL_SUFFIX, "stop": "residual",
                        "eps": e, "weights": w, "n_seeds": 1, "n_converged": int(stopped),
                        "converged": bool(stopped), "effort": int(tr.effort),
                        "seconds": float(tr.seconds) if stopped else None,
                        "eta": float(value), "eta_worst": float(value),
                        "best_eta": float(value), "resid_est": float(est), "note": note})
            bar.update(1)
    return cells, res_rows


def _attach_e2e(problem, rank, method, cell, reference, weights, cache):
    """End-to-end time of a Nystrom row: lazy kernel source + solve, first converged seed.

    Only the blocks the method asks for are evaluated (plus the lazy source's own set-up
    pass, e.g. the row sums of the SNE normaliser and the centring means). One seed per row
    keeps the cost down; ``cache`` shares runs between rows at the same (effort, seed).
    """
    from ksvd_bench.metrics import eta
    from solvers import svd

    run = next((r for r in cell if r["converged"]), None)
    if run is None:
        return
    solver, extra = _solver(method)
    key = (run["effort"], run["seed"])
    if key not in cache:
        if not cache:
            # First lazy solve of this method: compiles the lazy source's kernels.
            svd(problem.lazy_source(structured=False), rank, method=solver,
                random_state=run["seed"], n_samples=int(run["effort"]), **extra)
        t0 = time.perf_counter()
        src = problem.lazy_source(structured=False)
        res = svd(src, rank, method=solver, random_state=run["seed"],
                  n_samples=int(run["effort"]), **extra)
        cache[key] = (time.perf_counter() - t0, res, type(src).__name__)
    seconds, res, name = cache[key]
    run.update(e2e_seconds=seconds, e2e_eta=eta(reference, res, weights=weights),
               e2e_source=name)


def _structured_rows(problem, rank, eps_list, weights_list, seeds, reference, residual_src):
    """The exact "tsvd (structured)" entry: operator build + ARPACK, end to end."""
    from ksvd_bench.metrics import eta, residual_estimate
    from solvers import svd

    # Warm-up: compiles the structured kernels and ARPACK's path on this very problem.
    svd(problem.structured_source(), rank, method="tsvd", random_state=seeds[0])
    builds, solves, results = [], [], []
    for seed in seeds[: max(1, min(len(seeds), 3))]:
        t0 = time.perf_counter()
        src = problem.structured_source()
        t1 = time.perf_counter()
        res = svd(src, rank, method="tsvd", random_state=seed)
        t2 = time.perf_counter()
        builds.append(t1 - t0)
        solves.append(t2 - t1)
        results.append(res)
    res = results[0]
    rows = []
    for w in weights_list:
        etas = [eta(reference, r, weights=w) for r in results]
        est = residual_estimate(residual_src, res, weights=w, rank=rank)
        for e in eps_list:
            ok = max(etas) <= e
            rows.append({
                "method": STRUCTURED_NAME, "stop": "exact", "eps": e, "weights": w,
                "n_seeds": len(results), "n_converged": sum(x <= e for x in etas),
                "converged": ok, "effort": res.info.get("effort"),
                "seconds": _median(solves) if ok else None,
                "kernel_seconds": _median(builds),
                "e2e_seconds": (_median([b + s for b, s in zip(builds, solves, strict=True)])
                                if ok else None),
                "e2e_source": "StructuredKernelSource",
                "eta": _median(etas), "eta_worst": max(etas), "best_eta": min(etas),
                "resid_est": est,
                "note": "exact: structured operator build + ARPACK (tol=0), end to end",
            })
    return rows


def _summarise(runs, *, method, eps, weights, problem, paper_key):
    conv = [r for r in runs if r["converged"]]
    ok = bool(runs) and len(conv) == len(runs)
    efforts = [r["effort"] for r in runs]
    etas = [r["eta"] for r in runs]
    row = {
        "method": method, "stop": "reference", "eps": eps, "weights": weights,
        "n_seeds": len(runs), "n_converged": len(conv), "converged": ok,
        "effort": int(statistics.median(efforts)) if ok else max(efforts),
        "effort_min": min(efforts), "effort_max": max(efforts),
        # A time is shown only when every seed reached eps: never time a miss as a hit.
        "seconds": _median([r["seconds"] for r in runs]) if ok else None,
        "kernel_seconds": problem.kernel_seconds,
        "eta": _median(etas) if ok else None,
        "eta_worst": max(etas), "best_eta": min(etas),
        "resid_est": _median([r["resid_est"] for r in runs]),
    }
    if ok:
        if "nystrom" in method and problem.A is not None:
            timed = [r for r in runs if r.get("e2e_seconds") is not None]
            row["e2e_seconds"] = _median([r["e2e_seconds"] for r in timed])
            row["e2e_source"] = timed[0]["e2e_source"] if timed else None
        elif problem.kernel_seconds is not None:
            row["e2e_seconds"] = row["seconds"] + problem.kernel_seconds
            row["e2e_source"] = "dense G"
        else:
            row["e2e_seconds"] = row["seconds"]
            row["e2e_source"] = "dense G (given)"
    else:
        row["note"] = f"not converged: {len(conv)}/{len(runs)} seeds reached eps"
        if any(r.get("stopped_by") == "time_limit" for r in runs):
            row["note"] += " (sweep stopped by the time limit)"
    if weights == PAPER_WEIGHTS and paper_key is not None:
        row["paper_seconds"] = paper_runtime(paper_key, eps, method)
        if method == "asym_nystrom":
            row["paper_speedup"] = paper_speedup(paper_key, eps)
    return row


def run_compare(
    datasets=("cora",),
    *,
    kernel=DEFAULT_KERNEL,
    rank=DEFAULT_RANK,
    eps=DEFAULT_EPS,
    weights=DEFAULT_WEIGHTS,
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
        Tolerances on eta.
    weights : sequence of str, default=("singular_values", "relative", "uniform")
        Weightings of eta (the first is the paper's; ``"uniform"`` is the strict one).
    seeds : int, default=5
        Seeds per (problem, method, weights); the time is the median over seeds.
    center : bool, default=True
        Centre the kernel matrices.
    methods : sequence of str, optional
        Entries to race: names of ``solvers.METHODS`` or of :data:`VARIANTS`
        (default :data:`DEFAULT_METHODS`: the four solvers plus asym Nystrom with norm
        sampling). ``"rsvd"`` is needed for speedups.
    structured : bool, default=True
        Add the exact ``"tsvd (structured)"`` rows where the structured operator applies.
    residual : bool, default=True
        Add ``"<method> [stop=residual]"`` rows (first seed only) and the residual estimate at
        each found effort.
    max_effort : "auto", int, dict or None, default="auto"
        Effort cap: ``"auto"`` caps Nystrom at ``m <= min(N, M) / 4`` and RSVD at
        ``p <= min(min(N, M) / 4, 10 * rank)`` (see ``_resolve_cap``); an int caps every
        method; a dict maps method -> cap; None leaves the driver's caps (up to m = min(N, M)).
    budget_seconds : float or None, default=3.0
        Wall-time budget per (problem, method, weights) cell: once the seeds run so far used
        it up, the remaining seeds are skipped (``n_seeds`` records how many ran). The first
        seed always runs to completion, so every cell is answered. None: no budget.
    sweep_limit : float or None, default=20.0
        Wall-clock seconds one effort sweep (one seed of one cell) may take before the
        driver stops growing the effort (``solve_to_tolerance(time_limit=...)``); such rows are
        reported as not converged, with the reason in ``note``. None: only the caps bound it.
    repeats : int, default=1
        Timings per found effort inside the driver (median).
    threads : int or None, default=1
        Numba and BLAS threads for every solver (None: Numba's current count). One thread by
        default: every solver gets the same, and on a shared machine spinning BLAS/Numba
        threads make multi-threaded timings erratic (measured here: 2 threads under load took
        9x the CPU time of 1 thread for the same default run).
    random_state : int, default=0
        Root seed: the problem's seed and the source of the per-run seeds.
    problem_options : dict, optional
        Extra keyword arguments of :func:`~ksvd_bench.race.problems.build_problem`
        (e.g. ``shape`` and ``synthetic_options`` for ``"synthetic"``).
    cache_dir : str or Path, optional
        Directory of the reference-SVD cache (default ``<out>/reference_cache`` when ``out``
        is given, else no disk cache).
    out : str or Path, optional
        Directory for ``compare.json``, ``compare.csv`` and ``compare_runs.csv``.
    progress : bool, default=True
        Show a tqdm progress bar (on stderr).

    Returns
    -------
    CompareResult
    """
    import numba
    from threadpoolctl import threadpool_limits
    from tqdm.auto import tqdm

    import solvers
    from ksvd_bench.driver import reference_svd
    from ksvd_bench.metrics import WEIGHTS
    from ksvd_bench.report import machine_info, write_csv, write_json

    datasets = [datasets] if isinstance(datasets, (str, Problem)) else list(datasets)
    for d in datasets:
        if not isinstance(d, Problem) and d not in DATASETS:
            raise ValueError(f"datasets must be drawn from {DATASETS} or be Problem objects, "
                             f"got {d!r}")
    rank = _check_positive_int(rank, "rank")
    n_seeds = _check_positive_int(seeds, "seeds")
    repeats = _check_positive_int(repeats, "repeats")
    eps_list = _check_eps(eps)
    weights_list = [weights] if isinstance(weights, str) else list(dict.fromkeys(weights))
    for w in weights_list:
        if w not in WEIGHTS:
            raise ValueError(f"weights must be drawn from {WEIGHTS}, got {w!r}")
    methods = list(DEFAULT_METHODS if methods is None else dict.fromkeys(methods))
    allowed = tuple(solvers.METHODS) + tuple(VARIANTS)
    for m in methods:
        if m not in allowed:
            raise ValueError(f"methods must be drawn from {allowed}, got {m!r}")
    if sweep_limit is not None and not (sweep_limit > 0):
        raise ValueError(f"sweep_limit must be > 0 or None, got {sweep_limit!r}")
    if budget_seconds is not None and not (budget_seconds > 0):
        raise ValueError(f"budget_seconds must be > 0 or None, got {budget_seconds!r}")
    if isinstance(random_state, bool) or not isinstance(random_state, (int, np.integer)):
        raise TypeError(f"random_state must be an int (it is recorded), got {random_state!r}")
    if threads is None:
        threads = numba.get_num_threads()
    threads = _check_positive_int(threads, "threads")
    if not (max_effort is None or max_effort == "auto" or isinstance(max_effort, dict)
            or (isinstance(max_effort, (int, np.integer)) and not isinstance(max_effort, bool)
                and max_effort >= 1)):
        raise ValueError(f"max_effort must be 'auto', None, a positive int or a dict, got "
                         f"{max_effort!r}")
    run_seeds = seeds_from(random_state, n_seeds)
    if cache_dir is None and out is not None:
        cache_dir = Path(out) / "reference_cache"

    rows, runs, ref_info, caps_used, stage_seconds = [], [], {}, {}, {}
    n_cells = len(datasets) * len(methods) * len(weights_list) * n_seeds
    old_threads = numba.get_num_threads()
    bar = tqdm(total=n_cells, desc="compare", unit="run", disable=not progress, leave=False)
    try:
        numba.set_num_threads(threads)
        with threadpool_limits(limits=threads), quiet_rank_warnings():
            for item in datasets:
                if isinstance(item, Problem):
                    problem, dataset = item, item.name
                else:
                    dataset = item
                    bar.set_postfix_str(f"{dataset}: kernel")
                    problem = build_problem(dataset, kernel=kernel, center=center,
                                            random_state=int(random_state),
                                            **(problem_options or {}))
                G = problem.G
                shape = list(G.shape)
                paper_key = dataset if (dataset in ("cora", "citeseer", "pubmed")
                                        and kernel == "sne" and rank == 20) else None
                bar.set_postfix_str(f"{dataset}: reference")
                t0 = time.perf_counter()
                reference = reference_svd(G, rank, cache_dir=cache_dir)
                ref_s = np.asarray(reference.s, dtype=float)
                ref_info[dataset] = {
                    "seconds_not_charged": time.perf_counter() - t0, "s": ref_s.tolist(),
                    # Largest eta any answer can score (every vector orthogonal): a tolerance
                    # at or above it is met by anything.
                    "eta_max": {w: float(2 * np.mean(_eta_weights(ref_s, w)))
                                for w in weights_list}}
                # Residual estimates need only products with G: the exact structured operator
                # gives them cheaply where it applies, the dense matrix elsewhere.
                res_src = problem.structured_source() if problem.supports_structured else G
                _warm_up(G, rank, methods)
                base = {"dataset": dataset, "shape": shape, "kernel": problem.kernel}
                prob_rows = []
                caps_used[dataset] = {}
                for method in methods:
                    cap = _resolve_cap(max_effort, method, rank, G.shape)
                    t_method = time.perf_counter()
                    caps_used[dataset][method] = cap
                    e2e_cache = {}
                    if method == "tsvd":
                        bar.set_postfix_str(f"{dataset}: tsvd")
                        tsvd_cells, tsvd_res_rows = _tsvd_cells(
                            G, rank, eps_list, weights_list, run_seeds, reference, residual,
                            repeats, budget_seconds, base, bar, res_src)
                    for w in weights_list:
                        bar.set_postfix_str(f"{dataset}: {method}, {w}")
                        if method == "tsvd":
                            cell_runs = tsvd_cells[w]
                        else:
                            cell_runs, first_tr = _cell_runs(
                                G, rank, method, eps_list, w, run_seeds,
                                                   reference, cap, repeats, residual,
                                                   budget_seconds, sweep_limit, res_src,
                                                   base, bar)
                        for e in eps_list:
                            if "nystrom" in method and problem.A is not None:
                                _attach_e2e(problem, rank, method, cell_runs[e], reference,
                                            w, e2e_cache)
                            runs.extend(cell_runs[e])
                            row = _summarise(cell_runs[e], method=method, eps=e, weights=w,
                                             problem=problem, paper_key=paper_key)
                            prob_rows.append({**base, **row})
                        if residual:
                            if method == "tsvd":
                                prob_rows += tsvd_res_rows[w]
                            else:
                                prob_rows += _residual_rows(
                                    G, rank, method, eps_list, w, run_seeds[0], reference,
                                    cap, repeats, base, prior=first_tr,
                                    sweep_limit=sweep_limit, res_src=res_src)
                    stage_seconds.setdefault(dataset, {})[method] = (
                        time.perf_counter() - t_method)
                if structured and problem.supports_structured and "tsvd" in methods:
                    bar.set_postfix_str(f"{dataset}: {STRUCTURED_NAME}")
                    for row in _structured_rows(problem, rank, eps_list, weights_list,
                                                run_seeds, reference, res_src):
                        prob_rows.append({**base, **row})
                _add_speedups(prob_rows)
                rows += prob_rows
                del problem, G, res_src
    finally:
        bar.close()
        numba.set_num_threads(old_threads)

    for row in rows:
        row["eta_ok"] = None if row.get("eta") is None else bool(row["eta"] <= row["eps"])
    rows = [{k: row.get(k) for k in ROW_FIELDS} for row in rows]
    meta = {
        "command": "compare",
        "datasets": [d.name if isinstance(d, Problem) else d for d in datasets],
        "kernel": kernel, "rank": rank, "eps": eps_list,
        "weights": weights_list, "paper_weights": PAPER_WEIGHTS, "methods": methods,
        "center": bool(center), "n_seeds": n_seeds, "seeds": run_seeds,
        "random_state": int(random_state), "budget_seconds": budget_seconds,
        "sweep_limit": sweep_limit,
        "max_effort": caps_used, "repeats": repeats, "threads": threads,
        "blas_threads": threads, "dtype": "float64",
        "reference": ref_info,
        "wall_seconds_per_method": stage_seconds,
        "timing": ("seconds: solve at the found effort (driver, median over repeats), median "
                   "over seeds; JIT warm-up excluded; reference not charged; e2e: kernel + "
                   "solve for dense methods, lazy source + solve for Nystrom"),
        "machine": machine_info(),
    }
    result = CompareResult(rows=rows, runs=runs, meta=meta)
    if out is not None:
        out = Path(out)
        result.paths = {
            "json": str(write_json(out / "compare.json",
                                   {"meta": meta, "rows": rows, "runs": runs})),
            "csv": str(write_csv(out / "compare.csv", rows, list(ROW_FIELDS))),
            "runs_csv": str(write_csv(out / "compare_runs.csv", runs, list(RUN_FIELDS))),
        }
    return result


def _first_hit(history, eps, key):
    """Index of the first effort whose ``key`` ("eta" or "residual_estimate") is <= eps."""
    return next((i for i, h in enumerate(history) if h[key] <= eps), None)


def _seed_runs(G, rank, method, eps_list, weights, seed, reference, cap, repeats, residual,
               sweep_limit=None, res_src=None):
    """One seed of one (method, weights) cell, answered for every eps.

    With ``repeats == 1`` a single driver run to the tightest eps answers all of them: the
    driver tries efforts in order with one seed per effort, so the first effort meeting a looser
    eps is read off its history, exactly as a separate run to that eps would have found it.
    """
    from ksvd_bench.driver import solve_to_tolerance

    def call(e):
        solver, extra = _solver(method)
        return solve_to_tolerance(G, rank, solver, e, reference=reference, weights=weights,
                                  options=extra or None,
                                  random_state=seed, max_effort=cap, repeats=repeats,
                                  track_residual=residual, time_limit=sweep_limit,
                                  residual_operator=res_src)

    if repeats == 1:
        tr = call(eps_list[-1])
        answers = [(e, tr) for e in eps_list]
    else:
        answers = [(e, call(e)) for e in eps_list]
    runs = []
    for e, tr in answers:
        i = _first_hit(tr.history, e, "eta")
        conv = i is not None
        if conv:
            h = tr.history[i]
            # The driver's own timing (median over repeats) where it stopped, else the one
            # timing the history holds for that effort.
            seconds = tr.seconds if i == len(tr.history) - 1 and tr.converged else h["seconds"]
            effort, value, est = h["effort"], h["eta"], h["residual_estimate"]
        else:
            effort, value, est, seconds = tr.effort, tr.eta, tr.residual_estimate, None
        runs.append({
            "eps": e, "weights": weights, "method": method, "stop": "reference", "seed": seed,
            "effort": int(effort), "eta": float(value), "seconds": seconds,
            "converged": conv, "resid_est": None if not residual else float(est),
            "n_steps": (i + 1) if conv else len(tr.history),
            "stopped_by": "converged" if conv else tr.stopped_by,
        })
    return runs, (answers[0][1] if repeats == 1 else None)


def _residual_rows(G, rank, method, eps_list, weights, seed, reference, cap, repeats, base,
                   prior=None, sweep_limit=None, res_src=None):
    """The same solver stopped by the residual estimate: what it said and what eta really was.

    ``prior`` is the seed's run stopped on eta (to the tightest eps). The driver draws one seed
    per schedule position from ``random_state``, so a residual-stopped run with the same seed
    and schedule produces the very same answers at the same efforts: where ``prior``'s history
    already reaches an effort whose residual estimate is <= eps (or walked the whole schedule),
    it answers the question without solving again; otherwise the driver is run with
    ``stop="residual"``.
    """
    from ksvd_bench.driver import solve_to_tolerance

    final = prior
    hist = [] if prior is None else prior.history
    complete = prior is not None and not prior.converged
    if not complete and any(_first_hit(hist, e, "residual_estimate") is None for e in eps_list):
        solver, extra = _solver(method)
        final = solve_to_tolerance(G, rank, solver, eps_list[-1], weights=weights,
                                   options=extra or None,
                                   stop="residual", reference=reference, random_state=seed,
                                   max_effort=cap, repeats=repeats, time_limit=sweep_limit,
                                   residual_operator=res_src)
        hist = final.history
    rows = []
    for e in eps_list:
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
        rows.append({
            **base, "method": method + RESIDUAL_SUFFIX, "stop": "residual", "eps": e,
            "weights": weights, "n_seeds": 1, "n_converged": int(stopped), "converged": stopped,
            "effort": int(h["effort"]), "seconds": seconds, "eta": true_eta,
            "eta_worst": true_eta, "best_eta": true_eta, "resid_est": est, "note": note,
        })
    return rows


def _add_speedups(rows):
    """speedup_vs_rsvd = RSVD's time / this row's time, within the same (eps, weights)."""
    rsvd = {(r["eps"], r["weights"]): r["seconds"] for r in rows
            if r["method"] == "rsvd" and r["stop"] == "reference"}
    for r in rows:
        if r["stop"] == "residual":
            continue
        base = rsvd.get((r["eps"], r["weights"]))
        if base is not None and r.get("seconds"):
            key = "e2e_seconds" if r["stop"] == "exact" else "seconds"
            if r.get(key):
                r["speedup_vs_rsvd"] = base / r[key]


_COLUMNS = [
    ("method", "method"), ("weights", "weights"), ("n_converged", "conv"),
    ("n_seeds", "seeds"), ("effort", "effort"), ("seconds", "time s"),
    ("kernel_seconds", "kernel s"), ("e2e_seconds", "e2e s"), ("eta", "eta"),
    ("best_eta", "best eta"), ("resid_est", "resid est"), ("speedup_vs_rsvd", "vs RSVD"),
    ("paper_seconds", "paper s"), ("paper_speedup", "paper x"),
]


def format_compare(result, *, precision=3):
    """Terminal tables of a :class:`CompareResult`, one per (dataset, eps).

    Rows are grouped per method so the paper's weighting and the strict ones sit side by side;
    "conv" counts seeds that reached eps; a missing time ("-") means not converged.
    """
    from ksvd_bench.report import format_table

    meta = result.meta
    order = {w: i for i, w in enumerate(meta["weights"])}
    blocks = []
    for dataset in meta["datasets"]:
        for e in meta["eps"]:
            sel = [r for r in result.rows if r["dataset"] == dataset and r["eps"] == e]
            if not sel:
                continue
            sel.sort(key=lambda r: (r["method"].replace(RESIDUAL_SUFFIX, "~"),
                                    order.get(r["weights"], 99)))
            shape = "x".join(str(n) for n in sel[0]["shape"])
            title = (f"{dataset} ({shape}, {sel[0]['kernel'] or 'given'} kernel, r={meta['rank']}) "
                     f"eps={e:g}  [threads={meta['threads']}, float64, paper weighting = "
                     f"{meta['paper_weights']}]")
            table = format_table(sel, _COLUMNS, precision=precision, title=title)
            eta_max = meta.get("reference", {}).get(dataset, {}).get("eta_max", {})
            for w, bound in eta_max.items():
                if bound <= e:
                    table += (f"\nNOTE: with {w} weights eta <= 2 mean(w) = {bound:.3g} <= eps "
                              f"for ANY answer (even random vectors): this tolerance is vacuous.")
            blocks.append(table)
    notes = (
        "time s: solve at the found effort, median over seeds (JIT and reference excluded); "
        "'-' = not converged (best eta shown).\n"
        "e2e s: kernel + solve (tsvd, rsvd on dense G); lazy kernel source + solve (Nystrom: "
        "only evaluated blocks are charged); structured operator build + solve (exact row).\n"
        "resid est: reference-free estimate of eta at that answer; [stop=residual] rows stop "
        "on it (seed 1 only) and show the true eta reached."
    )
    return "\n\n".join(blocks + [notes])
