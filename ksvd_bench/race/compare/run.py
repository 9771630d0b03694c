"""``compare``'s orchestration: :func:`run_compare` as a sequence of named steps.

Check the arguments (:mod:`~ksvd_bench.race.compare.settings`) and the output directory, then
per problem load it (:func:`_load_problem`), compute its reference (:func:`_reference`), warm
the solvers up (:func:`ksvd_bench.race.common.warm_up`) and race every method
(:mod:`~ksvd_bench.race.compare.cells`, which runs the seeds of each cell and summarises
them), add the exact structured rows and the speedups; finally assemble the record
(:func:`_compare_meta`) and write it (:mod:`~ksvd_bench.race.compare.files`). The rules of the
race are in the package's docstring (:mod:`ksvd_bench.race.compare`).
"""

from __future__ import annotations

import datetime
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ksvd_bench.driver import effort_schedule, reference_svd
from ksvd_bench.metrics import CLUSTER_RTOL
from ksvd_bench.race.common import (
    RESIDUAL_SUFFIX,
    STRUCTURED_NAME,
    effort_option,
    entry_options,
    exact_operator,
    measure_bound,
    solver_of,
    warm_up,
)
from ksvd_bench.race.compare.cells import (
    AnswerMeasure,
    Context,
    add_speedups,
    race_method,
    structured_rows,
)
from ksvd_bench.race.compare.files import ROW_FIELDS, write_compare_files
from ksvd_bench.race.compare.settings import (
    DEFAULT_MEASURES,
    DEFAULT_SEEDS,
    check_datasets,
    check_rank_fits,
    check_settings,
)
from ksvd_bench.race.compare.table import format_compare
from ksvd_bench.race.paper_runtime import (
    DEFAULT_EPS,
    DEFAULT_KERNEL,
    DEFAULT_RANK,
    PAPER_WEIGHTS,
)
from ksvd_bench.race.problems import Problem, build_problem
from ksvd_bench.report import check_out_dir, machine_info, progress_bar
from ksvd_bench.report.status import measure_label
from ksvd_bench.threads import solver_threads

__all__ = ["CompareResult", "run_compare", "problem_reference"]

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
        return (
            f"CompareResult(datasets={m.get('datasets')}, eps={m.get('eps')}, "
            f"measures={m.get('measures')}, rows={len(self.rows)} ({n_conv} converged), "
            f"runs={len(self.runs)}, threads={m.get('threads')}, "
            f"paths={sorted(self.paths)})"
        )

    def table(self, *, wide=False):
        """The terminal table (see :func:`format_compare`)."""
        return format_compare(self, wide=wide)


# ---------------------------------------------------------------------------------------------
# step 2: load a problem, compute its reference (the solvers are warmed up by common.warm_up)
# ---------------------------------------------------------------------------------------------


def _load_problem(item, s, bar):
    """The :class:`Problem` of a dataset name (kernel built and timed), or ``item`` itself."""
    if isinstance(item, Problem):
        return item
    bar.set_postfix_str(f"{item}: kernel")
    return build_problem(
        item,
        kernel=s.kernel,
        center=s.center,
        random_state=s.random_state,
        **(s.problem_options or {}),
    )


def problem_reference(problem, rank, *, cache_dir=None):
    """The reference of a problem: its exact top-``rank`` SVD (block Krylov to 1e-10 on a lazy
    one), cached under ``cache_dir`` by the problem's definition. ``suite`` computes it once
    per problem before the problem's cells start, so that parallel cells read the cache."""
    if problem.is_lazy:  # G is never formed: block Krylov (problems.krylov_reference)
        return problem.lazy_reference(rank, cache_dir=cache_dir)
    return reference_svd(
        exact_operator(problem),
        rank,
        cache_dir=cache_dir,
        key=problem.definition,
        cluster_rtol=CLUSTER_RTOL,
    )


def _reference(problem, s, bar):
    """The exact top-r SVD of the problem (cached, never charged) and what the record keeps."""
    bar.set_postfix_str(f"{problem.name}: reference")
    t0 = time.perf_counter()
    reference = problem_reference(problem, s.rank, cache_dir=s.cache_dir)
    seconds = time.perf_counter() - t0
    ref_s = np.asarray(reference.s, dtype=float)
    norm_fro = problem.norm_fro()
    info = {
        "seconds_not_charged": seconds,
        "method": reference.info.get("method"),
        "s": ref_s[: s.rank].tolist(),
        "n_triplets": int(ref_s.size),
        "norm_fro": norm_fro,
        "cached": bool(reference.info.get("cached", False)),
        # Largest value any answer can score (e.g. every vector orthogonal): a
        # tolerance at or above it is met by anything.
        "value_max": {m: measure_bound(m, ref_s, norm_fro, s.rank) for m in s.measures},
    }
    if problem.reference_note is not None:
        info.update(
            note=problem.reference_note, estimated_error=reference.info.get("estimated_error")
        )
    return reference, info


def _resolve_cap(max_effort, method, rank, shape):
    """The effort cap of one method on one problem (None: the driver's own cap).

    ``"auto"`` keeps the default run short: Nystrom samples at most a quarter of the columns
    (the last steps of the schedule up to m = min(N, M) cost most of a full SVD), RSVD and
    generalized Nystrom oversample at most ``min(min(N, M) / 4, 10 * rank)`` (beyond that a
    sketch costs more than a truncated SVD of a dense G), block Krylov's basis spans at most a
    quarter of the columns. A solver that needs more is reported as not converged at the cap,
    with its best value.
    """
    option = effort_option(method)
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
        return max(1, effort_schedule(solver_of(method)[0], rank, shape)[-1] // 4)
    return int(max(0, min(n - rank, max(2 * rank, min(n // 4, 10 * rank)))))


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
    ref_info["warm_up_warnings"] = warm_up(problem, s.rank, s.methods)
    ctx = Context(
        problem=problem,
        G=G,
        reference=reference,
        res_src=res_src,
        score=AnswerMeasure(G, res_src, reference, s.rank),
        base={"dataset": problem.name, "shape": list(G.shape), "kernel": problem.kernel},
        paper_key=_paper_key(problem.name, s),
        settings=s,
        bar=bar,
    )
    rows, runs, caps, stage_seconds = [], [], {}, {}
    for method in s.methods:
        t0 = time.perf_counter()
        caps[method] = _resolve_cap(s.max_effort, method, s.rank, G.shape)
        method_rows, method_runs = race_method(ctx, method, caps[method])
        rows += method_rows
        runs += method_runs
        stage_seconds[method] = time.perf_counter() - t0
    if s.structured and problem.supports_structured and "tsvd" in s.methods:
        bar.set_postfix_str(f"{problem.name}: {STRUCTURED_NAME}")
        rows += structured_rows(ctx)
    add_speedups(rows)
    if problem.reference_note is not None:  # every row says its reference is not exact
        for row in rows:
            row["note"] = "; ".join(filter(None, (row.get("note"), problem.reference_note)))
    return rows, runs, ref_info, caps, stage_seconds


def _effort_param(method):
    if method == STRUCTURED_NAME:
        return "ncv"
    return effort_option(method.replace(RESIDUAL_SUFFIX, "")) or "ncv"


def _finalise_rows(rows):
    """Every row with every field of :data:`ROW_FIELDS`, in that order."""
    out = []
    for row in rows:
        row = dict(row)
        row["value_ok"] = None if row.get("value") is None else bool(row["value"] <= row["eps"])
        row["effort_param"] = _effort_param(row["method"])
        out.append({k: row.get(k) for k in ROW_FIELDS})
    return out


def _load_average():
    return list(os.getloadavg()) if hasattr(os, "getloadavg") else None


def _seeds_run(rows):
    """The seeds each raced cell ran: ``{dataset: {method: {measure: n}}}`` (its rows at every
    eps share them); fewer than ``n_seeds`` where the cell's budget ran out first."""
    out = {}
    for r in rows:
        if r["stop"] == "reference":
            out.setdefault(r["dataset"], {}).setdefault(r["method"], {})[measure_label(r)] = r[
                "n_seeds"
            ]
    return out


def _problem_settings(problem):
    """What one problem was built with, as it was built: a ``--matrix`` G has no kernel, a
    point-set G is uncentred, whatever the flags said."""
    return {
        "source": problem.source,
        "kernel": problem.kernel,
        "gamma": problem.gamma,
        "center": problem.params.get("center"),
    }


def _shared(problems, key):
    """The value every problem shares (kernel, centring), or ``"per problem"``."""
    values = {p[key] for p in problems.values()}
    return values.pop() if len(values) == 1 else "per problem"


def _compare_meta(
    s, names, ref_info, caps, stage_seconds, machine, load, command_line, rows, problems, ignored
):
    """The record of a run: settings, seeds asked and run, threads used, references, machine,
    load."""
    return {
        "command": "compare",
        "command_line": command_line,
        "datasets": names,
        # as applied (see "problems"): the flag's value only where every problem used it
        "kernel": _shared(problems, "kernel") if problems else s.kernel,
        "rank": s.rank,
        "eps": list(s.eps),
        "measures": list(s.measures),
        "paper_weights": PAPER_WEIGHTS,
        "methods": list(s.methods),
        "center": _shared(problems, "center") if problems else s.center,
        "problems": problems,
        # flags given that no problem of the run used (ksvd-bench compare), with the reason
        "ignored_flags": dict(ignored or {}),
        # seeds asked per cell; seeds_run says what each cell ran (the budget cuts them)
        "n_seeds": len(s.seeds),
        "seeds_run": _seeds_run(rows),
        # what each entry runs, asym Nystrom's core and check spelled out (the paper's
        # method is asym_nystrom_paper; asym_nystrom is the solvers' stable default)
        "method_options": {m: entry_options(m) for m in s.methods},
        "seeds": list(s.seeds),
        "random_state": s.random_state,
        "budget_seconds": s.budget_seconds,
        "sweep_limit": s.sweep_limit,
        "max_effort": caps,
        "repeats": s.repeats,
        # The counts in force while the solvers ran (machine_info is taken inside the limits).
        "threads": machine["numba_threads"],
        "blas_threads": [b.get("num_threads") for b in machine["blas"]],
        "dtype": "float64",
        "reference": ref_info,
        "wall_seconds_per_method": stage_seconds,
        "timing": (
            "seconds: solve at the found effort (driver, median over repeats), median "
            "over seeds; JIT warm-up excluded; reference not charged; e2e: kernel + "
            "solve for dense methods, lazy source + solve for Nystrom-type methods"
        ),
        "machine": machine,
        # 1-, 5- and 15-minute load averages before and after the race: timings on a loaded
        # machine are slower and noisier, so the record says how loaded it was
        "load_average": load,
        "finished_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def run_compare(
    datasets=("cora",),
    *,
    kernel=DEFAULT_KERNEL,
    rank=DEFAULT_RANK,
    eps=DEFAULT_EPS,
    weights=DEFAULT_MEASURES,
    seeds=DEFAULT_SEEDS,
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
    command_line=None,
    ignored_flags=None,
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
    weights : sequence of str, default=("uniform", "lowrank")
        Accuracy measures, one row-group each: eta under a weighting (``"singular_values"``
        is the paper's, ``"relative"``, ``"uniform"`` the strict one) or ``"lowrank"``, the
        gap-robust ``||G - U U^T G||_F <= (1 + eps) ||G - G_r||_F`` of
        :func:`ksvd_bench.metrics.lowrank_error`. The default is the strict pair
        (:data:`~ksvd_bench.race.compare.settings.DEFAULT_MEASURES`); the full grid is
        :data:`~ksvd_bench.race.compare.settings.FULL_MEASURES` (``ksvd-bench compare
        --full``).
    seeds : int, default=3
        Seeds per (problem, method, measure); the time is the median over seeds.
    center : bool, default=True
        Centre the kernel matrices.
    methods : sequence of str, optional
        Entries to race: names of ``solvers.METHODS`` or of :data:`VARIANTS` (default
        :data:`DEFAULT_METHODS`: every solver, the paper's asym Nystrom
        (``asym_nystrom_paper``: paper's core, no check) beside the solvers' default
        (``asym_nystrom``: stable core + one check pass), and asym Nystrom with norm, ARP,
        RPCholesky and ACA sampling). ``asym_nystrom_rpcholesky`` needs a problem built from
        points (``rare-clusters``); elsewhere its rows say "n/a" and nothing is run.
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
        it up, the remaining seeds are skipped. Each row records how many ran
        (``n_seeds``, of ``n_seeds_asked``; the record's ``seeds_run`` per cell), its note
        says so, and the headline and the report mark it. The first seed always runs to
        completion, so every cell is answered. None: no budget.
    sweep_limit : float or None, default=20.0
        Wall-clock seconds one effort sweep (one seed of one cell) may take before the
        driver stops growing the effort (``solve_to_tolerance(time_limit=...)``); such rows are
        reported as not converged, with the reason in ``note``. None: only the caps bound it.
    repeats : int, default=1
        Timings per found effort inside the driver (median).
    threads : int or None, default=1
        Numba and BLAS threads for every solver, at most
        :func:`ksvd_bench.threads.max_threads` (None: Numba's current count). One thread by
        default: every solver gets the same, and on a shared machine spinning BLAS/Numba
        threads make multi-threaded timings erratic (measured here: 2 threads under load took
        9x the CPU time of 1 thread for the same default run).
    random_state : int, default=0
        Root seed: the problem's seed and the source of the per-run seeds.
    problem_options : dict, optional
        Extra keyword arguments of :func:`~ksvd_bench.race.problems.build_problem`
        (e.g. ``shape`` and ``synthetic_options`` for ``"synthetic"``, ``shape`` for
        ``"rare-clusters"``).
    cache_dir : str or Path, optional
        Directory of the reference-SVD cache (default ``<out>/reference_cache`` when ``out``
        is given, else no disk cache). Entries are keyed by the problem's definition.
    out : str or Path, optional
        Directory for ``compare.json``, ``compare.csv`` and ``compare_runs.csv``; checked
        (created, probed with a test file) before any work, written atomically after.
    progress : bool, default=True
        Show a progress bar (on stderr; counts and elapsed time, no ETA).
    command_line : str, optional
        The command that regenerates this run, kept in the record (``ksvd-bench compare``
        passes its own).
    ignored_flags : dict, optional
        Flags of the command that no problem used (flag -> why), kept in the record as
        ``meta["ignored_flags"]``. What each problem was built with (source, kernel, gamma,
        centring) is recorded either way, in ``meta["problems"]``.

    Returns
    -------
    CompareResult

    Raises
    ------
    ValueError
        Naming the argument: an unknown dataset, method or measure, a non-positive rank,
        seeds, repeats, budget or limit, an eps outside (0, 1) (at eps >= 1 every answer is
        right), more threads than Numba's pool, an ``out`` that cannot be written.
    """
    datasets = check_datasets(datasets)
    if cache_dir is None and out is not None:
        cache_dir = Path(out) / "reference_cache"
    s = check_settings(
        kernel=kernel,
        rank=rank,
        eps=eps,
        weights=weights,
        seeds=seeds,
        center=center,
        methods=methods,
        structured=structured,
        residual=residual,
        max_effort=max_effort,
        budget_seconds=budget_seconds,
        sweep_limit=sweep_limit,
        repeats=repeats,
        threads=threads,
        random_state=random_state,
        problem_options=problem_options,
        cache_dir=cache_dir,
    )
    check_rank_fits(datasets, s.rank, problem_options)
    if out is not None:  # found now, not after minutes of work
        out = check_out_dir(out, "out")

    rows, runs, ref_info, caps, stage_seconds, built = [], [], {}, {}, {}, {}
    names = [d.name if isinstance(d, Problem) else d for d in datasets]
    n_runs = len(datasets) * len(s.methods) * len(s.measures) * len(s.seeds)
    bar = progress_bar(total=n_runs, desc="compare", unit="runs", enabled=progress)
    load = {"before": _load_average()}
    # no warning filter: the driver and the steps record every warning per answer
    with bar, solver_threads(s.threads):
        machine = machine_info()
        for item in datasets:
            problem = _load_problem(item, s, bar)
            built[problem.name] = _problem_settings(problem)
            (
                p_rows,
                p_runs,
                ref_info[problem.name],
                caps[problem.name],
                stage_seconds[problem.name],
            ) = _race_problem(problem, s, bar)
            rows += p_rows
            runs += p_runs
            del problem  # a dense G per problem: let it go before the next one is built

    load["after"] = _load_average()
    rows = _finalise_rows(rows)
    result = CompareResult(
        rows=rows,
        runs=runs,
        meta=_compare_meta(
            s,
            names,
            ref_info,
            caps,
            stage_seconds,
            machine,
            load,
            command_line,
            rows,
            built,
            ignored_flags,
        ),
    )
    if out is not None:
        result.paths = write_compare_files(result, out)
    return result
