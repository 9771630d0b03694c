"""Run a solver at growing effort until it meets an accuracy tolerance (the eta-tolerance driver).

A benchmark that times solvers at fixed parameters compares answers of different quality. The
driver instead fixes the quality: it grows each method's effort parameter along a schedule
(:func:`effort_schedule`) until eta against a reference SVD (or, without one, the residual
estimate of :func:`ksvd_bench.metrics.residual_estimate`) is at most ``eps``, and reports the
time at that effort. References come from :func:`reference_svd`, cached on disk.
"""

from __future__ import annotations

import hashlib
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

from ksvd_bench.metrics import WEIGHTS, eta, residual_estimate
from solvers._result import SVDResult, fix_signs
from solvers._source import as_source, source_to_dense

__all__ = [
    "DENSE_REFERENCE_MAX_ENTRIES",
    "STOPS",
    "ToleranceResult",
    "reference_svd",
    "effort_schedule",
    "solve_to_tolerance",
]

#: Largest ``N * M`` for which :func:`reference_svd` uses a dense LAPACK SVD (320 MB in float64).
DENSE_REFERENCE_MAX_ENTRIES = 40_000_000
STOPS = ("reference", "residual")
_NYSTROM = ("sym_nystrom", "asym_nystrom")
_EFFORT_OPTION = {"sym_nystrom": "n_samples", "asym_nystrom": "n_samples", "rsvd": "n_oversamples"}
# Bumped whenever the way references are computed changes, so stale cache files are not reused.
_CACHE_VERSION = 1


def _methods():
    import solvers

    return tuple(solvers.METHODS)


def _check_rank(rank, shape):
    if not isinstance(rank, (int, np.integer)) or isinstance(rank, bool):
        raise TypeError(f"rank must be an int, got {type(rank).__name__}")
    if not 1 <= rank <= min(shape):
        raise ValueError(f"rank must be in [1, {min(shape)}] for a {shape} matrix, got {rank}")
    return int(rank)


# ---------------------------------------------------------------------------------------------
# reference SVD and its cache
# ---------------------------------------------------------------------------------------------


def _data_hash(G):
    """sha256 of a matrix's numbers, or None when ``G`` is not an array or sparse matrix."""
    h = hashlib.sha256()
    if isinstance(G, np.ndarray):
        A = np.ascontiguousarray(G)
        h.update(f"dense|{A.dtype.str}|{A.shape}|".encode())
        h.update(A.tobytes())
        return h.hexdigest()
    if sp.issparse(G):
        # Canonical CSR, so equal matrices in different formats or orders hash equally.
        A = sp.csr_matrix(G, copy=True)
        A.sum_duplicates()
        A.sort_indices()
        h.update(f"sparse|{A.dtype.str}|{A.shape}|".encode())
        for part in (A.indptr.astype(np.int64), A.indices.astype(np.int64), A.data):
            h.update(np.ascontiguousarray(part).tobytes())
        return h.hexdigest()
    return None


def _cache_path(G, src, rank, cache_dir, key):
    if cache_dir is None:
        return None
    if key is not None:
        base = f"key|{key}"
    else:
        base = _data_hash(G)
        if base is None:
            attr = getattr(G, "cache_key", None)
            if attr is None:
                return None
            base = f"attr|{attr}"
    ident = f"v{_CACHE_VERSION}|{base}|{tuple(src.shape)}|{np.dtype(src.dtype).str}|{rank}"
    digest = hashlib.sha256(ident.encode()).hexdigest()[:32]
    return Path(cache_dir) / f"reference_{digest}_r{rank}.npz"


def _save(path, res):
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp.npz")
    np.savez(
        tmp,
        U=res.U,
        s=res.s,
        V=res.V,
        method=np.array(res.info["method"]),
        seconds=np.array(res.info["seconds"]),
    )
    # Atomic publish: a concurrent reader never sees a half-written file.
    os.replace(tmp, path)


def _load(path):
    with np.load(path, allow_pickle=False) as f:
        info = {"method": str(f["method"]), "seconds": float(f["seconds"]), "cached": True,
                "cache_file": str(path)}
        return SVDResult(U=f["U"].copy(), s=f["s"].copy(), V=f["V"].copy(), info=info)


def _is_structured(G):
    """Whether ``G`` is a StructuredKernelSource (duck-typed: an exact ``svd`` of its own)."""
    if hasattr(G, "svd") and hasattr(G, "low_rank_factors"):
        return True
    try:
        from ksvd_bench.kernels.structured import StructuredKernelSource
    except ImportError:
        return False
    return isinstance(G, StructuredKernelSource)


def reference_svd(G, rank, *, cache_dir=None, key=None, max_dense_entries=None) -> SVDResult:
    """The exact top-``rank`` SVD of ``G``, optionally cached on disk.

    Parameters
    ----------
    G : ndarray, sparse matrix, LinearOperator or matrix source
        The matrix (anything :func:`solvers.as_source` accepts).
    rank : int
        Number of triplets, ``1 <= rank <= min(N, M)``.
    cache_dir : str or Path, optional
        Directory of the cache. Without it nothing is read or written.
    key : str, optional
        Identifies the problem in the cache. When not given, arrays and sparse matrices are
        identified by a sha256 of their numbers, and other sources by their ``cache_key``
        attribute if they have one; otherwise nothing is cached.
    max_dense_entries : int, optional
        ``N * M`` up to which a dense LAPACK SVD is used, default
        :data:`DENSE_REFERENCE_MAX_ENTRIES`.

    Returns
    -------
    reference : SVDResult
        Singular values descending, the solvers' sign convention (largest-magnitude entry of
        each ``U[:, i]`` positive). ``info["method"]`` is ``"lapack_gesdd"``, ``"lapack_gesvd"``,
        ``"arpack"`` or ``"structured"``; ``info["cached"]`` tells whether it came from the
        cache.

    Notes
    -----
    Small problems are materialised (``source_to_dense``) and decomposed with
    :func:`scipy.linalg.svd` (``gesdd``, falling back to ``gesvd`` if it fails to converge),
    which is exact to rounding. Larger ones use ARPACK through
    ``solvers.svd(method="tsvd", tol=0)`` with a fixed seed, accurate to machine precision
    for separated singular values. A
    :class:`~ksvd_bench.kernels.structured.StructuredKernelSource` is decomposed by
    :func:`~ksvd_bench.kernels.structured.structured_svd` (exact: an exact compression of its
    sparse-plus-rank-few form, then LAPACK or ARPACK at ``tol=0`` on the small core, seed 0),
    cached under its ``cache_key``. All are deterministic. Cache files are ``.npz`` read with
    ``allow_pickle=False``, written atomically; ``rank`` and the shape are part of the key.
    """
    src = as_source(G)
    shape = tuple(int(n) for n in src.shape)
    rank = _check_rank(rank, shape)
    limit = DENSE_REFERENCE_MAX_ENTRIES if max_dense_entries is None else max_dense_entries
    path = _cache_path(G, src, rank, cache_dir, key)
    if path is not None and path.exists():
        return _load(path)
    t0 = time.perf_counter()
    if _is_structured(G):
        # Exact SVD of the sparse-plus-rank-few form (a compressed core; PubMed ~0.04 s)
        # instead of densifying N x M or running ARPACK on the full operator.
        from ksvd_bench.kernels.structured import structured_svd

        out = structured_svd(G, rank, random_state=0)
        U = np.array(out.U, dtype=np.float64)
        V = np.array(out.V, dtype=np.float64)
        fix_signs(U, V)
        res = SVDResult(U=U, s=np.array(out.s, dtype=np.float64), V=V,
                        info={"method": "structured"})
    elif shape[0] * shape[1] <= limit:
        A = np.asarray(source_to_dense(src), dtype=np.float64)
        if not np.all(np.isfinite(A)):
            raise ValueError("G contains non-finite entries")
        try:
            U, s, Vt = sla.svd(A, full_matrices=False, lapack_driver="gesdd")
            method = "lapack_gesdd"
        except np.linalg.LinAlgError:
            U, s, Vt = sla.svd(A, full_matrices=False, lapack_driver="gesvd")
            method = "lapack_gesvd"
        U = np.array(U[:, :rank])
        V = np.array(Vt[:rank].T)
        s = np.array(s[:rank])
        fix_signs(U, V)
        res = SVDResult(U=U, s=s, V=V, info={"method": method})
    else:
        import solvers

        out = solvers.svd(G, rank, method="tsvd", tol=0.0, random_state=0)
        U = np.array(out.U, dtype=np.float64)
        V = np.array(out.V, dtype=np.float64)
        fix_signs(U, V)
        res = SVDResult(U=U, s=np.array(out.s, dtype=np.float64), V=V,
                        info={"method": "arpack"})
    res.info["seconds"] = time.perf_counter() - t0
    res.info["cached"] = False
    if path is not None:
        _save(path, res)
        res.info["cache_file"] = str(path)
    return res


# ---------------------------------------------------------------------------------------------
# effort schedules
# ---------------------------------------------------------------------------------------------


def effort_schedule(method, rank, shape, *, max_effort=None, start=None, growth=1.25):
    """The efforts the driver tries for a method, smallest first.

    Parameters
    ----------
    method : {"tsvd", "rsvd", "sym_nystrom", "asym_nystrom"}
    rank : int
        Number of triplets sought.
    shape : tuple of int
        ``(N, M)``.
    max_effort : int, optional
        Cap. Default ``min(N, M)`` for the Nyström methods (all columns) and
        ``min(N, M) - rank`` for RSVD (a sketch as wide as the matrix).
    start : int, optional
        First effort; default ``2 * rank`` (Nyström) or 0 (RSVD).
    growth : float, default=1.25
        Factor between consecutive Nyström sample sizes.

    Returns
    -------
    efforts : list of int
        Strictly increasing, the last equal to the cap. Nyström: the number of sampled
        columns ``m``, geometric by ``growth``; RSVD: ``n_oversamples`` 0, 5, 10, 20, 40, ...
        (doubling after 5); TSVD: ``[0]``, a single run whose accuracy is set by the
        solver's ``tol`` (``max_effort`` is ignored).

    Raises
    ------
    ValueError
        On an unknown method, a cap below the smallest admissible effort (``rank`` for
        Nyström, 0 for RSVD), ``growth <= 1`` or a negative ``start``.
    """
    methods = _methods()
    if method not in methods:
        raise ValueError(f"method must be one of {methods}, got {method!r}")
    if len(shape) != 2:
        raise ValueError(f"shape must be (N, M), got {shape!r}")
    shape = (int(shape[0]), int(shape[1]))
    rank = _check_rank(rank, shape)
    if not (isinstance(growth, (int, float)) and growth > 1):
        raise ValueError(f"growth must be a number > 1, got {growth!r}")
    if method == "tsvd":
        return [0]
    if method in _NYSTROM:
        default_cap, lowest, first = min(shape), rank, 2 * rank
    else:
        default_cap, lowest, first = min(shape) - rank, 0, 0
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
        if method in _NYSTROM:
            e = max(e + 1, math.ceil(e * growth))
        else:
            e = 5 if e < 5 else 2 * e
    efforts.append(cap)
    return efforts


# ---------------------------------------------------------------------------------------------
# the driver
# ---------------------------------------------------------------------------------------------


@dataclass
class ToleranceResult:
    """Outcome of :func:`solve_to_tolerance`.

    Attributes
    ----------
    method : str
    effort : int
        Effort of the returned answer (``result.info["effort"]``: ``m`` for Nyström,
        ``n_oversamples`` for RSVD, what the solver reports for TSVD).
    eta : float
        eta of the returned answer against the reference (NaN when there is none).
    seconds : float
        Median wall time over ``repeats`` runs at that effort (JIT warm-up excluded).
    converged : bool
        Whether the stopping quantity reached ``eps``. When False, the answer is the best
        one seen (lowest eta, or lowest residual estimate without a reference).
    result : SVDResult
        The answer.
    history : list of dict
        One entry per effort tried: ``effort``, ``eta``, ``residual_estimate``, ``seconds``,
        ``converged``, ``n_matvec``, ``n_block_entries``.
    residual_estimate : float
        Residual estimate of eta for the returned answer (NaN if not computed).
    eps, stop, weights :
        The request.
    all_seconds : list of float
        The ``repeats`` timings behind ``seconds``.
    stopped_by : {"converged", "cap", "time_limit"}
        Why the effort stopped growing.
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


def _check_schedule(schedule, method, rank, max_effort):
    if method == "tsvd":
        raise ValueError("schedule is not used by tsvd (a single run); pass schedule=None")
    if any(isinstance(e, bool) or not isinstance(e, (int, np.integer)) for e in schedule):
        raise ValueError(f"schedule must hold ints, got {list(schedule)!r}")
    efforts = [int(e) for e in schedule]
    if not efforts:
        raise ValueError("schedule must not be empty")
    if any(b <= a for a, b in zip(efforts[:-1], efforts[1:], strict=True)):
        raise ValueError(f"schedule must be strictly increasing, got {efforts}")
    lowest = rank if method in _NYSTROM else 0
    if efforts[0] < lowest:
        raise ValueError(f"schedule entries must be at least {lowest} for {method}")
    if max_effort is not None:
        efforts = [e for e in efforts if e <= max_effort]
        if not efforts:
            raise ValueError(f"no schedule entry is <= max_effort={max_effort}")
    return efforts


def solve_to_tolerance(
    G,
    rank,
    method,
    eps,
    *,
    reference=None,
    weights="singular_values",
    stop="reference",
    random_state=None,
    schedule=None,
    max_effort=None,
    repeats=1,
    options=None,
    n_iter=4,
    cache_dir=None,
    track_residual=True,
    time_limit=None,
    residual_operator=None,
) -> ToleranceResult:
    """Grow a solver's effort until its answer meets ``eps``; time it there.

    Parameters
    ----------
    G : ndarray, sparse matrix, LinearOperator or matrix source
    rank : int
        Number of triplets sought.
    method : {"tsvd", "rsvd", "sym_nystrom", "asym_nystrom"}
    eps : float
        Tolerance (> 0) on eta (``stop="reference"``) or on the residual estimate
        (``stop="residual"``).
    reference : SVDResult, optional
        Exact SVD with at least ``rank`` triplets (the first ``rank`` are used). Computed with
        :func:`reference_svd` (cached in ``cache_dir``) when ``stop="reference"`` and not
        given; not computed for ``stop="residual"``.
    weights : {"singular_values", "relative", "uniform"}, default="singular_values"
        Weighting of eta and of its residual estimate (see :mod:`ksvd_bench.metrics`).
    stop : {"reference", "residual"}, default="reference"
        Stopping quantity: eta against the reference, or
        :func:`~ksvd_bench.metrics.residual_estimate` (needs only products with ``G``; eta is
        still recorded when a reference is given).
    random_state : None, int or numpy.random.Generator
        Seeds every solver call (one seed drawn per effort, so a run is reproducible).
    schedule : sequence of int, optional
        Efforts to try (strictly increasing), default :func:`effort_schedule`.
    max_effort : int, optional
        Cap on the effort (see :func:`effort_schedule`); ignored by TSVD.
    repeats : int, default=1
        Timed runs at the final effort; ``seconds`` is their median.
    options : dict, optional
        Passed to :func:`solvers.svd` (e.g. ``sampling``, ``tol``, ``backend``). Must not set
        the effort parameter (``n_samples`` / ``n_oversamples``) or ``n_iter``.
    n_iter : int or "auto", default=4
        RSVD power iterations, fixed along the schedule; ignored by other methods.
    cache_dir : str or Path, optional
        Cache directory for the reference computed here.
    track_residual : bool, default=True
        Record the residual estimate at every effort (costs a few products with ``G``);
        always on for ``stop="residual"``.
    time_limit : float, optional
        Wall-clock seconds the sweep may take (solves and metrics, warm-up excluded): once it
        has run that long no larger effort is tried, and the result is ``converged=False``
        with ``stopped_by="time_limit"``. The step that crosses the limit still completes, so
        the total can exceed it by one step. None: the schedule decides.
    residual_operator : matrix source, optional
        The same matrix as ``G`` in a form that is cheaper to multiply (for example the exact
        :class:`~ksvd_bench.kernels.StructuredKernelSource` of a dense kernel matrix), used for
        the residual estimates only. Default: ``G``.

    Returns
    -------
    ToleranceResult

    Notes
    -----
    Before the timed runs the solver is called once, untimed, at the smallest effort, so that
    Numba compilation and first-touch costs are not charged to any effort. Efforts are tried
    in order and the first meeting ``eps`` is returned. The loop is bounded by the schedule,
    so the driver always terminates; at the cap it returns ``converged=False`` and the best
    answer seen. TSVD is run once at the solver's ``tol`` (0 unless ``options`` says
    otherwise). The reported ``seconds`` cover the solver call only (not the reference, not
    the metrics).
    """
    import solvers

    methods = tuple(solvers.METHODS)
    if method not in methods:
        raise ValueError(f"method must be one of {methods}, got {method!r}")
    if weights not in WEIGHTS:
        raise ValueError(f"weights must be one of {WEIGHTS}, got {weights!r}")
    if stop not in STOPS:
        raise ValueError(f"stop must be one of {STOPS}, got {stop!r}")
    if isinstance(eps, bool) or not isinstance(eps, (int, float, np.floating, np.integer)):
        raise TypeError(f"eps must be a number, got {type(eps).__name__}")
    if not (np.isfinite(eps) and eps > 0):
        raise ValueError(f"eps must be a finite number > 0, got {eps!r}")
    if isinstance(repeats, bool) or not isinstance(repeats, (int, np.integer)) or repeats < 1:
        raise ValueError(f"repeats must be an int >= 1, got {repeats!r}")
    if time_limit is not None and not (np.isfinite(time_limit) and time_limit > 0):
        raise ValueError(f"time_limit must be a finite number > 0 or None, got {time_limit!r}")
    if max_effort is not None and (isinstance(max_effort, bool)
                                   or not isinstance(max_effort, (int, np.integer))):
        raise TypeError(f"max_effort must be an int or None, got {type(max_effort).__name__}")
    options = dict(options or {})
    effort_key = _EFFORT_OPTION.get(method)
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

    src = as_source(G)
    shape = tuple(int(n) for n in src.shape)
    rank = _check_rank(rank, shape)
    res_src = src if residual_operator is None else as_source(residual_operator)
    if tuple(res_src.shape) != shape:
        raise ValueError(f"residual_operator has shape {tuple(res_src.shape)}, G has {shape}")
    if schedule is None:
        efforts = effort_schedule(method, rank, shape, max_effort=max_effort)
    else:
        efforts = _check_schedule(schedule, method, rank, max_effort)

    if reference is None and stop == "reference":
        reference = reference_svd(src if cache_dir is None else G, rank, cache_dir=cache_dir)
    if reference is not None:
        if len(reference.s) < rank:
            raise ValueError(
                f"reference holds {len(reference.s)} triplets, fewer than rank={rank}"
            )
        reference = SVDResult(U=np.asarray(reference.U)[:, :rank],
                              s=np.asarray(reference.s)[:rank],
                              V=np.asarray(reference.V)[:, :rank],
                              info=dict(getattr(reference, "info", {})))
    track_residual = track_residual or stop == "residual"

    rng = np.random.default_rng(random_state)
    seeds = rng.integers(0, 2**63 - 1, size=len(efforts) + 1)

    def run(effort, seed):
        kw = dict(options)
        if effort_key is not None:
            kw[effort_key] = int(effort)
        t0 = time.perf_counter()
        out = solvers.svd(src, rank, method=method, random_state=int(seed), **kw)
        return out, time.perf_counter() - t0

    run(efforts[0], seeds[-1])  # warm-up: JIT compilation and first-touch costs

    history = []
    best = None  # (score, index, result, seconds)
    chosen = None
    stopped_by = "cap"
    t_start = time.perf_counter()
    for idx, effort in enumerate(efforts):
        out, secs = run(effort, seeds[idx])
        e = eta(reference, out, weights=weights) if reference is not None else float("nan")
        est = (residual_estimate(res_src, out, weights=weights) if track_residual
               else float("nan"))
        value = e if stop == "reference" else est
        ok = bool(value <= eps)
        history.append({
            "effort": int(out.info.get("effort", effort)),
            "eta": e,
            "residual_estimate": est,
            "seconds": secs,
            "converged": ok,
            "n_matvec": int(out.info.get("n_matvec", 0)),
            "n_block_entries": int(out.info.get("n_block_entries", 0)),
        })
        # Best answer: lowest eta when it is known, else lowest residual estimate.
        score = e if reference is not None else est
        if best is None or score < best[0]:
            best = (score, idx, out, secs)
        if ok:
            chosen = (idx, out, secs)
            stopped_by = "converged"
            break
        spent = time.perf_counter() - t_start
        if time_limit is not None and spent > time_limit and idx + 1 < len(efforts):
            stopped_by = "time_limit"
            break
    converged = chosen is not None
    if not converged:
        chosen = best[1:]
    idx, out, first_secs = chosen
    timings = [first_secs]
    for _ in range(repeats - 1):
        timings.append(run(efforts[idx], seeds[idx])[1])
    return ToleranceResult(
        method=method,
        effort=history[idx]["effort"],
        eta=history[idx]["eta"],
        seconds=float(np.median(timings)),
        converged=converged,
        result=out,
        history=history,
        residual_estimate=history[idx]["residual_estimate"],
        eps=float(eps),
        stop=stop,
        weights=weights,
        all_seconds=timings,
        stopped_by=stopped_by,
    )
