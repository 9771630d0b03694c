"""The scale study: cost against size, one command (``ksvd-bench scale``).

Two families of problems, each at a ladder of sizes, each solved for its top-r singular
triplets by a list of methods:

* part ``"a"``: synthetic directed graphs (:func:`~ksvd_bench.datasets.make_directed_graph`),
  N = 2e4 to 1e6 nodes, centred SNE kernel of the adjacency matrix through
  ``KernelSource(A, "sne")`` (the exact structured operator);
* part ``"b"``: two point sets from shared clusters
  (:func:`~ksvd_bench.datasets.make_clustered_points`, d = 64, K = r clusters, so G has a
  spectral gap at r), N = M = 5e3 to 1e5, uncentred SNE kernel through the lazy
  ``KernelSource.from_points`` (G is never formed: 80 GB at N = M = 1e5).

Every cell (part, size, method) runs in a fresh process (``multiprocessing`` forkserver where
the platform has it, else spawn) with a wall-clock and a memory limit, so that its peak
resident memory is its own (``getrusage(RUSAGE_SELF).ru_maxrss`` of that process, imports and
data included) and a slow, swelling or crashing cell cannot take the study (or a shared
machine) down. A warm-up solve of a small problem of the same kind first loads Numba's
caches. A cell reports its seconds (set-up of the source, i.e. the SNE normalisers' pass, plus
the solve; CPU seconds beside them, steadier on a shared machine), its passes over G
(``info["n_passes"]``) and set-up passes, the entries of G it evaluated, its peak RSS, and
its subspace error (sine of the largest principal angle, :func:`ksvd_bench.metrics.
subspace_error`, the larger of the left and right one) against a reference top-r:

* exact: the structured operator's own exact SVD (part a), or a dense LAPACK SVD where G has
  at most ``dense_reference_max_entries`` entries;
* otherwise a high-effort block Krylov answer (:data:`REFERENCE_KRYLOV`), labelled as such,
  with a residual-based (Wedin) estimate of its own subspace error; its depth grows until
  that estimate is at most :data:`REFERENCE_TARGET_ERROR` (1e-8).

References are cached under ``<out>/reference_cache`` by problem (part, size, rank, seed,
dtype): delete it after changing a generator or a kernel.

The growth exponent of each method is the least-squares slope of log(seconds) against
log(N); :func:`best_cells` names the fastest cell within :data:`ACCURACY_TARGET` per size.
The methods are :class:`MethodRunner` objects in :data:`RUNNERS`, each with its fixed
efforts per part (:func:`register_runner` adds one, e.g. a runner for Dask's
``svd_compressed``); a Dask ``client`` (in process) or ``scheduler`` address (isolated cells
connect to it) is passed through to the sources and the runners.

The study computes and returns data; :func:`format_scale` makes the terminal text and
:func:`plot_scale` the log-log figure.
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing
import os
import platform
import resource
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

__all__ = [
    "PARTS",
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
    "fit_exponent",
    "best_cells",
    "format_scale",
    "plot_scale",
]

PARTS = ("a", "b")
PART_TITLES = {
    "a": "(a) directed graphs, centred SNE, structured operator",
    "b": "(b) two clustered point sets (d = 64), SNE, lazy from_points",
}
DEFAULT_SIZES = {
    "a": (20_000, 50_000, 100_000, 200_000, 500_000, 1_000_000),
    "b": (5_000, 10_000, 20_000, 50_000, 100_000),
}
#: CI sizes: the whole ``--quick`` study (27 cells, each in its own process) takes a minute or
#: two on 2 cores
QUICK_SIZES = {"a": (2_000, 4_000, 8_000), "b": (1_000, 2_000, 4_000)}
DEFAULT_METHODS = {
    "a": ("tsvd", "rsvd", "block_krylov", "generalized_nystrom", "asym_nystrom"),
    "b": ("rsvd", "block_krylov", "generalized_nystrom", "asym_nystrom"),
}
DEFAULT_RANK = 20
#: the subspace error the issue asks of the best method (drawn in the figure)
ACCURACY_TARGET = 1e-2
#: dimension of the point sets of part b
POINTS_DIM = 64
DEFAULT_TIME_LIMIT = 600.0
QUICK_TIME_LIMIT = 120.0
#: N * M up to which the reference is a dense LAPACK SVD (5000 x 5000, 200 MB)
DENSE_REFERENCE_MAX_ENTRIES = 25_000_000
#: the same for ``--quick``: its largest part-b size then exercises the block Krylov reference
QUICK_DENSE_REFERENCE_MAX_ENTRIES = 4_000_000
#: extra reference triplets beyond r, so that a cluster of singular values cut by r is seen
REFERENCE_EXTRA = 10
#: the reference where G is neither structured nor small: block Krylov with this
#: oversampling, at the first depth (number of iterations) whose residual-based estimate of
#: its own subspace error is at most REFERENCE_TARGET_ERROR
REFERENCE_KRYLOV = {"n_oversamples": 10, "n_iter": (2, 4, 8)}
REFERENCE_TARGET_ERROR = 1e-8
#: the effort options shown in the tables, with their short labels
EFFORT_LABELS = {"n_samples": "m", "n_oversamples": "p", "n_iter": "q", "ncv": "ncv"}
#: every cell's row, in table order
ROW_FIELDS = (
    "part", "n", "m", "method", "effort", "status", "seconds", "setup_seconds", "solve_seconds",
    "cpu_seconds", "passes", "setup_passes", "entries", "peak_rss_mb", "base_rss_mb",
    "subspace_error", "sin_u", "sin_v", "sv_error", "reference", "data_seconds", "threads",
    "seed", "warnings", "error",
)


# --------------------------------------------------------------------------- problems


@dataclass(frozen=True)
class ProblemSpec:
    """One problem of the study, fully determined by these fields (and the library).

    Attributes
    ----------
    part : {"a", "b"}
    n, m : int
        Shape of G (``n == m`` for both parts).
    rank : int
        r; part b draws ``rank`` clusters.
    seed : int
        Seed of the data (graph or points).
    dtype : {"float64", "float32"}
        Storage dtype of the source.
    """

    part: str
    n: int
    m: int
    rank: int
    seed: int
    dtype: str = "float64"

    @property
    def key(self):
        """A file-name-safe identifier (the reference cache's file name)."""
        return f"{self.part}_n{self.n}_m{self.m}_r{self.rank}_s{self.seed}_{self.dtype}"


def make_data(spec):
    """The problem's data: ``{"adjacency": A}`` (part a) or ``{"X", "Z", "gamma"}`` (part b)."""
    from ksvd_bench.datasets import make_clustered_points, make_directed_graph

    if spec.part == "a":
        return {"adjacency": make_directed_graph(spec.n, random_state=spec.seed).adjacency}
    points = make_clustered_points(spec.n, spec.m, POINTS_DIM, spec.rank,
                                   random_state=spec.seed, dtype=spec.dtype)
    return {"X": points.X, "Z": points.Z, "gamma": points.gamma}


def make_source(spec, data, client=None):
    """The lazy matrix source of the problem (part a: structured; part b: ``from_points``)."""
    from ksvd_bench.kernels import KernelSource

    if spec.part == "a":
        return KernelSource(data["adjacency"], "sne", dtype=spec.dtype, client=client)
    return KernelSource.from_points(data["X"], data["Z"], "sne", gamma=data["gamma"],
                                    center=False, dtype=spec.dtype, client=client)


def setup_passes(source):
    """Whole passes over G that building ``source`` made (SNE normalisers, centring means).

    The structured operator's set-up is sparse work on ``A``, not a pass over G: 0.
    """
    if hasattr(source, "exact_svd"):
        return 0
    kernel = getattr(source, "kernel", None)
    return int(kernel in ("sne", "t")) + int(bool(getattr(source, "center", False)))


class ScaleProblem:
    """A problem being solved in one cell: its spec, data, Dask client and (lazy) source.

    Runners call :meth:`source` to get the matrix source; its construction (the set-up
    pass) is timed into ``setup_seconds`` and counted into ``setup_passes``. A runner that
    builds its own operator from ``data`` (e.g. a Dask array of kernel tiles) need not call it.
    """

    def __init__(self, spec, data, client=None):
        self.spec = spec
        self.data = data
        self.client = client
        self.setup_seconds = 0.0
        self.setup_passes = 0
        self._source = None

    @property
    def structured(self):
        """Whether the source (once built) is an exact structured operator (part a)."""
        return self._source is not None and hasattr(self._source, "exact_svd")

    def source(self):
        """The matrix source, built on first call (that call's time is the set-up time)."""
        if self._source is None:
            t0 = time.perf_counter()
            self._source = make_source(self.spec, self.data, self.client)
            self.setup_seconds = time.perf_counter() - t0
            self.setup_passes = setup_passes(self._source)
        return self._source


# --------------------------------------------------------------------------- method runners


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
                                   "randomized block Krylov (2 q + 1 passes)"),
    "generalized_nystrom": _solver_runner("generalized_nystrom", _effort_generalized_nystrom,
                                          "generalized Nystrom (one pass through sketch)"),
    "asym_nystrom": _solver_runner("asym_nystrom", _effort_asym_nystrom,
                                   "asymmetric Nystrom (m rows and columns)"),
}


def _solve_svd_compressed(problem, rank, options, random_state):
    """Dask's own ``svd_compressed`` on G as ``map_blocks`` tiles of the same source."""
    from ksvd_bench.kernels.distributed import svd_compressed

    return svd_compressed(problem.source(), rank, random_state=random_state, **options)


# Dask's peer of rsvd, with rsvd's power iterations and oversampling (2 q + 2 passes)
RUNNERS["svd_compressed"] = MethodRunner(
    "svd_compressed", _solve_svd_compressed, _effort_rsvd, ("b",),
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


def effort_label(options):
    """``{"n_oversamples": 10, "n_iter": 2}`` -> ``"p=10 q=2"``; ``{}`` -> ``"-"``."""
    parts = [f"{EFFORT_LABELS.get(k, k)}={v}" for k, v in options.items()]
    return " ".join(parts) or "-"


# --------------------------------------------------------------------------- one cell


def _peak_rss_bytes():
    """Peak resident memory of this process so far (Linux reports KiB, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if platform.system() == "Darwin" else peak * 1024)


def _cpu_seconds():
    """User plus system CPU time of this process, all threads (steadier than wall time on a
    shared machine)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _current_rss_bytes():
    try:
        import psutil
    except ImportError:  # pragma: no cover - psutil is a dependency of dask[distributed]
        return None
    return int(psutil.Process().memory_info().rss)


@contextlib.contextmanager
def _connected(client, scheduler):
    """The Dask client to use: the one given, one connected to ``scheduler``, or None."""
    if client is not None or scheduler is None:
        yield client
        return
    from distributed import Client

    own = Client(scheduler, timeout="30s")
    try:
        yield own
    finally:
        own.close()


def _warm_up(runner, spec, client=None):
    """Solve a small problem of the same kind first: Numba loads its caches outside the timing
    (on the workers too, with a Dask ``client``)."""
    small = max(1000, 4 * spec.rank)
    tiny = ProblemSpec(spec.part, small, small, spec.rank, spec.seed, spec.dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runner.solve(ScaleProblem(tiny, make_data(tiny), client), spec.rank,
                     runner.effort(tiny), 0)


def run_cell(spec, runner, *, random_state=0, threads=1, client=None, scheduler=None,
             result_path=None, warm_up=True):
    """Solve one cell and measure it (in the calling process).

    Parameters
    ----------
    spec : ProblemSpec
    runner : MethodRunner or str
        A runner or a name in :data:`RUNNERS`.
    random_state : int, default=0
        Seed of the method.
    threads : int, default=1
        Numba and BLAS threads.
    client : distributed.Client, optional
        Passed to the source and the runner.
    scheduler : str, optional
        Address of a Dask scheduler to connect to when no ``client`` is given.
    result_path : str or Path, optional
        Save the answer (``U``, ``s``, ``V``) there as ``.npz`` (isolated cells hand it back
        this way, so that the parent, not the cell, pays for loading the reference).
    warm_up : bool, default=True
        Solve a small problem of the same kind first (not timed).

    Returns
    -------
    row : dict
        The measurements (keys of :data:`ROW_FIELDS` except the errors, which need the
        reference), and ``"answer"``: the SVDResult (only when ``result_path`` is None).
    """
    from ksvd_bench.race.problems import solver_threads

    runner = RUNNERS[runner] if isinstance(runner, str) else runner
    options = runner.effort(spec)
    row = {"part": spec.part, "n": spec.n, "m": spec.m, "method": runner.name,
           "effort": effort_label(options), "seed": int(random_state)}
    with solver_threads(threads) as used, _connected(client, scheduler) as dask_client:
        row["threads"] = used
        if warm_up:
            _warm_up(runner, spec, dask_client)
        t0 = time.perf_counter()
        data = make_data(spec)
        row["data_seconds"] = time.perf_counter() - t0
        base = _current_rss_bytes()
        problem = ScaleProblem(spec, data, dask_client)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            cpu0, t0 = _cpu_seconds(), time.perf_counter()
            answer = runner.solve(problem, spec.rank, options, random_state)
            seconds = time.perf_counter() - t0
            cpu = _cpu_seconds() - cpu0
    peak = _peak_rss_bytes()
    info = getattr(answer, "info", {}) or {}
    passes = info.get("n_passes")
    row.update(
        status="ok", seconds=seconds, setup_seconds=problem.setup_seconds,
        solve_seconds=seconds - problem.setup_seconds, cpu_seconds=cpu,
        passes=None if passes is None else float(passes), setup_passes=problem.setup_passes,
        peak_rss_mb=peak / 2**20, base_rss_mb=None if base is None else base / 2**20,
        warnings=sorted({str(w.message)[:400] for w in caught}),
    )
    row["entries"] = _entries_read(problem, info, passes)
    for key in ("exact_path", "one_pass", "numerical_rank"):
        if key in info:
            row[key] = info[key]
    U, s, V = answer
    if result_path is None:
        row["answer"] = answer
    else:
        np.savez(result_path, U=np.asarray(U), s=np.asarray(s), V=np.asarray(V))
    return row


def _entries_read(problem, info, passes):
    """Entries of G evaluated by a cell.

    A lazy kernel evaluates all N M entries in every whole pass (set-up passes included) and
    ``rows``/``cols``/``block`` are fractional passes, so it is ``(passes + setup) N M``. The
    structured operator multiplies without evaluating entries: only the entries it
    materialises through ``rows``/``cols``/``block`` (``info["n_block_entries"]``) count.
    """
    if problem.structured:
        block = info.get("n_block_entries")
        return None if block is None else int(block)
    if passes is None:
        return None
    spec = problem.spec
    return int(round((float(passes) + problem.setup_passes) * spec.n * spec.m))


# --------------------------------------------------------------------------- references


def _wedin_estimate(source, U, s, V, rank):
    """Residual-based estimate of the reference's top-``rank`` subspace error (one pass).

    ``max(||G V - U S||, ||G^T U - V S||) / (s_r - s_{r+1})`` over the top ``rank``
    triplets: Wedin's bound, with the gap estimated from the reference's own values.
    """
    Vr, Ur, sr = V[:, :rank], U[:, :rank], s[:rank]
    if hasattr(source, "sketch"):
        GV, GtU = source.sketch(Vr, Ur)
    else:
        GV, GtU = source.matmat(Vr), source.rmatmat(Ur)
    res = max(np.linalg.norm(GV - Ur * sr, 2), np.linalg.norm(GtU - Vr * sr, 2))
    gap = sr[-1] - s[rank] if s.size > rank else sr[-1]
    return float(res / gap) if gap > 0 else math.inf, float(res)


def _dense_reference(source, k):
    """Top-``k`` triplets of a small G from dense LAPACK: ``eigh`` of its smaller Gram matrix.

    The symmetric eigensolver on ``G G^T`` (or ``G^T G``) with a subset of eigenvalues costs
    a fraction of a full ``gesdd`` (1.2 s against 7 s at 2000 x 2000 on one core); squaring
    the singular values loses nothing measurable for the top-r subspace, whose error is about
    ``eps s_1^2 / (s_r^2 - s_{r+1}^2)``. The other side is ``G^T U / s`` (or ``G V / s``).
    """
    from scipy import linalg

    from solvers import source_to_dense
    from solvers._result import fix_signs

    G = np.asarray(source_to_dense(source), dtype=np.float64)
    wide = G.shape[0] <= G.shape[1]
    gram = G @ G.T if wide else G.T @ G
    size = gram.shape[0]
    w, Q = linalg.eigh(gram, subset_by_index=(size - k, size - 1), check_finite=False)
    Q, s = Q[:, ::-1], np.sqrt(np.maximum(w[::-1], 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        other = np.where(s > 0, (G.T @ Q if wide else G @ Q) / s, 0.0)
    U, V = (Q, other) if wide else (other, Q)
    U, V = np.ascontiguousarray(U), np.ascontiguousarray(V)
    fix_signs(U, V)
    return U, s, V


def _krylov_reference(source, k, rank):
    """Block Krylov top-``k`` triplets, deepened until the Wedin estimate is small enough."""
    import solvers

    for n_iter in REFERENCE_KRYLOV["n_iter"]:
        options = {"n_oversamples": REFERENCE_KRYLOV["n_oversamples"], "n_iter": n_iter}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref = solvers.svd(source, k, method="block_krylov", random_state=12345, **options)
        estimate, residual = _wedin_estimate(source, ref.U, ref.s, ref.V, rank)
        if estimate <= REFERENCE_TARGET_ERROR:
            break
    info = {"kind": "block_krylov", "method": "block_krylov", "options": options,
            "label": (f"block_krylov {effort_label(options)} (not exact; est. error "
                      f"{estimate:.1e})"),
            "estimated_error": estimate, "residual": residual}
    return (ref.U, ref.s, ref.V), info


def compute_reference(spec, *, threads=1, client=None, scheduler=None,
                      dense_max_entries=DENSE_REFERENCE_MAX_ENTRIES, path=None):
    """The reference top-r (and a few more) triplets of a problem, and how they were made.

    The structured operator (part a) gives its exact SVD
    (:func:`ksvd_bench.driver.reference_svd`, with the triplets of a cluster cut by r); a G
    of at most ``dense_max_entries`` entries is formed and decomposed by dense LAPACK
    (:func:`_dense_reference`); otherwise block Krylov at :data:`REFERENCE_KRYLOV`, with its
    Wedin estimate (one more pass), deepened until that estimate is at most
    :data:`REFERENCE_TARGET_ERROR`. All keep ``r + REFERENCE_EXTRA`` triplets (or more), so
    that the subspace error can tell a cluster cut by r.

    Returns
    -------
    info : dict
        ``label`` (for the tables), ``kind`` (``"exact"`` or ``"block_krylov"``),
        ``method``, ``seconds``, ``n_triplets``; for block Krylov also ``estimated_error``
        (the Wedin estimate) and ``residual``. With ``path`` the triplets are saved there
        (``.npz``), else returned under ``"answer"`` (a ``(U, s, V)`` tuple).
    """
    from ksvd_bench.driver import reference_svd
    from ksvd_bench.metrics import CLUSTER_RTOL
    from ksvd_bench.race.problems import solver_threads

    with solver_threads(threads), _connected(client, scheduler) as dask_client:
        source = make_source(spec, make_data(spec), dask_client)
        t0 = time.perf_counter()
        k = min(spec.rank + REFERENCE_EXTRA, min(spec.n, spec.m))
        if hasattr(source, "exact_svd"):
            ref = reference_svd(source, spec.rank, cluster_rtol=CLUSTER_RTOL)
            triplets = (ref.U, ref.s, ref.V)
            info = {"kind": "exact", "method": ref.info.get("method"),
                    "label": "exact (structured operator)"}
        elif spec.n * spec.m <= dense_max_entries:
            triplets = _dense_reference(source, k)
            info = {"kind": "exact", "method": "dense eigh of the Gram matrix",
                    "label": "exact (dense LAPACK)"}
        else:
            triplets, info = _krylov_reference(source, k, spec.rank)
        info.update(seconds=time.perf_counter() - t0, n_triplets=int(triplets[1].size))
    if path is None:
        info["answer"] = triplets
    else:
        np.savez(path, U=triplets[0], s=triplets[1], V=triplets[2])
    return info


# --------------------------------------------------------------------------- isolation


def _mp_context():
    """forkserver (fresh processes forked from a server that imported this module) or spawn."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("forkserver")
        with contextlib.suppress(ValueError, RuntimeError):
            ctx.set_forkserver_preload([__name__])
        return ctx
    return multiprocessing.get_context("spawn")


def _child(target, kwargs, conn):
    """Entry point of an isolated job: run ``target(**kwargs)`` and send the outcome back."""
    try:
        conn.send(("ok", target(**kwargs)))
    except BaseException as exc:  # noqa: BLE001 - everything goes back to the parent
        conn.send(("error", f"{type(exc).__name__}: {exc}", traceback.format_exc()))
    finally:
        conn.close()


def _rss_of(pid):
    """Resident memory of process ``pid`` in bytes, or 0 if it cannot be read (gone)."""
    import psutil

    try:
        return int(psutil.Process(pid).memory_info().rss)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return 0


def run_isolated(target, kwargs, *, time_limit=None, memory_limit=None):
    """Run ``target(**kwargs)`` in a fresh process, within a time and a memory limit.

    Parameters
    ----------
    target : callable
        A module-level function (it is pickled by reference).
    kwargs : dict
        Its (picklable) keyword arguments.
    time_limit : float, optional
        Wall-clock seconds, process start included.
    memory_limit : int, optional
        Bytes of resident memory; the process is polled every 0.1 s and stopped above it,
        so that one cell cannot exhaust a shared machine.

    Returns
    -------
    (status, value) : tuple
        ``("ok", result)``, ``("error", message)``, ``("timeout", None)`` or
        ``("memory", peak_bytes_seen)``.
    """
    ctx = _mp_context()
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(target, kwargs, send))
    t0 = time.monotonic()
    proc.start()
    send.close()
    outcome = ("timeout", None)
    try:
        while True:
            if recv.poll(0.1):
                try:
                    message = recv.recv()
                except EOFError:
                    message = ("error", f"the cell's process died (exit code "
                                        f"{proc.exitcode})", "")
                outcome = message[:2]
                break
            if not proc.is_alive() and not recv.poll(0):
                outcome = ("error", f"the cell's process died (exit code {proc.exitcode}; "
                                    "out of memory?)")
                break
            if time_limit is not None and time.monotonic() - t0 > time_limit:
                break
            if memory_limit is not None:
                rss = _rss_of(proc.pid)
                if rss > memory_limit:
                    outcome = ("memory", rss)
                    break
    finally:
        proc.join(timeout=2.0)
        if proc.is_alive():
            proc.kill()
            proc.join()
        recv.close()
    return outcome


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
        One per (part, method): ``exponent`` (slope of log seconds against log N),
        ``solve_exponent`` (the same for the solve alone), ``n_points``, ``sizes``.
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


def fit_exponent(sizes, seconds):
    """Least-squares slope of ``log(seconds)`` against ``log(sizes)``; None below 2 sizes.

    Parameters
    ----------
    sizes, seconds : sequence of positive float

    Returns
    -------
    float or None
    """
    x = np.log(np.asarray(sizes, dtype=float))
    y = np.log(np.asarray(seconds, dtype=float))
    keep = np.isfinite(x) & np.isfinite(y)
    if np.unique(x[keep]).size < 2:
        return None
    slope, _ = np.polyfit(x[keep], y[keep], 1)
    return float(slope)


def best_cells(rows, target=ACCURACY_TARGET):
    """Per (part, size): the fastest cell whose subspace error is at most ``target``.

    Returns
    -------
    list of dict
        ``part``, ``n``, ``method``, ``effort``, ``seconds``, ``passes``, ``peak_rss_mb``,
        ``subspace_error`` of the winner; ``method`` None when no cell met the target.
    """
    best = []
    for part, n in sorted({(r["part"], r["n"]) for r in rows}):
        ok = [r for r in rows if r["part"] == part and r["n"] == n and r["status"] == "ok"
              and r.get("subspace_error") is not None and r["subspace_error"] <= target]
        win = min(ok, key=lambda r: r["seconds"], default=None)
        keys = ("method", "effort", "seconds", "passes", "peak_rss_mb", "subspace_error")
        best.append({"part": part, "n": n, **{k: None if win is None else win.get(k)
                                              for k in keys}})
    return best


def _fit_all(rows):
    fits = []
    keys = sorted({(r["part"], r["method"]) for r in rows}, key=lambda k: (k[0], k[1]))
    for part, method in keys:
        ok = [r for r in rows if r["part"] == part and r["method"] == method
              and r["status"] == "ok" and r.get("seconds")]
        ok.sort(key=lambda r: r["n"])
        sizes = [r["n"] for r in ok]
        solve = [r for r in ok if r.get("solve_seconds", 0) > 0]
        fits.append({
            "part": part, "method": method, "n_points": len(ok),
            "sizes": f"{sizes[0]}-{sizes[-1]}" if sizes else "-",
            "exponent": fit_exponent(sizes, [r["seconds"] for r in ok]),
            "solve_exponent": fit_exponent([r["n"] for r in solve],
                                           [r["solve_seconds"] for r in solve]),
            "largest_n_seconds": ok[-1]["seconds"] if ok else None,
        })
    return fits


def _check_choice_list(values, allowed, name):
    values = tuple(values)
    bad = [v for v in values if v not in allowed]
    if bad or not values:
        raise ValueError(f"{name} must be a non-empty list of {tuple(allowed)}, got {values!r}")
    return values


def _check_settings(parts, sizes, methods, rank, time_limit, dtype):
    if isinstance(parts, str):
        parts = PARTS if parts == "both" else (parts,)
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


def _load_npz(path):
    with np.load(path, allow_pickle=False) as f:
        return {k: f[k] for k in ("U", "s", "V")}


def _score(row, answer, reference, rank):
    """Subspace and singular-value errors of one answer against the reference."""
    from types import SimpleNamespace

    from ksvd_bench.metrics import subspace_error

    ref = SimpleNamespace(**reference)
    ans = SimpleNamespace(**answer)
    sin_u, sin_v = subspace_error(ref, ans, rank=rank)
    s_ref = np.asarray(ref.s[:rank], dtype=float)
    s_ans = np.asarray(ans.s[:rank], dtype=float)
    row.update(sin_u=float(sin_u), sin_v=float(sin_v), subspace_error=float(max(sin_u, sin_v)),
               sv_error=float(np.max(np.abs(s_ans - s_ref)) / s_ref[0]) if s_ref[0] > 0
               else None)


class _Runner:
    """Runs references and cells, isolated or in process, and keeps the bookkeeping."""

    def __init__(self, *, threads, time_limit, memory_limit, isolate, client, scheduler,
                 dense_max, workdir, reference):
        self.threads = threads
        self.time_limit = time_limit
        self.memory_limit = memory_limit
        self.isolate = isolate
        self.client = client
        self.scheduler = scheduler if scheduler is not None else (
            None if client is None else client.scheduler.address)
        self.dense_max = dense_max
        self.workdir = Path(workdir)
        self.reference = reference

    def _job(self, target, kwargs, path_key, limit):
        """Run target isolated (result saved at a path) or in process; return (status, out)."""
        if not self.isolate:
            try:
                return "ok", target(**kwargs, client=self.client, scheduler=self.scheduler)
            except Exception as exc:  # noqa: BLE001 - a failing cell is a row, not a crash
                return "error", f"{type(exc).__name__}: {exc}"
        path = self.workdir / f"{path_key}.npz"
        kwargs = dict(kwargs, scheduler=self.scheduler)
        kwargs["path" if target is compute_reference else "result_path"] = str(path)
        status, value = run_isolated(target, kwargs, time_limit=limit,
                                     memory_limit=self.memory_limit)
        return status, (value, path)

    def _failure(self, status, out):
        """The message of a job that did not finish."""
        value = out if not self.isolate else out[0]
        if status == "timeout":
            return f"over the time limit of {self.time_limit:g} s"
        if status == "memory":
            return (f"over the memory limit of {self.memory_limit / 2**30:.1f} GiB "
                    f"(stopped at {value / 2**30:.1f} GiB)")
        return str(value)

    def reference_for(self, spec, cache_dir):
        """(reference triplets or None, info dict) for one problem; cached under cache_dir."""
        if self.reference == "none":
            return None, {"label": "none", "kind": "none"}
        cached = None if cache_dir is None else Path(cache_dir) / f"{spec.key}.npz"
        if cached is not None and cached.exists() and cached.with_suffix(".json").exists():
            import json

            return _load_npz(cached), json.loads(cached.with_suffix(".json").read_text())
        limit = None if self.time_limit is None else 4 * self.time_limit
        kwargs = dict(spec=spec, threads=self.threads, dense_max_entries=self.dense_max)
        status, out = self._job(compute_reference, kwargs, f"ref_{spec.key}", limit)
        if status != "ok":
            return None, {"label": f"none ({self._failure(status, out)})", "kind": "none"}
        if self.isolate:
            info, path = out
            triplets = _load_npz(path)
        else:
            info = out
            triplets = dict(zip(("U", "s", "V"), info.pop("answer"), strict=True))
        if cached is not None:
            from ksvd_bench.report import write_json

            cached.parent.mkdir(parents=True, exist_ok=True)
            np.savez(cached, **triplets)
            write_json(cached.with_suffix(".json"), info)
        return triplets, info

    def cell(self, spec, runner, seed):
        kwargs = dict(spec=spec, runner=runner, random_state=seed, threads=self.threads)
        key = f"cell_{spec.key}_{runner.name}"
        status, out = self._job(run_cell, kwargs, key, self.time_limit)
        base = {"part": spec.part, "n": spec.n, "m": spec.m, "method": runner.name,
                "effort": effort_label(runner.effort(spec)), "seed": seed}
        if status != "ok":
            return dict(base, status=status, error=self._failure(status, out)), None
        if self.isolate:
            row, path = out
            answer = _load_npz(path)
            path.unlink(missing_ok=True)
        else:
            row = out
            res = row.pop("answer")
            answer = {"U": res.U, "s": res.s, "V": res.V}
            # one process for every cell: its high-water mark is not this cell's
            row.update(peak_rss_mb=None, base_rss_mb=None)
        return row, answer


def _merge(out, rows, references):
    """Rows and references of an earlier ``scale.json`` in ``out``, replaced by the new ones."""
    import json

    path = Path(out) / "scale.json"
    if not path.exists():
        return rows, references
    old = json.loads(path.read_text())
    cell = {(r["part"], r["n"], r["method"]) for r in rows}
    size = {(r["part"], r["n"]) for r in references}
    kept = [r for r in old.get("rows", []) if (r["part"], r["n"], r["method"]) not in cell]
    kept_refs = [r for r in old.get("references", []) if (r["part"], r["n"]) not in size]
    return sorted(kept + rows, key=_row_order), sorted(kept_refs + references, key=_row_order)


def _row_order(row):
    return row["part"], row["n"], row.get("method", "")


def run_scale(
    parts="both",
    *,
    sizes=None,
    methods=None,
    rank=DEFAULT_RANK,
    random_state=0,
    threads=None,
    time_limit=DEFAULT_TIME_LIMIT,
    memory_limit=None,
    dtype="float64",
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
    parts : {"a", "b", "both"} or sequence of them, default="both"
    sizes : dict, optional
        part -> sizes N (M = N); default :data:`DEFAULT_SIZES`. Each at least ``4 * rank``.
    methods : dict, optional
        part -> names in :data:`RUNNERS`; default :data:`DEFAULT_METHODS`.
    rank : int, default=20
        r; part b's points have r clusters.
    random_state : int, default=0
        Seed of the data (every method sees the same problem) and of the methods.
    threads : int, optional
        Numba and BLAS threads of every cell; default all of Numba's pool.
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
        (e.g. rerun only the largest cells), and fit the exponents on all of them.
    progress : bool, default=True
        Progress bar on stderr.

    Returns
    -------
    ScaleResult
    """
    from ksvd_bench.race.problems import check_threads
    from ksvd_bench.report import machine_info, progress_bar

    parts, sizes, methods = _check_settings(parts, sizes, methods, rank, time_limit, dtype)
    if reference not in ("auto", "none"):
        raise ValueError(f"reference must be 'auto' or 'none', got {reference!r}")
    threads = check_threads(threads, "threads")
    memory_limit = _check_memory_limit(memory_limit)
    dtype = np.dtype(dtype).name
    seed = int(random_state)
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
                spec = ProblemSpec(part, n, n, rank, seed, dtype)
                bar.set_postfix_str(f"{part} N={n} reference")
                ref, ref_info = runner.reference_for(spec, cache_dir)
                references.append({"part": part, "n": n, **ref_info})
                for name in methods[part]:
                    bar.set_postfix_str(f"{part} N={n} {name}")
                    if name in gave_up:
                        row = {"part": part, "n": n, "m": n, "method": name, "seed": seed,
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
    if merge and out is not None:
        rows, references = _merge(out, rows, references)
    meta = {
        "command": "scale", "parts": list(parts), "sizes": {p: list(sizes[p]) for p in parts},
        "methods": {p: list(methods[p]) for p in parts}, "rank": rank, "seed": seed,
        "threads": threads, "time_limit": time_limit, "memory_limit": memory_limit,
        "dtype": dtype, "isolate": bool(isolate),
        "reference": reference, "dense_reference_max_entries": dense_reference_max_entries,
        "reference_krylov": dict(REFERENCE_KRYLOV),
        "reference_target_error": REFERENCE_TARGET_ERROR, "points_dim": POINTS_DIM,
        "kernels": {"a": "sne, centred, KernelSource(A) (structured)",
                    "b": "sne, uncentred, KernelSource.from_points, gamma from "
                         "make_clustered_points"},
        "efforts": {p: {m: effort_label(RUNNERS[m].effort(ProblemSpec(p, n, n, rank, seed)))
                        for m in methods[p] for n in sizes[p][-1:]} for p in parts},
        "dask": None if (client is None and scheduler is None) else
        (scheduler or client.scheduler.address),
        "merged": bool(merge), "machine": machine_info(),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }
    result = ScaleResult(rows=rows, exponents=_fit_all(rows), references=references, meta=meta)
    if out is not None:
        result.paths = write_scale(result, out)
    return result


def write_scale(result, out):
    """Write ``scale.csv``, ``scale_exponents.csv``, ``scale.json`` and ``scale.png``."""
    from ksvd_bench.report import write_csv, write_json

    out = Path(out)
    columns = list(ROW_FIELDS) + sorted({k for r in result.rows for k in r} - set(ROW_FIELDS))
    return {
        "csv": str(write_csv(out / "scale.csv", result.rows, columns)),
        "exponents_csv": str(write_csv(out / "scale_exponents.csv", result.exponents)),
        "json": str(write_json(out / "scale.json", {
            "meta": result.meta, "rows": result.rows, "exponents": result.exponents,
            "best": best_cells(result.rows), "references": result.references})),
        "png": str(plot_scale(result, out / "scale.png")),
    }


# --------------------------------------------------------------------------- report


_TABLE_COLUMNS = [
    ("n", "N"), ("method", "method"), ("effort", "effort"), ("status", "status"),
    ("seconds", "seconds"), ("setup_seconds", "setup s"), ("solve_seconds", "solve s"),
    ("cpu_seconds", "cpu s"), ("passes", "passes"), ("setup_passes", "+setup"),
    ("entries", "entries"),
    ("peak_rss_mb", "peak MB"), ("subspace_error", "sin err"), ("sv_error", "sv err"),
]


def format_scale(result, *, precision=3):
    """Terminal text: per part the cells, the references, then the fitted exponents."""
    from ksvd_bench.report import format_table

    meta = result.meta
    blocks = []
    for part in sorted({r["part"] for r in result.rows}):
        rows = [dict(r, entries=None if r.get("entries") is None else float(r["entries"]))
                for r in result.rows if r["part"] == part]
        title = (f"{PART_TITLES[part]}: top-{meta['rank']}, threads={meta['threads']}, "
                 f"seconds = set-up + solve; sin err vs the reference below")
        blocks.append(format_table(rows, _TABLE_COLUMNS, precision=precision, title=title))
        refs = [r for r in result.references if r["part"] == part]
        blocks.append(format_table(refs, [("n", "N"), ("label", "reference"),
                                          ("seconds", "seconds")],
                                   precision=precision, title="references (not charged)"))
    best = format_table(best_cells(result.rows),
                        [("part", "part"), ("n", "N"), ("method", "method"),
                         ("effort", "effort"), ("seconds", "seconds"), ("passes", "passes"),
                         ("peak_rss_mb", "peak MB"), ("subspace_error", "sin err")],
                        precision=precision,
                        title=f"fastest cell with subspace error <= {ACCURACY_TARGET:g} "
                              "('-': none)")
    fits = format_table(result.exponents,
                        [("part", "part"), ("method", "method"), ("sizes", "N range"),
                         ("n_points", "sizes"), ("exponent", "exponent"),
                         ("solve_exponent", "solve exp."), ("largest_n_seconds", "s at max N")],
                        precision=2, title="growth exponents: seconds ~ N^exponent "
                                           "(least squares on log-log)")
    return "\n\n".join(blocks + [best, fits])


def plot_scale(result, path):
    """Log-log figure: seconds against N (top) and subspace error against N (bottom)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    parts = sorted({r["part"] for r in result.rows}) or ["a"]
    fig, axes = plt.subplots(2, len(parts), figsize=(6 * len(parts), 8), squeeze=False)
    fits = {(f["part"], f["method"]): f["exponent"] for f in result.exponents}
    for col, part in enumerate(parts):
        top, bottom = axes[0, col], axes[1, col]
        methods = list(dict.fromkeys(r["method"] for r in result.rows if r["part"] == part))
        for i, method in enumerate(methods):
            ok = sorted((r for r in result.rows if r["part"] == part
                         and r["method"] == method and r["status"] == "ok"),
                        key=lambda r: r["n"])
            if not ok:
                continue
            n = np.array([r["n"] for r in ok], dtype=float)
            sec = np.array([r["seconds"] for r in ok], dtype=float)
            slope = fits.get((part, method))
            label = method if slope is None else f"{method} (N^{slope:.2f})"
            top.loglog(n, sec, "o-", color=f"C{i}", label=label)
            err = np.array([np.nan if r.get("subspace_error") is None
                            else max(r["subspace_error"], 1e-16) for r in ok])
            if np.isfinite(err).any():
                bottom.loglog(n, err, "s-", color=f"C{i}", label=method)
        top.set_title(PART_TITLES[part], fontsize=9)
        top.set_xlabel("N")
        top.set_ylabel("seconds (set-up + solve)")
        top.legend(fontsize=8)
        bottom.axhline(ACCURACY_TARGET, color="grey", ls=":", lw=1,
                       label=f"target {ACCURACY_TARGET:g}")
        bottom.set_xlabel("N")
        bottom.set_ylabel("subspace error (sin theta_max)")
        if bottom.get_legend_handles_labels()[0]:
            bottom.legend(fontsize=8)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
