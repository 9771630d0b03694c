"""Run a solver at growing effort until it meets an accuracy tolerance (the eta-tolerance driver).

A benchmark that times solvers at fixed parameters compares answers of different quality. The
driver instead fixes the quality: it grows each method's effort parameter along a schedule
(:func:`effort_schedule`) until an accuracy measure against a reference SVD is at most ``eps``
(``metric``: the paper's eta, the gap-robust low-rank error or the subspace error; without a
reference, the residual estimate of eta of :func:`ksvd_bench.metrics.residual_estimate`), and
reports the time at that effort. References come from :func:`reference_svd`, cached on disk.
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

from ksvd_bench.metrics import (
    CLUSTER_RTOL,
    LOWRANK_PASS_MAX_ENTRIES,
    WEIGHTS,
    _check_cluster_rtol,
    eta,
    frobenius_norm,
    lowrank_error,
    residual_estimate,
    residuals,
    subspace_error,
)
from solvers._result import SVDResult, fix_signs
from solvers._source import as_source, source_to_dense
from solvers._validation import check_random_state

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
STOPS = ("reference", "residual")
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
# Largest residual (relative to s_1) of a cached reference that is taken to belong to G: far
# above the rounding of an exact SVD of a matrix that differs in the last bits (1e-15), far
# below what any other matrix gives.
_CACHE_MATCH_RTOL = 1e-6


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
    import solvers

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

    import solvers

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
        Whether the stopping quantity reached ``eps``. When False, the answer is the best
        one seen (lowest ``metric``, or lowest residual estimate without a reference).
    result : SVDResult
        The answer.
    history : list of dict
        One entry per effort tried: ``effort``, ``eta``, ``lowrank``, ``subspace``,
        ``value`` (of ``metric``), ``residual_estimate``, ``seconds``, ``converged``,
        ``n_matvec``, ``n_block_entries``, ``n_passes``. A measure not computed is NaN.
    residual_estimate : float
        Residual estimate of eta for the returned answer (NaN if not computed).
    eps, stop, weights, metric :
        The request.
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

    def __repr__(self):
        return (f"ToleranceResult(method={self.method!r}, {self.metric}={self.value:.3g}, "
                f"eta={self.eta:.3g}, eps={self.eps:g}, converged={self.converged}, "
                f"effort={self.effort}, seconds={self.seconds:.3g}, "
                f"stopped_by={self.stopped_by!r})")


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


def _check_request(method, weights, stop, metric, track, eps, repeats, time_limit, max_effort,
                   random_state):
    """Validate the scalar arguments of :func:`solve_to_tolerance`; return ``track`` as a set."""
    _check_choice("method", method, _methods())
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


@dataclass
class _Scorer:
    """Every accuracy measure of one answer, as the driver records it."""

    src: object
    res_src: object
    reference: SVDResult | None
    rank: int
    weights: str
    metric: str
    stop: str
    track: set
    track_residual: bool
    cluster_rtol: float | None
    norm_fro: float | None = None

    def __post_init__(self):
        N, M = self.src.shape
        self.lowrank_method = "pass" if N * M <= LOWRANK_PASS_MAX_ENTRIES else "products"

    def _lowrank(self, out):
        if self.lowrank_method == "pass":
            return lowrank_error(self.src, self.reference, out, rank=self.rank, method="pass")
        if self.norm_fro is None:  # once per sweep: the products route needs ||G||_F
            self.norm_fro = frobenius_norm(self.res_src)
        return lowrank_error(self.res_src, self.reference, out, rank=self.rank,
                             method="products", norm_fro=self.norm_fro)

    def __call__(self, out):
        """``(measures, stopping value, ranking score)`` of one answer."""
        nan = float("nan")
        m = {"eta": nan, "lowrank": nan, "subspace": nan, "residual_estimate": nan}
        ref = self.reference
        if ref is not None:
            m["eta"] = eta(ref, out, weights=self.weights, rank=self.rank,
                           cluster_rtol=self.cluster_rtol)
            if "lowrank" in self.track:
                m["lowrank"] = self._lowrank(out)
            if "subspace" in self.track:
                m["subspace"] = max(subspace_error(ref, out, rank=self.rank,
                                                   cluster_rtol=self.cluster_rtol))
        if self.track_residual:
            m["residual_estimate"] = residual_estimate(self.res_src, out, weights=self.weights,
                                                       cluster_rtol=self.cluster_rtol)
        m["value"] = m[self.metric]
        stopping = m["value"] if self.stop == "reference" else m["residual_estimate"]
        ranking = m["value"] if ref is not None else m["residual_estimate"]
        return m, stopping, ranking


def _runner(src, rank, method, options, effort_key):
    """``run(effort, seed) -> (answer, seconds)``: one timed solve."""
    import solvers

    def run(effort, seed):
        kw = dict(options)
        if effort_key is not None:
            kw[effort_key] = int(effort)
        t0 = time.perf_counter()
        out = solvers.svd(src, rank, method=method, random_state=int(seed), **kw)
        return out, time.perf_counter() - t0

    return run


def _sweep(run, efforts, seeds, score, eps, time_limit):
    """Try the efforts in order until one meets ``eps``, the schedule ends or time runs out.

    Returns ``(history, (index, answer, seconds), converged, stopped_by)``; without
    convergence the answer is the best one seen.
    """
    history = []
    best = None  # (ranking score, index, answer, seconds)
    t_start = time.perf_counter()
    for idx, effort in enumerate(efforts):
        out, secs = run(effort, seeds[idx])
        measures, stopping, ranking = score(out)
        ok = bool(stopping <= eps)
        history.append({
            "effort": int(out.info.get("effort", effort)),
            **measures,
            "seconds": secs,
            "converged": ok,
            "n_matvec": int(out.info.get("n_matvec", 0)),
            "n_block_entries": int(out.info.get("n_block_entries", 0)),
            "n_passes": float(out.info.get("n_passes", float("nan"))),
        })
        if best is None or ranking < best[0]:
            best = (ranking, idx, out, secs)
        if ok:
            return history, (idx, out, secs), True, "converged"
        spent = time.perf_counter() - t_start
        if time_limit is not None and spent > time_limit and idx + 1 < len(efforts):
            return history, best[1:], False, "time_limit"
    return history, best[1:], False, "cap"


def solve_to_tolerance(
    G,
    rank,
    method,
    eps,
    *,
    reference=None,
    weights="singular_values",
    stop="reference",
    metric="eta",
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
        Tolerance (> 0) on ``metric`` (``stop="reference"``) or on the residual estimate
        (``stop="residual"``).
    reference : SVDResult, optional
        Exact SVD with at least ``rank`` triplets; the first ``rank`` are scored, any further
        ones complete a cluster of singular values cut by ``rank``. Computed with
        :func:`reference_svd` (``cluster_rtol`` passed on, cached in ``cache_dir``) when
        ``stop="reference"`` and not given; not computed for ``stop="residual"``.
    weights : {"singular_values", "relative", "uniform"}, default="singular_values"
        Weighting of eta and of its residual estimate (see :mod:`ksvd_bench.metrics`).
    stop : {"reference", "residual"}, default="reference"
        Stopping quantity: ``metric`` against the reference, or
        :func:`~ksvd_bench.metrics.residual_estimate` (needs only products with ``G``; the
        reference measures are still recorded when a reference is given).
    metric : {"eta", "lowrank", "subspace"}, default="eta"
        The measure against the reference: :func:`~ksvd_bench.metrics.eta` (with
        ``weights``), :func:`~ksvd_bench.metrics.lowrank_error` (gap-robust:
        ``||G - U~ U~^T G||_F <= (1 + eps) ||G - G_r||_F``; a pass over ``G`` up to
        :data:`~ksvd_bench.metrics.LOWRANK_PASS_MAX_ENTRIES` entries, one ``rmatmat`` of
        ``residual_operator`` beyond) or the larger sine of
        :func:`~ksvd_bench.metrics.subspace_error`.
    track : sequence of {"eta", "lowrank", "subspace"}, default=("eta",)
        Measures recorded at every effort besides ``metric`` (eta costs next to nothing).
    random_state : None, int >= 0 or numpy.random.Generator
        Seeds every solver call (one seed drawn per effort, so a run is reproducible).
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
        the residual estimates and the product route of ``"lowrank"``. Default: ``G``.
    cluster_rtol : float or None, default=CLUSTER_RTOL
        Singular values closer than ``cluster_rtol * s_1`` are scored as one cluster (see
        :func:`~ksvd_bench.metrics.eta`); None: the literal, vector-by-vector measures.

    Returns
    -------
    ToleranceResult

    Raises
    ------
    TypeError
        On a non-number ``eps`` or ``time_limit``, a non-int ``max_effort`` or a
        ``random_state`` of another type.
    ValueError
        On unknown names, a negative ``random_state``, out-of-range numbers, a reference
        with fewer than ``rank`` triplets, bad schedules or options that set the effort.

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
    track, rng = _check_request(method, weights, stop, metric, track, eps, repeats, time_limit,
                                max_effort, random_state)
    options, effort_key = _solver_options(method, options, n_iter)
    cluster_rtol = _check_cluster_rtol(cluster_rtol)
    src = as_source(G)
    shape = tuple(int(n) for n in src.shape)
    rank = _check_rank(rank, shape)
    res_src = src if residual_operator is None else as_source(residual_operator)
    if tuple(res_src.shape) != shape:
        raise ValueError(f"residual_operator has shape {tuple(res_src.shape)}, G has {shape}")
    efforts = _efforts(method, rank, shape, schedule, max_effort, options)
    reference = _prepare_reference(G, src, rank, reference, stop == "reference", cache_dir,
                                   cache_key, cluster_rtol)
    score = _Scorer(src, res_src, reference, rank, weights, metric, stop, track,
                    track_residual or stop == "residual", cluster_rtol)

    seeds = rng.integers(0, 2**63 - 1, size=len(efforts) + 1)
    run = _runner(src, rank, method, options, effort_key)
    run(efforts[0], seeds[-1])  # warm-up: JIT compilation and first-touch costs
    history, (idx, out, first_secs), converged, stopped_by = _sweep(
        run, efforts, seeds, score, eps, time_limit)
    timings = [first_secs] + [run(efforts[idx], seeds[idx])[1] for _ in range(repeats - 1)]
    h = history[idx]
    return ToleranceResult(
        method=method, effort=h["effort"], eta=h["eta"], seconds=float(np.median(timings)),
        converged=converged, result=out, history=history,
        residual_estimate=h["residual_estimate"], eps=float(eps), stop=stop, weights=weights,
        all_seconds=timings, stopped_by=stopped_by, metric=metric, value=h["value"],
        lowrank=h["lowrank"], subspace=h["subspace"],
    )
