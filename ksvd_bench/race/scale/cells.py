"""One cell of the scale study, its reference, and the isolation that runs them.

:func:`run_cell` solves one (problem, method) and measures it; :func:`compute_reference`
makes the reference top-r of a problem (exact where possible, else a labelled block Krylov
answer with its own error estimate); :func:`run_isolated` runs either in a fresh process
within a time and a memory limit; :class:`CellRunner` does the bookkeeping for
:func:`ksvd_bench.race.scale.run.run_scale`. No warning is silenced: a cell counts the warnings of
its solve (``n_warnings``, ``warnings``) and of its warm-up (``warm_up_warnings``) apart.
"""

from __future__ import annotations

import contextlib
import json
import math
import multiprocessing
import platform
import resource
import time
import traceback
from pathlib import Path
from types import SimpleNamespace

import numpy as np
from scipy import linalg

import solvers
from ksvd_bench.driver import reference_svd
from ksvd_bench.metrics import CLUSTER_RTOL, subspace_error, sv_error
from ksvd_bench.race.common import counting_warnings, warning_fields
from ksvd_bench.race.scale.problems import (
    DENSE_REFERENCE_MAX_ENTRIES,
    REFERENCE_EXTRA,
    REFERENCE_KRYLOV,
    REFERENCE_TARGET_ERROR,
    ProblemSpec,
    ScaleProblem,
    effort_label,
    make_data,
    make_source,
)
from ksvd_bench.race.scale.runners import RUNNERS
from ksvd_bench.report import write_json
from ksvd_bench.roofline import blas_ns_per_entry, entry_rates
from ksvd_bench.threads import solver_threads
from solvers import fix_signs, source_to_dense

__all__ = ["run_cell", "compute_reference", "run_isolated", "CellRunner", "score_cell"]


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
    # psutil: optional (it comes with ksvd-bench[dask] and [test]), not a core dependency
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
    # distributed: an optional dependency (ksvd-bench[dask]), needed on a cluster only
    from distributed import Client

    own = Client(scheduler, timeout="30s")
    try:
        yield own
    finally:
        own.close()


def _warm_up(runner, spec, client=None):
    """Solve a small problem of the same kind first: Numba loads its caches outside the timing
    (on the workers too, with a Dask ``client``).

    Returns the number of warnings it raised: they are about the small problem, not the
    cell's, so the row records their count (``warm_up_warnings``) apart from its own.
    """
    small = max(1000, 4 * spec.rank)
    tiny = ProblemSpec(spec.part, small, small, spec.rank, spec.seed, spec.dtype, spec.device)
    with counting_warnings() as caught:
        runner.solve(ScaleProblem(tiny, make_data(tiny), client), spec.rank, runner.effort(tiny), 0)
    return len(caught)


def run_cell(
    spec,
    runner,
    *,
    random_state=0,
    threads=1,
    client=None,
    scheduler=None,
    result_path=None,
    warm_up=True,
):
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
    runner = RUNNERS[runner] if isinstance(runner, str) else runner
    options = runner.effort(spec)
    row = {
        **spec.fields,
        "method": runner.name,
        "effort": effort_label(options),
        "seed": int(random_state),
    }
    with solver_threads(threads) as used, _connected(client, scheduler) as dask_client:
        row["threads"] = used
        if warm_up:
            row["warm_up_warnings"] = _warm_up(runner, spec, dask_client)
        t0 = time.perf_counter()
        data = make_data(spec)
        row["data_seconds"] = time.perf_counter() - t0
        base = _current_rss_bytes()
        problem = ScaleProblem(spec, data, dask_client)
        with counting_warnings() as caught:
            cpu0, t0 = _cpu_seconds(), time.perf_counter()
            answer = runner.solve(problem, spec.rank, options, random_state)
            seconds = time.perf_counter() - t0
            cpu = _cpu_seconds() - cpu0
        # issue 21: this machine's BLAS on a pass's products (r columns), same threads
        blas_ns = (
            blas_ns_per_entry(spec.n, spec.m, data["X"].shape[1], spec.rank, spec.dtype)
            if "X" in data and spec.device == "cpu"
            else None
        )
    peak = _peak_rss_bytes()
    info = getattr(answer, "info", {}) or {}
    passes = info.get("n_passes")
    row.update(
        status="ok",
        seconds=seconds,
        setup_seconds=problem.setup_seconds,
        solve_seconds=seconds - problem.setup_seconds,
        cpu_seconds=cpu,
        passes=None if passes is None else float(passes),
        setup_passes=problem.setup_passes,
        peak_rss_mb=peak / 2**20,
        base_rss_mb=None if base is None else base / 2**20,
        # every warning of the solve counted and kept; reliable: the solver's own verdict
        **warning_fields(caught, info),
    )
    row["entries"] = _entries_read(problem, info, passes)
    row.update(entry_rates(seconds, None if problem.structured else row["entries"], blas_ns))
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
    for n_iter in REFERENCE_KRYLOV["n_iter"]:
        options = {"n_oversamples": REFERENCE_KRYLOV["n_oversamples"], "n_iter": n_iter}
        with counting_warnings() as caught:
            ref = solvers.svd(source, k, method="block_krylov", random_state=12345, **options)
        estimate, residual = _wedin_estimate(source, ref.U, ref.s, ref.V, rank)
        if estimate <= REFERENCE_TARGET_ERROR:
            break
    info = {
        "kind": "block_krylov",
        "method": "block_krylov",
        "options": options,
        "label": (f"block_krylov {effort_label(options)} (not exact; est. error {estimate:.1e})"),
        "estimated_error": estimate,
        "residual": residual,
        # the reference's own warnings (the Wedin estimate above is what vouches for it)
        **warning_fields(caught, ref.info),
    }
    return (ref.U, ref.s, ref.V), info


def compute_reference(
    spec,
    *,
    threads=1,
    client=None,
    scheduler=None,
    dense_max_entries=DENSE_REFERENCE_MAX_ENTRIES,
    path=None,
):
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
    with solver_threads(threads), _connected(client, scheduler) as dask_client:
        source = make_source(spec, make_data(spec), dask_client)
        t0 = time.perf_counter()
        k = min(spec.rank + REFERENCE_EXTRA, min(spec.n, spec.m))
        if hasattr(source, "exact_svd"):
            ref = reference_svd(source, spec.rank, cluster_rtol=CLUSTER_RTOL)
            triplets = (ref.U, ref.s, ref.V)
            info = {
                "kind": "exact",
                "method": ref.info.get("method"),
                "label": "exact (structured operator)",
            }
        elif spec.n * spec.m <= dense_max_entries:
            triplets = _dense_reference(source, k)
            info = {
                "kind": "exact",
                "method": "dense eigh of the Gram matrix",
                "label": "exact (dense LAPACK)",
            }
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
            ctx.set_forkserver_preload(["ksvd_bench.race.scale"])
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
    # psutil: optional (it comes with ksvd-bench[dask] and [test]), not a core dependency
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
                    message = ("error", f"the cell's process died (exit code {proc.exitcode})", "")
                outcome = message[:2]
                break
            if not proc.is_alive() and not recv.poll(0):
                outcome = (
                    "error",
                    f"the cell's process died (exit code {proc.exitcode}; out of memory?)",
                )
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


def _load_npz(path):
    with np.load(path, allow_pickle=False) as f:
        return {k: f[k] for k in ("U", "s", "V")}


def score_cell(row, answer, reference, rank):
    """Subspace and singular-value errors of one answer against the reference."""

    ref = SimpleNamespace(**reference)
    ans = SimpleNamespace(**answer)
    sin_u, sin_v = subspace_error(ref, ans, rank=rank)
    row.update(
        sin_u=float(sin_u),
        sin_v=float(sin_v),
        subspace_error=float(max(sin_u, sin_v)),
        sv_error=float(sv_error(ref, ans, rank=rank)),
    )


class CellRunner:
    """Runs references and cells, isolated or in process, and keeps the bookkeeping."""

    def __init__(
        self,
        *,
        threads,
        time_limit,
        memory_limit,
        isolate,
        client,
        scheduler,
        dense_max,
        workdir,
        reference,
    ):
        self.threads = threads
        self.time_limit = time_limit
        self.memory_limit = memory_limit
        self.isolate = isolate
        self.client = client
        self.scheduler = (
            scheduler
            if scheduler is not None
            else (None if client is None else client.scheduler.address)
        )
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
        status, value = run_isolated(
            target, kwargs, time_limit=limit, memory_limit=self.memory_limit
        )
        return status, (value, path)

    def _failure(self, status, out):
        """The message of a job that did not finish."""
        value = out if not self.isolate else out[0]
        if status == "timeout":
            return f"over the time limit of {self.time_limit:g} s"
        if status == "memory":
            return (
                f"over the memory limit of {self.memory_limit / 2**30:.1f} GiB "
                f"(stopped at {value / 2**30:.1f} GiB)"
            )
        return str(value)

    def reference_for(self, spec, cache_dir):
        """(reference triplets or None, info dict) for one problem; cached under cache_dir."""
        if self.reference == "none":
            return None, {"label": "none", "kind": "none"}
        cached = None if cache_dir is None else Path(cache_dir) / f"{spec.key}.npz"
        if cached is not None and cached.exists() and cached.with_suffix(".json").exists():
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
            cached.parent.mkdir(parents=True, exist_ok=True)
            np.savez(cached, **triplets)
            write_json(cached.with_suffix(".json"), info)
        return triplets, info

    def cell(self, spec, runner, seed):
        kwargs = dict(spec=spec, runner=runner, random_state=seed, threads=self.threads)
        key = f"cell_{spec.key}_{runner.name}"
        status, out = self._job(run_cell, kwargs, key, self.time_limit)
        base = {
            **spec.fields,
            "method": runner.name,
            "effort": effort_label(runner.effort(spec)),
            "seed": seed,
        }
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
