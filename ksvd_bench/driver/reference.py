"""The exact reference SVD the driver scores against, and its cache on disk.

:func:`reference_svd` computes the exact top-``rank`` triplets by the cheapest exact route
(dense LAPACK, ARPACK at ``tol=0``, or the structured source's own SVD), with the cut
cluster of singular values completed, and caches them keyed by the matrix's numbers or its
definition (:func:`definition_key`).
"""

from __future__ import annotations

import hashlib
import numbers
import os
import time
import warnings
from pathlib import Path

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

import solvers
from ksvd_bench.metrics import residuals
from ksvd_bench.metrics.common import check_cluster_rtol
from solvers import SVDResult, as_source, check_int, source_to_dense

__all__ = ["DENSE_REFERENCE_MAX_ENTRIES", "definition_key", "reference_svd"]

#: Largest ``N * M`` for which :func:`reference_svd` uses a dense LAPACK SVD (320 MB in float64).
DENSE_REFERENCE_MAX_ENTRIES = 40_000_000
# Bumped whenever the way references are computed changes, so stale cache files are not reused.
_CACHE_VERSION = 1
# Largest residual (relative to s_1) of a cached reference that is taken to belong to G: far
# above the rounding of an exact SVD of a matrix that differs in the last bits (1e-15), far
# below what any other matrix gives.
_CACHE_MATCH_RTOL = 1e-6


def _check_rank(rank, shape):
    """``rank`` as an int in ``[1, min(shape)]`` (the one integer check: ``solvers.check_int``)."""
    return check_int("rank", rank, 1, min(shape), high_text=f"min(N, M) = {min(shape)}")


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
    elif isinstance(part, np.dtype) or (
        isinstance(part, type) and issubclass(part, (np.generic, int, float))
    ):
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
        info = {
            "method": str(f["method"]),
            "seconds": float(f["seconds"]),
            "cached": True,
            "cache_file": str(path),
        }
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
        # structured is optional at import time (ksvd_bench.kernels loads it lazily too)
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
    return (
        np.array(out.U, dtype=np.float64),
        np.array(out.s, dtype=np.float64),
        np.array(out.V, dtype=np.float64),
    )


def _arpack_triplets(G, k):
    out = solvers.svd(G, k, method="tsvd", tol=0.0, random_state=0)
    return (
        np.array(out.U, dtype=np.float64),
        np.array(out.s, dtype=np.float64),
        np.array(out.V, dtype=np.float64),
    )


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
        U, s, V = _past_the_cut_cluster(
            lambda k: _structured_triplets(G, k), rank, min(shape), cluster_rtol
        )
        method = "structured"
    elif shape[0] * shape[1] <= max_dense_entries:
        U_all, s_all, Vt_all, method = _dense_svd(src)
        k = _closing_rank(s_all, rank, cluster_rtol, complete=True)
        U, s, V = np.array(U_all[:, :k]), np.array(s_all[:k]), np.array(Vt_all[:k].T)
    else:
        # ARPACK needs k < min(N, M).
        U, s, V = _past_the_cut_cluster(
            lambda k: _arpack_triplets(G, k), rank, max(rank, min(shape) - 1), cluster_rtol
        )
        method = "arpack"
    # scikit-learn here, not at the top: the command line loads the driver, and --help must
    # not pay for scikit-learn
    from sklearn.utils.extmath import svd_flip

    # the solvers' sign convention: the largest-magnitude entry of each U[:, i] positive
    # (svd_flip flips the rows of V^T in place: a transposed view of V)
    svd_flip(U, V.T, u_based_decision=True)
    # C order, as a cache hit loads them: BLAS rounds products with an F-ordered U differently,
    # and a fresh reference must score every answer bit for bit as the cached one does
    U, V = np.ascontiguousarray(U), np.ascontiguousarray(V)
    return SVDResult(U=U, s=s, V=V, info={"method": method})


def reference_svd(
    G, rank, *, cache_dir=None, key=None, max_dense_entries=None, cluster_rtol=None, verify=True
) -> SVDResult:
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
    cluster_rtol = check_cluster_rtol(cluster_rtol)
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
