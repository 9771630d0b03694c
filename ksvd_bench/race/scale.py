"""The scale study: cost against size, one command (``ksvd-bench scale``).

Three families of problems, each at a ladder of sizes, each solved for its top-r singular
triplets by a list of methods:

* part ``"a"``: synthetic directed graphs (:func:`~ksvd_bench.datasets.make_directed_graph`),
  N = 2e4 to 1e6 nodes, centred SNE kernel of the adjacency matrix through
  ``KernelSource(A, "sne")`` (the exact structured operator, on the CPU);
* part ``"b"``: two point sets from shared clusters
  (:func:`~ksvd_bench.datasets.make_clustered_points`, d = 64, K = r clusters, so G has a
  spectral gap at r), N = M = 5e3 to 1e5, uncentred SNE kernel through the lazy
  ``KernelSource.from_points`` (G is never formed: 80 GB at N = M = 1e5), on the CPU or, with
  ``device="cuda"``, on one GPU;
* part ``"c"``: the rare-cluster family of issue 15
  (:func:`~ksvd_bench.datasets.make_rare_clusters`, d = 64, r clusters of which 30% are rare,
  weight 0.02), N = M = 6e3 to 1e5, the same lazy uncentred SNE source with the family's gamma:
  where uniform sampling misses structure. Its default methods add the asym Nystrom sampling
  entries (ARP, RPCholesky, ACA; :data:`SAMPLING_METHODS`). ``parts="both"`` (the default)
  runs a and b; ``"all"`` adds c.

Every cell (part, size, method) runs in a fresh process with a wall-clock and a memory limit
(:mod:`ksvd_bench.race._scale_cells`): its seconds (set-up of the source plus the solve; CPU
seconds beside them), passes over G and set-up passes, entries of G evaluated, peak resident
memory, the warnings of its solve (counted, never silenced) and whether the solver trusted
its answer, and its subspace and singular-value errors against a reference top-r (exact
where the structured operator or a dense LAPACK SVD can give it, else a high-effort block
Krylov answer, labelled, with its Wedin estimate). References are cached under
``<out>/reference_cache`` by problem (part, size, rank, seed, dtype).

Growth exponents are fitted only where the cells support them
(:mod:`ksvd_bench.race._scale_fit`); :func:`best_cells` names the fastest cell whose
subspace and singular-value errors are within :data:`ACCURACY_TARGET` and whose answer was
not marked unreliable. The methods are :class:`MethodRunner` objects in :data:`RUNNERS`, each
with its fixed efforts per part (:func:`register_runner` adds one); a Dask ``client`` or
``scheduler`` address is passed through to the sources and the runners.

This module orchestrates; the cells and isolation live in ``_scale_cells``, the files in
``_scale_files``, the terminal text in ``_scale_table`` (:func:`format_scale`).
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ksvd_bench._threads import DEFAULT_THREADS
from ksvd_bench.race._scale_cells import _Runner, _score, compute_reference, run_cell, run_isolated
from ksvd_bench.race._scale_files import load_merge_base, merge_rows, plot_scale, write_scale
from ksvd_bench.race._scale_fit import best_cells, fit_all, fit_exponent
from ksvd_bench.race._scale_problems import (
    ACCURACY_TARGET,
    DEFAULT_METHODS,
    DEFAULT_PARTS,
    DEFAULT_RANK,
    DEFAULT_SIZES,
    DEFAULT_TIME_LIMIT,
    DENSE_REFERENCE_MAX_ENTRIES,
    DEVICES,
    PART_TITLES,
    PARTS,
    POINT_PARTS,
    POINTS_DIM,
    QUICK_DENSE_REFERENCE_MAX_ENTRIES,
    QUICK_SIZES,
    QUICK_TIME_LIMIT,
    REFERENCE_KRYLOV,
    REFERENCE_TARGET_ERROR,
    ROW_FIELDS,
    SAMPLING_METHODS,
    ProblemSpec,
    ScaleProblem,
    effort_label,
    make_data,
    make_source,
    setup_passes,
)
from ksvd_bench.race._scale_table import format_scale

__all__ = [
    "PARTS",
    "DEFAULT_PARTS",
    "POINT_PARTS",
    "SAMPLING_METHODS",
    "DEVICES",
    "DEFAULT_SIZES",
    "QUICK_SIZES",
    "DEFAULT_METHODS",
    "RUNNERS",
    "MethodRunner",
    "SolverCall",
    "ProblemSpec",
    "ScaleProblem",
    "ScaleResult",
    "register_runner",
    "run_scale",
    "run_cell",
    "compute_reference",
    "run_isolated",
    "make_data",
    "make_source",
    "fit_exponent",
    "best_cells",
    "format_scale",
    "plot_scale",
    "write_scale",
    # constants the command line and the benchmarks read
    "ACCURACY_TARGET", "DEFAULT_RANK", "DEFAULT_TIME_LIMIT", "DENSE_REFERENCE_MAX_ENTRIES",
    "PART_TITLES", "POINTS_DIM", "QUICK_DENSE_REFERENCE_MAX_ENTRIES", "QUICK_TIME_LIMIT",
    "REFERENCE_KRYLOV", "REFERENCE_TARGET_ERROR", "ROW_FIELDS", "effort_label", "setup_passes",
]

@dataclass(frozen=True)
class SolverCall:
    """``solve(problem, rank, options, random_state)`` through ``solvers.svd(method=...)``."""

    method: str

    def __call__(self, problem, rank, options, random_state):
        import solvers

        return solvers.svd(problem.source(), rank, method=self.method,
                           random_state=random_state, **options)


def _effort_tsvd(spec):
    return {}


def _effort_rsvd(spec):
    # part b has a wide gap at r: no power iteration needed for 1e-2 (2 passes)
    return {"n_oversamples": 10, "n_iter": 2 if spec.part == "a" else 0}


def _effort_block_krylov(spec):
    return {"n_oversamples": 10, "n_iter": 2 if spec.part == "a" else 1}


def _effort_generalized_nystrom(spec):
    return {"n_oversamples": 20}


def _effort_asym_nystrom(spec):
    # 400 samples (the reproduction); at least 2 r, at most half the matrix
    return {"n_samples": int(min(max(400, 2 * spec.rank), min(spec.n, spec.m) // 2))}


@dataclass(frozen=True)
class SampledEffort:
    """Effort of a sampling entry: ``multiple * r`` samples (at most half the matrix) and no
    check pass, so that its passes and entries are the sampler's own (issue 15's race by
    entries: ARP one pass plus the chosen rows and columns, RPCholesky no pass). A class, not
    a closure: isolated cells receive their runner by pickle."""

    multiple: int

    def __call__(self, spec):
        m = int(min(self.multiple * spec.rank, min(spec.n, spec.m) // 2))
        return {"n_samples": m, "check_passes": 0}


#: effort of each sampling entry: samples per r (the stable core reads 2 m rows and m columns;
#: RPCholesky reads (m + 1)(N + M) entries for m pivots)
_effort_arp = SampledEffort(2)
_effort_rpcholesky = SampledEffort(8)
_effort_aca = SampledEffort(4)


@dataclass(frozen=True)
class SamplingCall:
    """``solvers.svd(source, method="asym_nystrom", sampling=...)`` (a picklable runner)."""

    sampling: str

    def __call__(self, problem, rank, options, random_state):
        import solvers

        return solvers.svd(problem.source(), rank, method="asym_nystrom",
                           sampling=self.sampling, random_state=random_state, **options)


@dataclass(frozen=True)
class MethodRunner:
    """One method of the study: how to solve a cell, at which effort, on which parts.

    Attributes
    ----------
    name : str
        The name used by ``--methods`` and in the tables.
    solve : callable
        ``solve(problem, rank, options, random_state) -> SVDResult``; ``problem`` is a
        :class:`ScaleProblem` (``problem.source()``, ``problem.data``, ``problem.client``).
        The answer's ``info`` should carry ``n_passes`` (whole passes over G). Must be a
        module-level (picklable) callable: isolated cells receive the runner by pickle.
    effort : callable
        ``effort(spec) -> dict`` of the options passed to ``solve`` (fixed per part and
        size: the study measures cost at a fixed effort, not an effort sweep).
    parts : tuple of str
        The parts it applies to.
    description : str
    """

    name: str
    solve: Callable
    effort: Callable
    parts: tuple = PARTS
    description: str = ""


def _solver_runner(method, effort, description):
    return MethodRunner(method, SolverCall(method), effort, PARTS, description)


#: the methods of the study, by name (extend with :func:`register_runner`)
RUNNERS = {
    "tsvd": _solver_runner("tsvd", _effort_tsvd,
                           "ARPACK, or the source's exact path (part a: exact structured)"),
    "rsvd": _solver_runner("rsvd", _effort_rsvd, "randomized SVD (2 q + 2 passes)"),
    "block_krylov": _solver_runner("block_krylov", _effort_block_krylov,
                                   "randomized block Krylov (2 q + 2 passes, Musco & Musco "
                                   "Alg. 2)"),
    "generalized_nystrom": _solver_runner("generalized_nystrom", _effort_generalized_nystrom,
                                          "generalized Nystrom (one pass through sketch)"),
    "asym_nystrom": _solver_runner("asym_nystrom", _effort_asym_nystrom,
                                   "asymmetric Nystrom, uniform sampling (solvers' default: "
                                   "stable core, 2 m rows and m columns, one check pass)"),
    "asym_nystrom_arp": MethodRunner(
        "asym_nystrom_arp", SamplingCall("arp"), _effort_arp, PARTS,
        "asym Nystrom, adaptive randomized pivoting on the one-pass sketch (stable core, "
        "m = 2 r, no check pass: one pass plus 2 m rows and m columns)"),
    "asym_nystrom_rpcholesky": MethodRunner(
        "asym_nystrom_rpcholesky", SamplingCall("rpcholesky"), _effort_rpcholesky,
        POINT_PARTS,
        "asym Nystrom, randomly pivoted Cholesky on the joint PSD kernel of the points "
        "(m = 8 r pivots, no check pass; reads (m + 1)(N + M) entries, no pass; point "
        "parts only; the source's SNE set-up pass is in setup_seconds/setup_passes)"),
    "asym_nystrom_aca": MethodRunner(
        "asym_nystrom_aca", SamplingCall("aca"), _effort_aca, PARTS,
        "asym Nystrom, adaptive cross approximation with partial pivoting (ACA+; stable "
        "core, m = 4 r, no check pass): the classical baseline"),
}


def _solve_svd_compressed(problem, rank, options, random_state):
    """Dask's own ``svd_compressed`` on G as ``map_blocks`` tiles of the same source."""
    from ksvd_bench.kernels.distributed import svd_compressed

    return svd_compressed(problem.source(), rank, random_state=random_state, **options)


# Dask's peer of rsvd, with rsvd's power iterations and oversampling (2 q + 2 passes)
RUNNERS["svd_compressed"] = MethodRunner(
    "svd_compressed", _solve_svd_compressed, _effort_rsvd, POINT_PARTS,
    "dask.array.linalg.svd_compressed on map_blocks kernel tiles, rsvd's q and p")
#: methods that need Dask: ``ksvd-bench scale`` starts a LocalCluster for them when it is
#: given no --scheduler, and adds them to part b's methods when it is given one
DASK_METHODS = ("svd_compressed",)


def register_runner(runner, *, replace=False):
    """Add a :class:`MethodRunner` to :data:`RUNNERS` (``--methods`` then accepts its name).

    Parameters
    ----------
    runner : MethodRunner
    replace : bool, default=False
        Replace a runner of the same name instead of refusing it.
    """
    if not isinstance(runner, MethodRunner):
        raise TypeError(f"runner must be a MethodRunner, got {type(runner).__name__}")
    if runner.name in RUNNERS and not replace:
        raise ValueError(f"a runner named {runner.name!r} exists; pass replace=True")
    bad = [p for p in runner.parts if p not in PARTS]
    if bad or not runner.parts:
        raise ValueError(f"runner.parts must be a non-empty subset of {PARTS}, got "
                         f"{runner.parts!r}")
    RUNNERS[runner.name] = runner
    return runner




# --------------------------------------------------------------------------- the study


@dataclass
class ScaleResult:
    """Outcome of :func:`run_scale`.

    Attributes
    ----------
    rows : list of dict
        One per cell (:data:`ROW_FIELDS`); ``status`` is ``"ok"``, ``"timeout"``,
        ``"error"``, ``"memory"`` (over the memory limit) or ``"skipped"`` (over a limit at
        a smaller size).
    exponents : list of dict
        One per (part, method): ``exponent`` (slope of log seconds against log N, None where
        the cells cannot support a fit), ``solve_exponent`` (the same for the solve alone),
        ``fit_note`` (what was fitted, or why not), ``n_points``, ``sizes``.
    references : list of dict
        One per (part, size): how its reference was made (``label``, ``kind``, seconds).
    meta : dict
        Settings, efforts, machine.
    paths : dict
        Files written (``"csv"``, ``"json"``, ``"exponents_csv"``, ``"png"``).
    """

    rows: list
    exponents: list
    references: list
    meta: dict
    paths: dict = field(default_factory=dict)


def _check_choice_list(values, allowed, name):
    values = tuple(values)
    bad = [v for v in values if v not in allowed]
    if bad or not values:
        raise ValueError(f"{name} must be a non-empty list of {tuple(allowed)}, got {values!r}")
    return values


def _check_settings(parts, sizes, methods, rank, time_limit, dtype, device="cpu"):
    if isinstance(parts, str):
        parts = {"both": DEFAULT_PARTS, "all": PARTS}.get(parts, (parts,))
    parts = _check_choice_list(parts, PARTS, "parts")
    if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)) or rank < 1:
        raise ValueError(f"rank must be a positive int, got {rank!r}")
    sizes = dict(sizes or {})
    methods = dict(methods or {})
    for part in parts:
        sz = tuple(int(n) for n in sizes.get(part, DEFAULT_SIZES[part]))
        if not sz or any(n < 4 * rank for n in sz):
            raise ValueError(f"sizes of part {part} must be >= 4 * rank = {4 * rank}, got "
                             f"{sz!r}")
        sizes[part] = tuple(sorted(set(sz)))
        ms = _check_choice_list(methods.get(part, DEFAULT_METHODS[part]), RUNNERS, "methods")
        wrong = [mm for mm in ms if part not in RUNNERS[mm].parts]
        if wrong:
            raise ValueError(f"methods {wrong} do not apply to part {part}")
        methods[part] = ms
    if time_limit is not None and not (math.isfinite(time_limit) and time_limit > 0):
        raise ValueError(f"time_limit must be a finite positive number, got {time_limit!r}")
    if np.dtype(dtype) not in (np.float32, np.float64):
        raise ValueError(f"dtype must be float32 or float64, got {dtype!r}")
    if device not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES}, got {device!r}")
    return parts, sizes, methods


def _check_memory_limit(memory_limit):
    """Bytes; None means half the physical memory."""
    if memory_limit is None:
        import psutil

        return int(psutil.virtual_memory().total // 2)
    if isinstance(memory_limit, bool) or not isinstance(memory_limit, (int, float, np.number)) \
            or not (math.isfinite(memory_limit) and memory_limit > 0):
        raise ValueError(f"memory_limit must be a positive number of bytes, got "
                         f"{memory_limit!r}")
    return int(memory_limit)



def _machine_at(threads):
    """:func:`machine_info` under the thread counts the cells ran with, as the other studies."""
    from ksvd_bench._threads import solver_threads
    from ksvd_bench.report import machine_info

    with solver_threads(threads):
        return machine_info()


def run_scale(
    parts="both",
    *,
    sizes=None,
    methods=None,
    rank=DEFAULT_RANK,
    random_state=0,
    threads=DEFAULT_THREADS,
    time_limit=DEFAULT_TIME_LIMIT,
    memory_limit=None,
    dtype="float64",
    device="cpu",
    reference="auto",
    dense_reference_max_entries=DENSE_REFERENCE_MAX_ENTRIES,
    isolate=True,
    client=None,
    scheduler=None,
    out=None,
    merge=False,
    progress=True,
):
    """Measure every method's cost against the problem size, and write the results.

    Parameters
    ----------
    parts : {"a", "b", "c", "both", "all"} or sequence of them, default="both"
        ``"both"``: a and b (graphs, clustered points); ``"all"``: a, b and c (rare
        clusters).
    sizes : dict, optional
        part -> sizes N (M = N); default :data:`DEFAULT_SIZES`. Each at least ``4 * rank``.
    methods : dict, optional
        part -> names in :data:`RUNNERS`; default :data:`DEFAULT_METHODS`.
    rank : int, default=20
        r; the points of parts b and c have r clusters (c: 30% of them rare).
    random_state : int, default=0
        Seed of the data (every method sees the same problem) and of the methods.
    threads : int or None, default=1
        Numba and BLAS threads of every cell, at most Numba's pool (None: Numba's current
        count). One by default, as in every study (steady timings on a shared machine).
    time_limit : float or None, default=600
        Wall-clock seconds per cell (process start, warm-up and data included); a cell over
        it is stopped and reported ``"timeout"``, and the method is skipped at larger sizes
        of that part. A reference gets 4x as long.
    memory_limit : float or None, optional
        Resident bytes per cell (and reference); a cell over it is stopped and reported
        ``"memory"``, and the method skipped at larger sizes. Default: half the machine's
        physical memory (so that one cell cannot exhaust a shared machine). Isolated cells
        only.
    dtype : {"float64", "float32"}, default="float64"
        Storage dtype of the sources.
    device : {"cpu", "cuda"}, default="cpu"
        Where the lazy kernel of parts b and c runs
        (``KernelSource.from_points(..., device=...)``); part a's structured operator runs
        on the CPU either way (and RPCholesky needs the points on the CPU).
    reference : {"auto", "none"}, default="auto"
        ``"none"`` skips the references (no subspace errors).
    dense_reference_max_entries : int, default=25e6
        ``N * M`` up to which a lazy problem's reference is a dense LAPACK SVD; above it,
        block Krylov (:data:`REFERENCE_KRYLOV`, labelled, with its estimated error).
    isolate : bool, default=True
        Run each cell and reference in a fresh process (peak RSS per cell, time limits).
        In process (False) peak RSS is not measured and time limits are not enforced.
    client : distributed.Client, optional
        Passed to the sources and runners (isolated cells connect to its scheduler).
    scheduler : str, optional
        Address of a Dask scheduler for the cells, when no ``client`` is given.
    out : str or Path, optional
        Directory for ``scale.csv``, ``scale.json``, ``scale_exponents.csv``, ``scale.png``
        and the reference cache (``reference_cache/``, reused by later runs).
    merge : bool, default=False
        Keep the cells of an earlier ``scale.json`` in ``out`` that this run does not redo
        (e.g. rerun only the largest cells), and fit the exponents on all of them. The file
        is read and checked before any cell is computed: an unreadable one, or one made for
        another rank, seed, dtype or device, is refused (ValueError).
    progress : bool, default=True
        Progress bar on stderr.

    Returns
    -------
    ScaleResult
    """
    from ksvd_bench._threads import check_threads
    from ksvd_bench.report import progress_bar

    parts, sizes, methods = _check_settings(parts, sizes, methods, rank, time_limit, dtype,
                                            device)
    if reference not in ("auto", "none"):
        raise ValueError(f"reference must be 'auto' or 'none', got {reference!r}")
    threads = check_threads(threads, "threads")
    memory_limit = _check_memory_limit(memory_limit)
    dtype = np.dtype(dtype).name
    seed = int(random_state)
    # an earlier file to merge onto is read and checked now, not after the cells
    earlier = (load_merge_base(out, {"rank": rank, "seed": seed, "dtype": dtype,
                                     "device": device})
               if merge and out is not None else None)
    n_cells = sum(len(sizes[p]) * len(methods[p]) for p in parts)
    cache_dir = None if out is None else Path(out) / "reference_cache"
    rows, references = [], []
    with tempfile.TemporaryDirectory(prefix="ksvd_scale_") as workdir, \
            progress_bar(total=n_cells, desc="scale", enabled=progress, unit="cell") as bar:
        runner = _Runner(threads=threads, time_limit=time_limit,
                         memory_limit=memory_limit, isolate=isolate,
                         client=client, scheduler=scheduler,
                         dense_max=dense_reference_max_entries, workdir=workdir,
                         reference=reference)
        for part in parts:
            gave_up = {}
            for n in sizes[part]:
                spec = ProblemSpec(part, n, n, rank, seed, dtype,
                                   device if part in POINT_PARTS else "cpu")
                bar.set_postfix_str(f"{part} N={n} reference")
                ref, ref_info = runner.reference_for(spec, cache_dir)
                references.append({"part": part, "n": n, **ref_info})
                for name in methods[part]:
                    bar.set_postfix_str(f"{part} N={n} {name}")
                    if name in gave_up:
                        row = {**spec.fields, "method": name,
                               "effort": effort_label(RUNNERS[name].effort(spec)),
                               "status": "skipped",
                               "error": f"{gave_up[name]} at a smaller size"}
                    else:
                        row, answer = runner.cell(spec, RUNNERS[name], seed)
                        if row["status"] in ("timeout", "memory"):
                            gave_up[name] = row["status"]
                        if answer is not None and ref is not None:
                            _score(row, answer, ref, rank)
                    row["reference"] = ref_info["label"]
                    rows.append(row)
                    bar.update(1)
    rows, references = merge_rows(earlier, rows, references)
    meta = {
        "command": "scale", "parts": list(parts), "sizes": {p: list(sizes[p]) for p in parts},
        "methods": {p: list(methods[p]) for p in parts}, "rank": rank, "seed": seed,
        "threads": threads, "time_limit": time_limit, "memory_limit": memory_limit,
        "dtype": dtype, "device": device, "isolate": bool(isolate),
        "reference": reference, "dense_reference_max_entries": dense_reference_max_entries,
        "reference_krylov": dict(REFERENCE_KRYLOV),
        "reference_target_error": REFERENCE_TARGET_ERROR, "points_dim": POINTS_DIM,
        "kernels": {"a": "sne, centred, KernelSource(A) (structured)",
                    "b": "sne, uncentred, KernelSource.from_points, gamma from "
                         "make_clustered_points",
                    "c": "sne, uncentred, KernelSource.from_points, gamma from "
                         "make_rare_clusters (r clusters, 30% rare, weight 0.02)"},
        "efforts": {p: {m: effort_label(RUNNERS[m].effort(ProblemSpec(p, n, n, rank, seed)))
                        for m in methods[p] for n in sizes[p][-1:]} for p in parts},
        "dask": None if (client is None and scheduler is None) else
        (scheduler or client.scheduler.address),
        "merged": bool(merge), "machine": _machine_at(threads),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }
    result = ScaleResult(rows=rows, exponents=fit_all(rows), references=references, meta=meta)
    if out is not None:
        result.paths = write_scale(result, out)
    return result


