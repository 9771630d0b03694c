"""Run a solver at growing effort until it meets an accuracy tolerance (the eta-tolerance driver).

A benchmark that times solvers at fixed parameters compares answers of different quality. The
driver instead fixes the quality: it grows each method's effort parameter along a schedule
(:func:`effort_schedule`) until an accuracy measure against a reference SVD is at most ``eps``
(``metric``: the paper's eta, the gap-robust low-rank error or the subspace error; without a
reference, ``stop="estimate"``: a reference-free estimate of the relative low-rank error), and
reports the time at that effort. An answer counts only as a whole: its singular values and the
pairing of ``U``, ``s`` and ``V`` are checked too, and an answer the solver marked unreliable
never converges (:func:`solve_to_tolerance`, Notes). References come from
:func:`reference_svd`, cached on disk; the scoring of one answer is in
:mod:`ksvd_bench._scoring`.
"""

from __future__ import annotations

import hashlib
import math
import numbers
import os
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

import solvers
from ksvd_bench._scoring import Scorer, exact_fro2, recording_warnings, reemit, warning_fields
from ksvd_bench.metrics import (
    CLUSTER_RTOL,
    WEIGHTS,
    _check_cluster_rtol,
    residuals,
)
from solvers import (
    N_PROBES,
    PROBE_SAFETY,
    SVDResult,
    as_source,
    check_random_state,
    fix_signs,
    source_to_dense,
)

__all__ = [
    "DENSE_REFERENCE_MAX_ENTRIES",
    "METRICS",
    "STOPS",
    "ToleranceResult",
    "definition_key",
    "reference_svd",
    "effort_schedule",
    "solve_to_tolerance",
]

#: Largest ``N * M`` for which :func:`reference_svd` uses a dense LAPACK SVD (320 MB in float64).
DENSE_REFERENCE_MAX_ENTRIES = 40_000_000
#: Stopping rules of :func:`solve_to_tolerance`: the measure against a reference, the
#: reference-free estimate of the low-rank error, the residual estimate of eta.
STOPS = ("reference", "estimate", "residual")
#: Accuracy measures the driver can stop on (see :mod:`ksvd_bench.metrics`).
METRICS = ("eta", "lowrank", "subspace")
_NYSTROM = ("sym_nystrom", "asym_nystrom")
#: The solver option each method's effort sets.
_EFFORT_OPTION = {
    "sym_nystrom": "n_samples",
    "asym_nystrom": "n_samples",
    "rsvd": "n_oversamples",
    "block_krylov": "n_iter",
    "generalized_nystrom": "n_oversamples",
}
# Block oversampling of block_krylov assumed when the solver's own default cannot be read.
_BLOCK_KRYLOV_OVERSAMPLES = 10
# Bumped whenever the way references are computed changes, so stale cache files are not reused.
_CACHE_VERSION = 1
# Mixed into an effort's seed for its probes, so they are independent of the solver's draws.
_PROBE_SEED_SALT = 0x5EED_9A0BE
# Largest residual (relative to s_1) of a cached reference that is taken to belong to G: far
# above the rounding of an exact SVD of a matrix that differs in the last bits (1e-15), far
# below what any other matrix gives.
_CACHE_MATCH_RTOL = 1e-6


def _check_rank(rank, shape):
    if not isinstance(rank, (int, np.integer)) or isinstance(rank, bool):
        raise TypeError(f"rank must be an int, got {type(rank).__name__}")
    if not 1 <= rank <= min(shape):
        raise ValueError(f"rank must be in [1, {min(shape)}] for a {shape} matrix, got {rank}")
    return int(rank)


# ---------------------------------------------------------------------------------------------
# cache keys
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


def _feed(h, part):
    """Add one part of a definition to the digest, tagged by type so that parts cannot alias."""
    if part is None or isinstance(part, (bool, np.bool_)):
        h.update(f"c{part!r};".encode())
    elif isinstance(part, numbers.Integral):
        h.update(f"i{int(part)};".encode())
    elif isinstance(part, numbers.Real):
        h.update(f"f{float(part).hex()};".encode())
    elif isinstance(part, (str, Path)):
        text = str(part)
        h.update(f"s{len(text)}:{text};".encode())
    elif isinstance(part, bytes):
        h.update(f"b{len(part)}:".encode() + part + b";")
    elif isinstance(part, np.dtype) or (isinstance(part, type)
                                        and issubclass(part, (np.generic, int, float))):
        h.update(f"d{np.dtype(part).str};".encode())
    elif isinstance(part, np.ndarray) or sp.issparse(part):
        h.update(f"a{_data_hash(part)};".encode())
    elif isinstance(part, (tuple, list)):
        h.update(f"l{len(part)}(".encode())
        for item in part:
            _feed(h, item)
        h.update(b")")
    elif isinstance(part, dict):
        h.update(f"m{len(part)}(".encode())
        for name in sorted(part, key=str):
            _feed(h, str(name))
            _feed(h, part[name])
        h.update(b")")
    elif getattr(part, "cache_key", None) is not None:
        _feed(h, ("cache_key", part.cache_key))
    else:
        raise TypeError(
            "key parts must be None, bool, numbers, str, bytes, dtypes, arrays, sparse "
            f"matrices, tuples, lists, dicts or objects with a cache_key; got "
            f"{type(part).__name__}"
        )


def definition_key(*parts) -> str:
    """A stable digest of a problem's definition, for :func:`reference_svd`'s ``key``.

    Parameters
    ----------
    *parts
        What defines the matrix: names, parameters and the input data, e.g.
        ``definition_key("cora", "sne", {"center": True, "bandwidth_factor": 1.0}, A)``.
        Accepted: None, bool, int, float (hashed exactly), str, bytes, numpy dtypes, arrays
        and sparse matrices (hashed by their numbers, sparse in canonical CSR), and tuples,
        lists and dicts of those (dicts in key order), and objects with a ``cache_key``.

    Returns
    -------
    key : str
        A sha256 hex digest. Equal definitions give equal keys in every run and on every
        machine, however the matrix built from them rounds.

    Raises
    ------
    TypeError
        On a part of another type.

    Notes
    -----
    Key a derived matrix (a kernel matrix, a centred one) by its *inputs*, not by its bits:
    a kernel built by a freshly compiled Numba function and the same kernel built by the
    cached one can differ in the last bit, which changes a hash of the matrix.
    """
    h = hashlib.sha256(b"ksvd-bench definition|")
    _feed(h, parts)
    return h.hexdigest()


def _cache_base(G, key):
    """``(base, keyed)``: the cache identity of ``G`` and whether it names a definition.

    ``keyed`` entries are not a hash of the numbers, so a hit is checked against ``G``.
    """
    if key is not None:
        if isinstance(key, str):
            return f"key|{key}", True
        return f"def|{definition_key(key)}", True
    base = _data_hash(G)
    if base is not None:
        return base, False
    attr = getattr(G, "cache_key", None)
    if attr is None:
        return None, False
    return f"attr|{attr}", True


def _cache_path(G, src, rank, cache_dir, key, cluster_rtol):
    """``(path, keyed)`` of the cache file, ``(None, False)`` when nothing is cached."""
    if cache_dir is None:
        return None, False
    base, keyed = _cache_base(G, key)
    if base is None:
        return None, False
    ident = f"v{_CACHE_VERSION}|{base}|{tuple(src.shape)}|{np.dtype(src.dtype).str}|{rank}"
    if cluster_rtol is not None:
        ident += f"|clusters {float(cluster_rtol).hex()}"
    digest = hashlib.sha256(ident.encode()).hexdigest()[:32]
    return Path(cache_dir) / f"reference_{digest}_r{rank}.npz", keyed


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


def _belongs_to(src, res):
    """Whether cached triplets are singular triplets of ``src`` (one matmat and rmatmat)."""
    try:
        worst = residuals(src, res)["max"]
    except ValueError:  # another shape: certainly another matrix
        return False
    return bool(worst <= _CACHE_MATCH_RTOL)


def _load_cached(path, src, check):
    """The cached reference at ``path``, or None when there is none or it does not fit ``G``."""
    if path is None or not path.exists():
        return None
    res = _load(path)
    if check and not _belongs_to(src, res):
        warnings.warn(
            f"the cached reference {path} does not belong to G (its residual exceeds "
            f"{_CACHE_MATCH_RTOL:g}); recomputing it: the cache key names another matrix",
            RuntimeWarning,
            stacklevel=3,
        )
        return None
    return res


# ---------------------------------------------------------------------------------------------
# reference SVD
# ---------------------------------------------------------------------------------------------


def _is_structured(G):
    """Whether ``G`` is a StructuredKernelSource (duck-typed: an exact ``svd`` of its own)."""
    if hasattr(G, "svd") and hasattr(G, "low_rank_factors"):
        return True
    try:
        from ksvd_bench.kernels.structured import StructuredKernelSource
    except ImportError:
        return False
    return isinstance(G, StructuredKernelSource)


def _closing_rank(s, rank, cluster_rtol, complete):
    """Smallest ``k >= rank`` at a gap of the values (``s[k-1] - s[k] > cluster_rtol * s[0]``).

    ``s`` holds the leading values; ``complete`` says whether they are all of ``G``'s (then
    the end closes the last cluster). None when the computed values do not reach a gap.
    """
    if cluster_rtol is None:
        return rank
    for k in range(rank, s.size):
        if s[k - 1] - s[k] > cluster_rtol * s[0]:
            return k
    return s.size if complete else None


def _past_the_cut_cluster(compute, rank, k_max, cluster_rtol):
    """Triplets from ``compute(k)`` for growing ``k`` until a gap closes the cluster at ``rank``."""
    if cluster_rtol is None:
        return compute(rank)
    k = min(k_max, rank + max(2, rank // 2))
    while True:
        U, s, V = compute(k)
        j = _closing_rank(s, rank, cluster_rtol, complete=k >= k_max)
        if j is not None:
            return U[:, :j], s[:j], V[:, :j]
        k = min(k_max, 2 * k)


def _structured_triplets(G, k):
    # Exact SVD of the sparse-plus-rank-few form (a compressed core; PubMed ~0.04 s) instead
    # of densifying N x M or running ARPACK on the full operator.
    from ksvd_bench.kernels.structured import structured_svd

    out = structured_svd(G, k, random_state=0)
    return (np.array(out.U, dtype=np.float64), np.array(out.s, dtype=np.float64),
            np.array(out.V, dtype=np.float64))


def _arpack_triplets(G, k):
    out = solvers.svd(G, k, method="tsvd", tol=0.0, random_state=0)
    return (np.array(out.U, dtype=np.float64), np.array(out.s, dtype=np.float64),
            np.array(out.V, dtype=np.float64))


def _dense_svd(src):
    """Full LAPACK SVD of the materialised matrix: ``(U, s, Vt, driver name)``."""
    A = np.asarray(source_to_dense(src), dtype=np.float64)
    if not np.all(np.isfinite(A)):
        raise ValueError("G contains non-finite entries")
    try:
        return (*sla.svd(A, full_matrices=False, lapack_driver="gesdd"), "lapack_gesdd")
    except np.linalg.LinAlgError:
        return (*sla.svd(A, full_matrices=False, lapack_driver="gesvd"), "lapack_gesvd")


def _compute_reference(G, src, shape, rank, max_dense_entries, cluster_rtol):
    """The reference triplets by the cheapest exact route, in the solvers' sign convention."""
    if _is_structured(G):
        U, s, V = _past_the_cut_cluster(lambda k: _structured_triplets(G, k), rank,
                                        min(shape), cluster_rtol)
        method = "structured"
    elif shape[0] * shape[1] <= max_dense_entries:
        U_all, s_all, Vt_all, method = _dense_svd(src)
        k = _closing_rank(s_all, rank, cluster_rtol, complete=True)
        U, s, V = np.array(U_all[:, :k]), np.array(s_all[:k]), np.array(Vt_all[:k].T)
    else:
        # ARPACK needs k < min(N, M).
        U, s, V = _past_the_cut_cluster(lambda k: _arpack_triplets(G, k), rank,
                                        max(rank, min(shape) - 1), cluster_rtol)
        method = "arpack"
    fix_signs(U, V)
    return SVDResult(U=U, s=s, V=V, info={"method": method})


def reference_svd(G, rank, *, cache_dir=None, key=None, max_dense_entries=None,
                  cluster_rtol=None, verify=True) -> SVDResult:
    """The exact top-``rank`` SVD of ``G``, optionally cached on disk.

    Parameters
    ----------
    G : ndarray, sparse matrix, LinearOperator or matrix source
        The matrix (anything :func:`solvers.as_source` accepts).
    rank : int
        Number of triplets, ``1 <= rank <= min(N, M)``.
    cache_dir : str or Path, optional
        Directory of the cache. Without it nothing is read or written.
    key : str or definition, optional
        Identifies the problem in the cache: a string, or anything :func:`definition_key`
        digests (e.g. ``("cora", "sne", params, A)``). Give it for a *derived* matrix (a
        kernel matrix): it is keyed by its definition, so a last-bit difference in how ``G``
        was computed still hits the cache. When not given, arrays and sparse matrices are
        identified by a sha256 of their numbers, and other sources by their ``cache_key``
        attribute if they have one; otherwise nothing is cached.
    max_dense_entries : int, optional
        ``N * M`` up to which a dense LAPACK SVD is used, default
        :data:`DENSE_REFERENCE_MAX_ENTRIES`.
    cluster_rtol : float, optional
        When given, return more than ``rank`` triplets if the cut at ``rank`` falls inside a
        cluster of singular values (:func:`ksvd_bench.metrics.singular_value_groups`): the
        first ``k >= rank`` with ``s[k-1] - s[k] > cluster_rtol * s[0]``, or all. The metrics
        need the whole cluster to score a cut one (pass ``rank=`` to them). None (default):
        exactly ``rank`` triplets.
    verify : bool, default=True
        Check a cache hit found by ``key`` or ``cache_key`` against ``G`` (one ``matmat`` and
        one ``rmatmat``): a reference whose largest residual exceeds ``1e-6 * s[0]`` is
        recomputed with a RuntimeWarning. Hits found by hashing the numbers need no check.

    Returns
    -------
    reference : SVDResult
        Singular values descending, the solvers' sign convention (largest-magnitude entry of
        each ``U[:, i]`` positive). ``info["method"]`` is ``"lapack_gesdd"``, ``"lapack_gesvd"``,
        ``"arpack"`` or ``"structured"``; ``info["cached"]`` tells whether it came from the
        cache; ``info["rank"]`` is the ``rank`` asked for.

    Raises
    ------
    TypeError
        On a non-integer ``rank`` or a ``key`` part :func:`definition_key` cannot digest.
    ValueError
        On ``rank`` out of range, a bad ``cluster_rtol`` or a non-finite dense ``G``.

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
    cached under its ``cache_key``. With ``cluster_rtol`` the iterative routes compute
    ``rank + max(2, rank // 2)`` triplets and double that until a gap closes the cluster. All
    are deterministic. Cache files are ``.npz`` read with ``allow_pickle=False``, written
    atomically; ``rank``, ``cluster_rtol`` and the shape are part of the key.
    """
    src = as_source(G)
    shape = tuple(int(n) for n in src.shape)
    rank = _check_rank(rank, shape)
    cluster_rtol = _check_cluster_rtol(cluster_rtol)
    if not isinstance(verify, (bool, np.bool_)):
        raise TypeError(f"verify must be True or False, got {verify!r}")
    limit = DENSE_REFERENCE_MAX_ENTRIES if max_dense_entries is None else max_dense_entries
    path, keyed = _cache_path(G, src, rank, cache_dir, key, cluster_rtol)
    res = _load_cached(path, src, check=bool(verify) and keyed)
    if res is not None:
        res.info["rank"] = rank
        return res
    t0 = time.perf_counter()
    res = _compute_reference(G, src, shape, rank, limit, cluster_rtol)
    res.info.update(seconds=time.perf_counter() - t0, cached=False, rank=rank)
    if path is not None:
        _save(path, res)
        res.info["cache_file"] = str(path)
    return res


# ---------------------------------------------------------------------------------------------
# effort schedules
# ---------------------------------------------------------------------------------------------


def _block_krylov_oversamples(n_oversamples):
    """The block oversampling of ``block_krylov``: given, else the solver's default."""
    if n_oversamples is not None:
        if (isinstance(n_oversamples, bool) or not isinstance(n_oversamples, (int, np.integer))
                or n_oversamples < 0):
            raise ValueError(f"n_oversamples must be a non-negative int, got {n_oversamples!r}")
        return int(n_oversamples)
    import inspect

    fn = getattr(solvers, "block_krylov", None)
    try:
        default = inspect.signature(fn).parameters["n_oversamples"].default
    except (TypeError, ValueError, KeyError):
        return _BLOCK_KRYLOV_OVERSAMPLES
    return int(default) if isinstance(default, (int, np.integer)) else _BLOCK_KRYLOV_OVERSAMPLES


def _effort_range(method, rank, shape, n_oversamples):
    """``(default cap, lowest admissible effort, default first effort)`` of a method."""
    if method in _NYSTROM:
        return min(shape), rank, 2 * rank
    if method == "block_krylov":
        # Krylov depth q: the basis [G W, (G G^T) G W, ...] has (q + 1) blocks of
        # b = min(rank + p, min(N, M)) columns (the solver trims the last one), and at
        # min(N, M) columns it holds the whole range: the answer is exact.
        block = min(rank + _block_krylov_oversamples(n_oversamples), min(shape))
        return max(0, -(-min(shape) // block) - 1), 0, 0
    return min(shape) - rank, 0, 0  # rsvd, generalized_nystrom: oversampling


def _next_effort(method, e, growth):
    if method in _NYSTROM:
        return max(e + 1, math.ceil(e * growth))
    if method == "block_krylov":
        if e < 4:
            return e + 1
        # 4, 6, 8, 12, 16, 24, ...: doubling in two steps, since each step adds passes
        return e * 3 // 2 if e & (e - 1) == 0 else e * 4 // 3
    return 5 if e < 5 else 2 * e


def effort_schedule(method, rank, shape, *, max_effort=None, start=None, growth=1.25,
                    n_oversamples=None):
    """The efforts the driver tries for a method, smallest first.

    Parameters
    ----------
    method : str
        One of ``solvers.METHODS``.
    rank : int
        Number of triplets sought.
    shape : tuple of int
        ``(N, M)``.
    max_effort : int, optional
        Cap. Default ``min(N, M)`` for the Nyström methods (all columns),
        ``min(N, M) - rank`` for RSVD and generalized Nyström (a sketch as wide as the
        matrix), and for block Krylov the smallest depth ``q`` whose basis of ``q + 1``
        blocks of ``rank + n_oversamples`` columns spans ``min(N, M)`` dimensions (exact).
    start : int, optional
        First effort; default ``2 * rank`` (Nyström) or 0.
    growth : float, default=1.25
        Factor between consecutive Nyström sample sizes.
    n_oversamples : int, optional
        Block oversampling of ``block_krylov`` (its cap only); default the solver's.

    Returns
    -------
    efforts : list of int
        Strictly increasing, the last equal to the cap. Nyström: the number of sampled
        columns ``m``, geometric by ``growth``; RSVD and generalized Nyström:
        ``n_oversamples`` 0, 5, 10, 20, 40, ... (doubling after 5); block Krylov: the number
        of iterations ``n_iter`` 0, 1, 2, 3, 4, 6, 8, 12, 16, ... (the depth is what buys
        its accuracy, gap-independently, at two passes per step; the block stays
        ``rank + n_oversamples``); TSVD: ``[0]``, a single run whose accuracy is set by the
        solver's ``tol`` (``max_effort`` is ignored).

    Raises
    ------
    ValueError
        On an unknown method, a cap below the smallest admissible effort (``rank`` for
        Nyström, 0 otherwise), ``growth <= 1`` or a negative ``start``.
    """
    methods = tuple(solvers.METHODS)
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
    default_cap, lowest, first = _effort_range(method, rank, shape, n_oversamples)
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
        e = _next_effort(method, e, growth)
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
        ``n_oversamples`` for RSVD and generalized Nyström, ``n_iter`` for block Krylov,
        what the solver reports for TSVD).
    eta : float
        eta of the returned answer against the reference (NaN when there is none).
    seconds : float
        Median wall time over ``repeats`` runs at that effort (JIT warm-up excluded).
    converged : bool
        Whether the answer was accepted: its stopping quantity is at most ``eps``, its
        ``sv_error`` at most ``sv_tol``, its ``triplet_residual`` at most ``triplet_tol``,
        and it is ``reliable``. When False, the answer is the best one seen (lowest
        ``metric``, or lowest reference-free estimate without a reference).
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
        ``warnings``, ``reliable``, ``seconds``, ``converged``, ``n_matvec``,
        ``n_block_entries``, ``n_passes``. A measure not computed is NaN.
    residual_estimate : float
        Residual estimate of eta for the returned answer (NaN if not computed).
    eps, stop, weights, metric :
        The request (``stop`` resolved: ``"reference"``, ``"estimate"`` or ``"residual"``).
    all_seconds : list of float
        The ``repeats`` timings behind ``seconds``.
    stopped_by : {"converged", "cap", "time_limit"}
        Why the effort stopped growing.
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

    def __repr__(self):
        # eta is shown once: as the metric, or beside it when another metric is used
        shown = [f"{self.metric}={self.value:.3g}"]
        if self.metric != "eta":
            shown.append(f"eta={self.eta:.3g}")
        if self.stop == "estimate":
            shown.append(f"relative_error_estimate={self.relative_error_estimate:.3g}")
        shown += [f"sv_error={self.sv_error:.3g}", f"triplet_residual={self.triplet_residual:.3g}"]
        return (f"ToleranceResult(method={self.method!r}, {', '.join(shown)}, "
                f"eps={self.eps:g}, stop={self.stop!r}, converged={self.converged}, "
                f"effort={self.effort}, seconds={self.seconds:.3g}, "
                f"stopped_by={self.stopped_by!r}, n_warnings={self.n_warnings}, "
                f"reliable={self.reliable})")


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


def _check_choice(name, value, choices):
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")


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


def _resolve_stop(stop, metric, reference, cache_dir):
    """``(stop, metric)`` with the defaults filled in (see :func:`solve_to_tolerance`)."""
    if stop is None:
        wants_reference = reference is not None or cache_dir is not None or metric is not None
        stop = "reference" if wants_reference else "estimate"
    return stop, "eta" if metric is None else metric


def _check_request(method, weights, stop, metric, track, eps, repeats, time_limit, max_effort,
                   random_state):
    """Validate the scalar arguments of :func:`solve_to_tolerance`; return ``track`` as a set."""
    _check_choice("method", method, tuple(solvers.METHODS))
    _check_choice("weights", weights, WEIGHTS)
    _check_choice("stop", stop, STOPS)
    _check_choice("metric", metric, METRICS)
    if isinstance(track, str):
        track = (track,)
    for name in track:
        _check_choice("track entries", name, METRICS)
    _check_eps(eps)
    if isinstance(repeats, bool) or not isinstance(repeats, (int, np.integer)) or repeats < 1:
        raise ValueError(f"repeats must be an int >= 1, got {repeats!r}")
    _check_time_limit(time_limit)
    if max_effort is not None and (isinstance(max_effort, bool)
                                   or not isinstance(max_effort, (int, np.integer))):
        raise TypeError(f"max_effort must be an int or None, got {type(max_effort).__name__}")
    # Turned into a Generator once, here, so that a bad seed is named before any work.
    return set(track) | {metric}, check_random_state(random_state)


def _solver_options(method, options, n_iter):
    """The options passed to every solve, and the name of the one the effort sets."""
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
    return options, effort_key


def _efforts(method, rank, shape, schedule, max_effort, options):
    if schedule is not None:
        return _check_schedule(schedule, method, rank, max_effort)
    return effort_schedule(method, rank, shape, max_effort=max_effort,
                           n_oversamples=options.get("n_oversamples")
                           if method == "block_krylov" else None)


def _prepare_reference(G, src, rank, reference, needed, cache_dir, cache_key, cluster_rtol):
    """The reference (computed when ``needed`` and not given), with all its triplets."""
    if reference is None and needed:
        reference = reference_svd(src if cache_dir is None else G, rank, cache_dir=cache_dir,
                                  key=cache_key, cluster_rtol=cluster_rtol)
    if reference is None:
        return None
    if len(reference.s) < rank:
        raise ValueError(f"reference holds {len(reference.s)} triplets, fewer than rank={rank}")
    # Triplets beyond rank are kept: they complete a cluster of singular values cut by rank.
    return SVDResult(U=np.asarray(reference.U), s=np.asarray(reference.s),
                     V=np.asarray(reference.V), info=dict(getattr(reference, "info", {})))


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
    """Try the efforts in order until an answer is accepted, the schedule ends or time runs out.

    Returns ``(history, (index, answer, seconds), converged, stopped_by)``; without
    convergence the answer is the best one seen. Every recorded warning is appended to
    ``caught_all``.
    """
    history = []
    best = None  # (ranking score, index, answer, seconds)
    t_start = time.perf_counter()
    for idx, effort in enumerate(efforts):
        out, secs, caught = run(effort, seeds[idx])
        caught_all.extend(caught)
        measures, stopping, ranking, ok = score(out, int(seeds[idx]) ^ _PROBE_SEED_SALT)
        history.append({
            "effort": int(out.info.get("effort", effort)),
            **measures,
            "stop_value": float(stopping),
            **warning_fields(caught, out.info),
            "seconds": secs,
            "converged": ok,
            "n_matvec": int(out.info.get("n_matvec", 0)),
            "n_block_entries": int(out.info.get("n_block_entries", 0)),
            "n_passes": float(out.info.get("n_passes", float("nan"))),
        })
        if best is None or ranking < best[0] or (math.isnan(best[0]) and not math.isnan(ranking)):
            best = (ranking, idx, out, secs)
        if ok:
            return history, (idx, out, secs), True, "converged"
        spent = time.perf_counter() - t_start
        if time_limit is not None and spent > time_limit and idx + 1 < len(efforts):
            return history, best[1:], False, "time_limit"
    return history, best[1:], False, "cap"


def _initial_fro2(src, norm_fro):
    """``||G||_F^2`` when given or free to read from the source, else None."""
    if norm_fro is not None:
        if isinstance(norm_fro, bool) or not isinstance(norm_fro, numbers.Real):
            raise TypeError(f"norm_fro must be a number or None, got {type(norm_fro).__name__}")
        if not (np.isfinite(norm_fro) and norm_fro >= 0):
            raise ValueError(f"norm_fro must be a finite number >= 0 or None, got {norm_fro!r}")
        return float(norm_fro) ** 2
    return exact_fro2(src)


def solve_to_tolerance(
    G,
    rank,
    method,
    eps,
    *,
    reference=None,
    weights="singular_values",
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
        ``stop="reference"`` and not given; not computed for the other stops.
    weights : {"singular_values", "relative", "uniform"}, default="singular_values"
        Weighting of eta and of its residual estimate (see :mod:`ksvd_bench.metrics`).
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
        given (something to score against), else ``"estimate"``. The reference measures are
        recorded whenever a reference is given.
    metric : {"eta", "lowrank", "subspace"}, optional
        The measure against the reference (default ``"eta"``):
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
        ``||G||_F`` if known exactly: enables the Frobenius-gap estimate on sources that
        cannot give it without a pass (the dense and sparse adapters and the lazy kernel
        sources after their set-up pass give it for free through ``frobenius_norm()``;
        ``norm_bound()`` is an upper bound of ``||G||_2`` and is never used for it).
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
        with fewer than ``rank`` triplets, bad schedules or options that set the effort.

    Notes
    -----
    *The verdict.* An answer is accepted (``converged``) only when all of these hold: its
    stopping quantity is at most ``eps``; with a reference, its singular values are within
    ``sv_tol * s_1`` of the exact ones (:func:`~ksvd_bench.metrics.sv_error`); its triplets
    hang together, ``max(||G V~ - U~ S~||_F, ||G^T U~ - V~ S~||_F) <= triplet_tol
    ||G_r||_F`` (:func:`~ksvd_bench.metrics.triplet_residual`); and the solver did not mark
    it unreliable (``info["reliable"]``, True where absent). eta, the low-rank and the
    subspace error read only the vectors; the last two checks stop an answer with the right
    left subspace but wrong values or a random ``V~`` from winning.

    *Cost of the checks.* Per answer, one pass over ``residual_operator``: a ``sketch`` of
    ``[V~, Omega_p]`` (``rank + n_probes`` columns) and ``U~`` (``rank`` columns), or one
    ``matmat`` and one ``rmatmat`` where the source has no ``sketch``. On a lazy source that
    is a full pass over ``G``; it is made after the solver returns and is never part of
    ``seconds``. The Frobenius-gap estimate and the triplet residual share it.

    *The estimate* (``stop="estimate"``; recorded always). ``E`` estimates the error of the
    rank-``rank`` projection the answer defines, ``||G - U~ U~^T G||_F`` (``U~`` with unit
    columns: the numerator of ``"lowrank"``), and the stop asks the fixed-accuracy question
    of Halko, Martinsson & Tropp: is ``||G - U~ U~^T G||_F <= eps ||G||_F``? (Not the excess
    over the optimum that ``"lowrank"`` measures: no rank-``rank`` answer beats
    ``||G - G_r||_F / ||G||_F``, so an ``eps`` below that ratio runs to the cap.) The first
    of these that applies is used (``estimate_kind`` in the history):

    1. ``"gap"``: where ``||G||_F^2`` is known exactly (``norm_fro``, the source's
       ``frobenius_norm()`` or row/column norms, the solver's ``info["fro2"]``),
       ``E^2 = ||G||_F^2 - ||U~^T G||_F^2`` (orthonormal ``U~``; the general identity is in
       :func:`~ksvd_bench.metrics.lowrank_error`) from the ``rmatmat`` above, exact to
       rounding while ``E^2 >= 1e-8 ||G||_F^2`` (:data:`solvers.GAP_RTOL`). Stop when
       ``E <= eps ||G||_F``: no randomness, no failure probability.
    2. ``"fused_*"``: the solver's own ``info["error_estimate"]``, made from its sketch with
       no extra product (randomized SVD and block Krylov: *fused* into the solve). Its exact
       kinds (``"fused_gap"``: the same Frobenius gap, for ``||G - U~ S~ V~^T||_F``, which
       equals ``||G - U~ U~^T G||_F`` unless the solver worked on ``G^T`` and bounds it
       otherwise; ``"fused_exact"``: a basis that spans everything) stop at
       ``E <= eps ||G||_F``. The leave-one-out estimate of Epperly & Tropp
       (``"fused_loo"``, :func:`solvers.leave_one_out_error`) stops at
       ``2 E <= eps ||G||_F``. It averages ``s`` (the sketch width, >= 11 at the default
       oversampling) terms, each unbiased for the squared error of the basis without one
       test vector (so the average leans high); if the terms were independent, its chance
       of being below half the error would be at most that of ``s`` probes,
       ``P(chi2_s <= s / 4) <= 0.0091`` for ``s >= 10``. They are not independent, and
       Epperly & Tropp give its variance, not a tail bound: **no failure probability is
       proven for this kind** (measured: :mod:`ksvd_bench.race.residual_study` and the
       README). Where the sketch lost directions of ``G`` to rounding (an un-normalised
       power iteration on a fast-decaying spectrum) or leave-one-out would cost too much
       (a Krylov basis of over a thousand columns) the solver gives no estimate, and the
       probes decide.
    3. ``"probes"``: ``E = ||(I - U~ U~^T) G Omega_p||_F / sqrt(k)`` with ``k = n_probes``
       fresh Gaussian probes (§4.3 of Halko, Martinsson & Tropp 2011), and ``||G||_F``
       unknown is estimated by ``||G Omega_p||_F / sqrt(k)``, pooled over the answers of
       the sweep. ``E^2`` is unbiased; the stop is ``2 E <= eps ||G||_F`` (safety factor
       :data:`solvers.PROBE_SAFETY`). With ``||G||_F`` known, the chance that an accepted
       answer has a true error above ``eps ||G||_F`` is at most
       ``P(chi2_10 <= 2.5) = 0.0091`` per check (a rank-one residual, the worst case; 3e-4
       when two singular values share the residual equally;
       :func:`solvers.probe_failure_probability`). With ``||G||_F`` estimated too (the
       ``"fused_loo"`` and ``"probes"`` kinds on a source that does not know it), the
       pooled probes add their own chance of overestimating it, not bounded here.

    A sweep checks one answer per effort, so these chances add up over the efforts it
    tries. Without a reference the sweep is ranked by the estimate.

    *Warnings.* Every solve runs under ``warnings.catch_warnings(record=True)`` with the
    ``"always"`` filter: each answer records how many warnings its solve raised and their
    messages, and after the sweep every distinct warning recorded (warm-up and timing runs
    included) is issued once more with its category and origin, so the caller's filters
    decide what is shown and nothing is dropped silently.

    *Timing.* Before the timed runs the solver is called once, untimed, at the smallest
    effort, so that Numba compilation and first-touch costs are not charged to any effort.
    Efforts are tried in order and the first accepted answer is returned. The loop is
    bounded by the schedule, so the driver always terminates; at the cap it returns
    ``converged=False`` and the best answer seen. TSVD is run once at the solver's ``tol``
    (0 unless ``options`` says otherwise). The reported ``seconds`` cover the solver call
    only (not the reference, not the metrics or checks).

    References
    ----------
    N. Halko, P.-G. Martinsson and J. A. Tropp, SIAM Review 53 (2011), §4.3.
    E. N. Epperly and J. A. Tropp, SIAM J. Sci. Comput. 46 (2024); arXiv:2207.06342.
    """
    stop, metric = _resolve_stop(stop, metric, reference, cache_dir)
    track, rng = _check_request(method, weights, stop, metric, track, eps, repeats, time_limit,
                                max_effort, random_state)
    sv_tol = _check_tol(sv_tol, "sv_tol")
    triplet_tol = _check_tol(triplet_tol, "triplet_tol")
    if isinstance(n_probes, bool) or not isinstance(n_probes, (int, np.integer)) or n_probes < 1:
        raise ValueError(f"n_probes must be a positive int, got {n_probes!r}")
    options, effort_key = _solver_options(method, options, n_iter)
    cluster_rtol = _check_cluster_rtol(cluster_rtol)
    src = as_source(G)
    shape = tuple(int(n) for n in src.shape)
    rank = _check_rank(rank, shape)
    res_src = src if residual_operator is None else as_source(residual_operator)
    if tuple(res_src.shape) != shape:
        raise ValueError(f"residual_operator has shape {tuple(res_src.shape)}, G has {shape}")
    fro2 = _initial_fro2(res_src, norm_fro)
    efforts = _efforts(method, rank, shape, schedule, max_effort, options)
    reference = _prepare_reference(G, src, rank, reference, stop == "reference", cache_dir,
                                   cache_key, cluster_rtol)
    score = Scorer(src, res_src, reference, rank, weights, metric, stop, track,
                   track_residual or stop == "residual", cluster_rtol, fro2=fro2,
                   n_probes=int(n_probes), safety=PROBE_SAFETY, eps=float(eps),
                   sv_tol=float(eps) if sv_tol is None else sv_tol,
                   triplet_tol=float(eps) if triplet_tol is None else triplet_tol)

    seeds = rng.integers(0, 2**63 - 1, size=len(efforts) + 1)
    run = _runner(src, rank, method, options, effort_key)
    caught_all = []
    caught_all.extend(run(efforts[0], seeds[-1])[2])  # warm-up: JIT and first-touch costs
    try:
        history, (idx, out, first_secs), converged, stopped_by = _sweep(
            run, efforts, seeds, score, time_limit, caught_all)
        timings = [first_secs]
        for _ in range(repeats - 1):
            _, secs, caught = run(efforts[idx], seeds[idx])
            timings.append(secs)
            caught_all.extend(caught)
    finally:
        reemit(caught_all)
    h = history[idx]
    return ToleranceResult(
        method=method, effort=h["effort"], eta=h["eta"], seconds=float(np.median(timings)),
        converged=converged, result=out, history=history,
        residual_estimate=h["residual_estimate"], eps=float(eps), stop=stop, weights=weights,
        all_seconds=timings, stopped_by=stopped_by, metric=metric, value=h["value"],
        lowrank=h["lowrank"], subspace=h["subspace"], sv_error=h["sv_error"],
        triplet_residual=h["triplet_residual"], n_warnings=h["n_warnings"],
        warnings=list(h["warnings"]), reliable=h["reliable"],
        error_estimate=h["error_estimate"],
        relative_error_estimate=h["relative_error_estimate"],
    )
