"""The benchmark problems: one kernel matrix per ``--dataset``, built the paper's way.

====================== ========================================================================
``cora``, ``citeseer``  the directed citation graph's adjacency matrix A (N x N, x_i = A[i, :],
``pubmed``              z_j = A[:, j]), SNE kernel (or ``kernel=``), the paper's bandwidth rule
                        with factor 1 / 1 / 0.5, centred by default
``cora-features``,      the bundled bag-of-words matrix (N documents x M words, N != M), so a
``citeseer-features``   compatibility map is needed (default ``"pca"``, the paper's a1)
``synthetic``           a seeded asymmetric kernel problem with controlled singular-value decay
                        and coherence (:func:`ksvd_bench.datasets.make_kernel_problem`)
``rare-clusters``       two point sets from 20 shared clusters, 6 of them rare (issue 15,
                        :func:`ksvd_bench.datasets.make_rare_clusters`, d = 64), uncentred SNE
                        with the family's gamma; the points are kept, so the lazy source (and
                        ``sampling="rpcholesky"``'s joint PSD kernel) can be built from them
====================== ========================================================================

:func:`build_problem` times the dense kernel construction (after a JIT warm-up on a small slice,
so compile time is never charged) and keeps the data matrix, so the lazy sources of the
Nystrom methods and the exact structured operator can be built (and timed) later from it.

A user's own problems (``compare --data/--points/--matrix``, issue 19):

* :func:`problem_from_data`: a data matrix A (array or sparse), the kernel built as for the
  bundled graphs;
* :func:`problem_from_points`: two point sets ``G = k(X, Z)`` (or one used twice). Where the
  dense G fits ``memory_limit`` it is built (timed); otherwise the problem is *lazy*: ``G`` is
  the lazy ``KernelSource.from_points`` (never formed), every solver reads it through products
  and blocks, and the reference is block Krylov deepened until its residual-based error
  estimate is at most :data:`LAZY_REFERENCE_TOL` (:func:`krylov_reference`), which the
  problem's ``reference_note`` says;
* :func:`problem_from_file`: any of them from files (``.npy``, ``.npz``, ``.mtx``, ``.csv``,
  read and checked by :func:`ksvd_bench.datasets.read_user_matrix`), named by the
  file's stem;
* :func:`user_problems`: the problems of a user's files, every file read and checked before
  any kernel is built (the flags that name them are in :mod:`ksvd_bench.race.commands`).
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp

import solvers
from ksvd_bench.datasets import (
    DatasetError,
    load_features,
    load_graph,
    make_kernel_problem,
    make_rare_clusters,
    read_user_matrix,
)
from ksvd_bench.driver import definition_key
from ksvd_bench.kernels import (
    KernelSource,
    StructuredKernelSource,
    kernel_matrix,
    kernel_source,
    ksvd_kernel,
    paper_gamma,
    softmax_gamma,
)
from ksvd_bench.metrics import frobenius_norm
from ksvd_bench.race.degenerate import check_given_matrix, kernel_as_raced
from ksvd_bench.race.paper_runtime import BANDWIDTH_FACTORS, DEFAULT_KERNEL
from solvers import as_source, frobenius_of

__all__ = [
    "DATASETS",
    "DATASET_SHAPES",
    "POINT_DATASETS",
    "SHAPED_DATASETS",
    "DEFAULT_SHAPES",
    "DEFAULT_MEMORY_LIMIT",
    "LAZY_REFERENCE_TOL",
    "FILE_KINDS",
    "Problem",
    "build_problem",
    "problem_data",
    "problem_from_data",
    "problem_from_points",
    "problem_from_file",
    "points_gamma",
    "krylov_reference",
    "dataset_shape",
    "user_problems",
]

GRAPH_DATASETS = ("cora", "citeseer", "pubmed")
FEATURE_DATASETS = ("cora-features", "citeseer-features")
#: problems built from two point sets (a lazy ``KernelSource.from_points`` exists for them)
POINT_DATASETS = ("rare-clusters",)
#: problems whose shape is a parameter (``shape=``, ``--size``)
SHAPED_DATASETS = ("synthetic",) + POINT_DATASETS
DATASETS = GRAPH_DATASETS + FEATURE_DATASETS + SHAPED_DATASETS

#: shape (N, M) of each real dataset's kernel matrix, to check ``rank`` before any work
DATASET_SHAPES = {
    "cora": (2708, 2708),
    "citeseer": (3312, 3312),
    "pubmed": (19717, 19717),
    "cora-features": (2708, 1433),
    "citeseer-features": (3312, 3703),
}
#: the compatibility map used when N != M and none is given (the paper's a1)
DEFAULT_FEATURE_COMPAT = "pca"
#: size of the default synthetic problem
DEFAULT_SYNTHETIC_SHAPE = (1500, 1200)
#: size of the default rare-cluster problem (issue 15's N = M = 6000)
DEFAULT_RARE_SHAPE = (6000, 6000)
#: default shape of each shaped dataset
DEFAULT_SHAPES = {"synthetic": DEFAULT_SYNTHETIC_SHAPE, "rare-clusters": DEFAULT_RARE_SHAPE}
#: bytes a dense G of a point problem may take (``--memory-limit``, GiB on the command line);
#: above it the problem is raced lazily
DEFAULT_MEMORY_LIMIT = 2 * 2**30
#: the reference of a lazy problem: block Krylov until max(||G V - U S||, ||G^T U - V S||) over
#: the top-r triplets, over the gap s_r - s_(r+1) (Wedin's bound), is at most this
LAZY_REFERENCE_TOL = 1e-10
#: what a user file holds: ``--data`` (a data matrix A), ``--matrix`` (a kernel matrix G),
#: ``--points`` (point sets, one point per row)
FILE_KINDS = ("data", "matrix", "points")


@dataclass(repr=False)
class Problem:
    """One kernel SVD problem of the benchmark.

    Attributes
    ----------
    name : str
        The ``--dataset`` name.
    G : ndarray of shape (N, M)
        The dense kernel matrix every solver that needs the whole matrix works on.
    kernel_seconds : float or None
        Wall time of the dense kernel construction (None for ``synthetic``: there is no kernel
        to build, the matrix is given).
    A : ndarray or sparse matrix or None
        The data matrix the kernel was built from (None for ``synthetic`` and the point
        problems).
    kernel : str or None
        Kernel name (None for ``synthetic``).
    gamma : float or None
        The bandwidth actually used.
    params : dict
        Everything needed to rebuild the kernel: bandwidth_factor, compat, center, dtype, seed.
    points : tuple of ndarray or None
        ``(X, Z)`` of a problem built from two point sets (``G = k(X, Z)``, uncentred), None
        otherwise. Only such a problem has a joint PSD kernel (``sampling="rpcholesky"``).
    source : str or None
        Where the problem came from: the file(s) of a user problem, None for the bundled ones.

    A *lazy* problem (:attr:`is_lazy`, from :func:`problem_from_points` over the memory
    limit) holds the lazy ``KernelSource`` as ``G``: a matrix source, never an array.
    """

    name: str
    G: object
    kernel_seconds: float | None
    A: object = None
    kernel: str | None = None
    gamma: float | None = None
    params: dict = field(default_factory=dict)
    points: tuple | None = None
    source: str | None = None

    @property
    def shape(self):
        return tuple(self.G.shape)

    @property
    def is_lazy(self):
        """True when ``G`` is a lazy matrix source (not formed) rather than an array."""
        return not isinstance(self.G, np.ndarray)

    @property
    def reference_note(self):
        """What the rows of a lazy problem say about its reference (None: exact reference)."""
        if not self.is_lazy:
            return None
        return (
            f"reference: block Krylov to {LAZY_REFERENCE_TOL:g} (not exact; G of "
            f"{self.shape[0]}x{self.shape[1]} over the memory limit, never formed)"
        )

    def corner(self, size):
        """The dense top-left ``size x size`` block of G (a warm-up matrix), lazy or not."""
        n, m = min(size, self.shape[0]), min(size, self.shape[1])
        if self.is_lazy:
            return np.ascontiguousarray(self.G.block(np.arange(n), np.arange(m)), dtype=np.float64)
        return np.ascontiguousarray(self.G[:n, :m])

    def norm_fro(self):
        """``||G||_F`` (one pass over a lazy G, unless its source knows it)."""
        if self.is_lazy:
            return frobenius_norm(self.G)
        return frobenius_of(self.G)  # no overflow of the squares of a G near 1e300

    def lazy_reference(self, rank, *, cache_dir=None):
        """The reference of a lazy problem (:func:`krylov_reference`), cached by definition.

        Returns
        -------
        reference : solvers.SVDResult
            ``info["method"]`` says ``"block_krylov"`` and its ``estimated_error``.
        """
        if not self.is_lazy:
            raise ValueError(f"problem {self.name!r} is not lazy: its reference is exact")
        return krylov_reference(self.G, rank, cache_dir=cache_dir, key=self.definition)

    @property
    def definition(self):
        """What defines ``G`` (name, kernel, bandwidth, parameters, data): the reference-cache key.

        A kernel matrix built by a freshly compiled Numba function and by a cached one can
        differ in the last bit; keying the reference cache on this definition instead of on
        ``G``'s bits makes the second run hit the cache the first one wrote. A problem without
        a data matrix (a given G, e.g. ``synthetic``, made by numpy alone) is keyed by G.
        """
        data = self.A if self.A is not None else self.points if self.points is not None else self.G
        return ("ksvd-bench problem", self.name, self.kernel, self.gamma, dict(self.params), data)

    def __repr__(self):
        kernel = self.kernel or "given"
        gamma = "" if self.gamma is None else f", gamma={self.gamma:.4g}"
        secs = "" if self.kernel_seconds is None else f", kernel_seconds={self.kernel_seconds:.3g}"
        lazy = ", lazy" if self.is_lazy else ""
        return (
            f"Problem(name={self.name!r}, shape={self.G.shape[0]}x{self.G.shape[1]}, "
            f"kernel={kernel!r}{gamma}{secs}{lazy})"
        )

    @property
    def has_lazy_source(self):
        """True when :meth:`lazy_source` builds G from data (a data matrix or two point sets)
        instead of wrapping the dense G."""
        return self.A is not None or self.points is not None

    @property
    def supports_structured(self):
        """True when the exact structured operator applies (sparse square A, exp kernel)."""
        return (
            self.A is not None
            and sp.issparse(self.A)
            and self.A.shape[0] == self.A.shape[1]
            and self.kernel in ("sne", "rbf")
            and self.params.get("compat") is None
        )

    def lazy_source(self, *, structured=False):
        """A fresh lazy :class:`~ksvd_bench.kernels.KernelSource` for this problem.

        Parameters
        ----------
        structured : bool or "auto", default=False
            Passed to ``kernel_source``. ``False`` evaluates only the blocks a solver asks for,
            which is what the Nystrom methods' end-to-end time should charge.

        Returns
        -------
        source
            For a point problem ``KernelSource.from_points(X, Z, kernel, gamma=gamma)``
            (uncentred; it has ``joint_psd()``); for ``synthetic`` (no data) the dense matrix
            wrapped by ``solvers.as_source``.
        """
        if self.points is not None:
            X, Z = self.points
            return KernelSource.from_points(
                X, Z, self.kernel, gamma=self.gamma, center=bool(self.params.get("center", False))
            )
        if self.is_lazy:
            return self.G
        if self.A is None:
            return as_source(self.G)

        p = self.params
        return kernel_source(
            self.A,
            self.kernel,
            gamma=self.gamma,
            compat=p["compat"],
            center=p["center"],
            random_state=p["seed"],
            structured=structured,
        )

    def structured_source(self):
        """A fresh exact :class:`~ksvd_bench.kernels.StructuredKernelSource`, or None."""
        if not self.supports_structured:
            return None

        return StructuredKernelSource(
            self.A, self.kernel, gamma=self.gamma, center=self.params["center"]
        )


def problem_data(name):
    """The data matrix of a named real dataset: CSR adjacency or bag-of-words features.

    Parameters
    ----------
    name : str
        One of ``cora``, ``citeseer``, ``pubmed``, ``cora-features``, ``citeseer-features``.
    """
    # content_only: the paper's node counts (Citeseer 3312, not the 3327 ids of the cites file).
    if name in GRAPH_DATASETS:
        return load_graph(name, content_only=True).adjacency
    if name in FEATURE_DATASETS:
        return sp.csr_matrix(load_features(name.split("-")[0], content_only=True), dtype=np.float64)
    raise ValueError(f"dataset must be one of {GRAPH_DATASETS + FEATURE_DATASETS}, got {name!r}")


#: row counts of the warm-up slices: the kernel builders run a serial compile below
#: 2**16 output entries and a parallel one above (``kernels.leaves.SERIAL_BELOW``); a 64-row
#: slice reaches only the serial one, so the timed build compiled the parallel one (3-7 s
#: charged to "kernel s" on a first run, 0.1 s warm on Cora). 320 x 320 > 2**16 reaches both.
WARM_UP_ROWS = (64, 320)


def _warm_up(A, kernel, gamma, compat, center, seed):
    """Compile every kernel builder the timed build will call, on slices of ``A``.

    The slices have the same type, dtype and layout as ``A``, at sizes below and above the
    builders' serial/parallel switch, so neither compile (nor its load from Numba's disk
    cache) is charged to the timed build.
    """
    for rows in WARM_UP_ROWS:
        k = min(rows, A.shape[0], A.shape[1])
        small = A[:k, :k] if A.shape[0] == A.shape[1] else A[:k]
        if sp.issparse(small):
            small = sp.csr_matrix(small)
        ksvd_kernel(small, kernel, gamma=gamma, compat=compat, center=center, random_state=seed)
        if k < rows:
            break


def build_problem(
    name="cora",
    *,
    kernel=DEFAULT_KERNEL,
    center=True,
    bandwidth_factor=None,
    gamma=None,
    compat=None,
    shape=None,
    synthetic_options=None,
    random_state=0,
):
    """Build the dense kernel matrix of one benchmark problem and time its construction.

    Parameters
    ----------
    name : str, default="cora"
        One of :data:`DATASETS`.
    kernel : str, default="sne"
        Kernel for the real datasets (ignored for ``synthetic``).
    center : bool, default=True
        Centre the kernel matrix (H_N G H_M), as the paper does.
    bandwidth_factor : float, optional
        Factor of the paper's bandwidth rule; default 1 for Cora/Citeseer and the feature
        problems, 0.5 for PubMed (the paper's choices).
    gamma : float, optional
        Bandwidth; overrides ``bandwidth_factor``.
    compat : str, optional
        Compatibility map for the feature problems (default ``"pca"``, the paper's a1);
        must be None for the square graph problems.
    shape : tuple of int, optional
        ``(N, M)`` of the synthetic problem (default ``(1500, 1200)``) or of the rare-cluster
        problem (default ``(6000, 6000)``; each at least its 20 clusters).
    synthetic_options : dict, optional
        Extra keyword arguments for :func:`ksvd_bench.datasets.make_kernel_problem`
        (``rank``, ``decay``, ``coherence``, ``noise``).
    random_state : int, default=0
        Seed of the synthetic generator and of the random compatibility map. An int is required
        (not a Generator) so the problem can be rebuilt and recorded.

    Returns
    -------
    Problem
    """
    if name not in DATASETS:
        raise ValueError(f"dataset must be one of {DATASETS}, got {name!r}")
    if isinstance(random_state, bool) or not isinstance(random_state, (int, np.integer)):
        raise TypeError(f"random_state must be an int (it is recorded), got {random_state!r}")
    seed = int(random_state)
    if name == "synthetic":
        n, m = DEFAULT_SYNTHETIC_SHAPE if shape is None else shape
        opts = dict(synthetic_options or {})
        G = np.ascontiguousarray(
            make_kernel_problem(int(n), int(m), random_state=seed, **opts), dtype=np.float64
        )
        params = {"shape": [int(n), int(m)], "seed": seed, "center": False, "compat": None, **opts}
        return Problem(name=name, G=G, kernel_seconds=None, params=params)
    if name == "rare-clusters":
        return _rare_clusters_problem(name, shape, seed)

    if shape is not None:
        raise ValueError(f"shape applies only to the datasets {SHAPED_DATASETS}, got {name!r}")
    A = problem_data(name)
    if name in GRAPH_DATASETS:
        if compat is not None:
            raise ValueError(f"compat must be None for the square graph dataset {name!r}")
        factor = BANDWIDTH_FACTORS[name] if bandwidth_factor is None else bandwidth_factor
    else:
        compat = DEFAULT_FEATURE_COMPAT if compat is None else compat
        factor = 1.0 if bandwidth_factor is None else bandwidth_factor
    return problem_from_data(
        A,
        name=name,
        kernel=kernel,
        gamma=gamma,
        bandwidth_factor=factor,
        compat=compat,
        center=center,
        random_state=seed,
    )


def problem_from_data(
    A,
    *,
    name,
    kernel=DEFAULT_KERNEL,
    gamma=None,
    bandwidth_factor=1.0,
    compat=None,
    center=True,
    random_state=0,
):
    """A :class:`Problem` from any data matrix: the dense kernel matrix, timed after a warm-up.

    Parameters
    ----------
    A : ndarray or sparse matrix of shape (N, M)
        Data matrix (rows x_i = A[i, :], columns z_j = A[:, j]).
    name : str
        Label of the problem in tables and files.
    kernel : str, default="sne"
    gamma : float, optional
        Bandwidth; default the paper's rule with ``bandwidth_factor`` (softmax: its
        temperature, default ``bandwidth_factor * sqrt(min(N, M))``).
    bandwidth_factor : float, default=1.0
    compat : str or None, default=None
        Compatibility map (required when N != M).
    center : bool, default=True
    random_state : int, default=0
        Seed of a random compatibility map (recorded).

    Returns
    -------
    Problem
    """
    if isinstance(random_state, bool) or not isinstance(random_state, (int, np.integer)):
        raise TypeError(f"random_state must be an int (it is recorded), got {random_state!r}")
    seed = int(random_state)
    factor = float(bandwidth_factor)
    if gamma is None and kernel in ("sne", "rbf", "t"):
        gamma = paper_gamma(A, factor)
    elif gamma is None and kernel == "softmax":
        gamma = softmax_gamma(min(A.shape), factor)  # the mapped points' dimension
    _warm_up(A, kernel, gamma, compat, center, seed)

    def build(data):
        return ksvd_kernel(
            data, kernel, gamma=gamma, compat=compat, center=False, random_state=seed
        )

    G, seconds = kernel_as_raced(
        lambda: build(A),
        name=name,
        center=bool(center),
        gamma=gamma,
        data=None if compat is None else A,
        rebuild=build,
        compat=compat,
    )
    params = {
        "bandwidth_factor": factor,
        "compat": compat,
        "center": bool(center),
        "seed": seed,
        "dtype": "float64",
    }
    return Problem(
        name=name,
        G=G,
        kernel_seconds=seconds,
        A=A,
        kernel=kernel,
        gamma=None if gamma is None else float(gamma),
        params=params,
    )


def dataset_shape(name, shape=None):
    """``(N, M)`` of a named dataset, known before any kernel is built.

    Parameters
    ----------
    name : str
        One of :data:`DATASETS`.
    shape : tuple of int, optional
        The ``shape`` option of a shaped dataset (:data:`SHAPED_DATASETS`).
    """
    if name in SHAPED_DATASETS:
        return tuple(int(v) for v in (shape or DEFAULT_SHAPES[name]))
    return DATASET_SHAPES[name]


def _rare_clusters_problem(name, shape, seed):
    """The rare-cluster family of issue 15 as a problem: dense G (timed) and its points.

    The kernel is SNE with the family's gamma, uncentred (the family's G is a block of a PSD
    kernel on ``X u Z`` up to the row normalisers, which is what ``rpcholesky`` uses).
    """
    n, m = dataset_shape(name, shape)
    P = make_rare_clusters(n, m, random_state=seed)
    gamma = float(P.gamma)
    # JIT warm-up on slices below and above the serial/parallel switch (WARM_UP_ROWS), so
    # no compile time is charged to "kernel s"
    for rows in WARM_UP_ROWS:
        kernel_matrix(P.X[:rows], P.Z[:rows], "sne", gamma=gamma)
    t0 = time.perf_counter()
    G = np.asarray(kernel_matrix(P.X, P.Z, "sne", gamma=gamma), dtype=np.float64)
    seconds = time.perf_counter() - t0
    params = {
        "shape": [n, m],
        "seed": seed,
        "center": False,
        "compat": None,
        "rare": [int(c) for c in P.params["rare"]],
        "dtype": "float64",
    }
    return Problem(
        name=name,
        G=G,
        kernel_seconds=seconds,
        kernel="sne",
        gamma=gamma,
        params=params,
        points=(P.X, P.Z),
    )


# ---------------------------------------------------------------------------------------------
# a user's own problems: points, files, and the command-line flags
# ---------------------------------------------------------------------------------------------


def _check_seed(random_state):
    if isinstance(random_state, bool) or not isinstance(random_state, (int, np.integer)):
        raise TypeError(f"random_state must be an int (it is recorded), got {random_state!r}")
    return int(random_state)


def _check_memory_limit(memory_limit):
    if (
        isinstance(memory_limit, bool)
        or not isinstance(memory_limit, (int, float, np.number))
        or not (math.isfinite(memory_limit) and memory_limit > 0)
    ):
        raise ValueError(f"memory_limit must be a positive number of bytes, got {memory_limit!r}")
    return float(memory_limit)


def points_gamma(X, Z, bandwidth_factor=1.0):
    """The paper's bandwidth rule on two point sets: ``factor * sqrt(d * var([X; Z]))``.

    The rule :func:`ksvd_bench.kernels.paper_gamma` applies to a data matrix, applied to the
    stacked points (``d`` features, the variance over all entries).
    """
    if sp.issparse(X) or sp.issparse(Z):
        return paper_gamma(sp.vstack([sp.csr_matrix(X), sp.csr_matrix(Z)]), bandwidth_factor)
    return paper_gamma(np.vstack([X, Z]), bandwidth_factor)


def _check_points(X, Z, name):
    """X and Z as float64 2-d arrays with the same number of features, finite, non-empty."""
    out = []
    for label, P in (("X", X), ("Z", Z)):
        if not sp.issparse(P):
            P = np.asarray(P)
            if np.issubdtype(P.dtype, np.complexfloating) or not (
                np.issubdtype(P.dtype, np.number) or P.dtype == np.bool_
            ):
                raise ValueError(
                    f"problem {name!r}: points {label} must be real numbers, got dtype {P.dtype}"
                )
            P = np.ascontiguousarray(P, dtype=np.float64)
        if P.ndim != 2 or 0 in P.shape:
            raise ValueError(
                f"problem {name!r}: points {label} must be a non-empty 2-d array "
                f"(one point per row), got shape {P.shape}"
            )
        data = P.data if sp.issparse(P) else P
        if not np.all(np.isfinite(data)):
            raise ValueError(f"problem {name!r}: points {label} hold NaN or infinite values")
        out.append(P)
    if out[0].shape[1] != out[1].shape[1]:
        raise ValueError(
            f"problem {name!r}: X and Z must have the same number of features "
            f"(columns), got {out[0].shape[1]} and {out[1].shape[1]}"
        )
    return out


def problem_from_points(
    X,
    Z=None,
    *,
    name,
    kernel=DEFAULT_KERNEL,
    gamma=None,
    bandwidth_factor=1.0,
    center=False,
    memory_limit=DEFAULT_MEMORY_LIMIT,
    random_state=0,
    source=None,
):
    """A :class:`Problem` from two point sets, ``G = k(X, Z)``: dense if it fits, else lazy.

    Parameters
    ----------
    X : array-like of shape (N, d)
        Row points.
    Z : array-like of shape (M, d), optional
        Column points (default: ``X`` again).
    name : str
        Label of the problem in tables and files.
    kernel : str, default="sne"
    gamma : float, optional
        Bandwidth; default :func:`points_gamma` with ``bandwidth_factor`` (softmax: its
        temperature, default ``bandwidth_factor * sqrt(d)``).
    bandwidth_factor : float, default=1.0
    center : bool, default=False
        Double-centre G.
    memory_limit : float, default=2 GiB
        Bytes the dense float64 G may take. ``8 N M <= memory_limit``: G is built densely
        (timed, after a JIT warm-up) and the reference is exact. Otherwise the problem is lazy
        (:attr:`Problem.is_lazy`): ``G`` is ``KernelSource.from_points`` (its set-up pass
        timed as ``kernel_seconds``), never formed, and the reference is
        :func:`krylov_reference`.
    random_state : int, default=0
        Recorded seed (the kernel itself is deterministic).
    source : str, optional
        Where the points came from (recorded).

    Returns
    -------
    Problem
        With ``points=(X, Z)``: every method runs on it, ``sampling="rpcholesky"`` included.

    Raises
    ------
    ValueError
        Points not 2-d, empty, complex, non-finite, or X and Z of different dimensions; a
        non-positive memory limit. The message names the problem.
    """
    seed = _check_seed(random_state)
    limit = _check_memory_limit(memory_limit)
    X, Z = _check_points(X, X if Z is None else Z, name)
    if gamma is None and kernel in ("sne", "rbf", "t"):
        gamma = points_gamma(X, Z, float(bandwidth_factor))
    elif gamma is None and kernel == "softmax":
        gamma = softmax_gamma(X.shape[1], float(bandwidth_factor))
    gamma = None if gamma is None else float(gamma)
    n, m = X.shape[0], Z.shape[0]
    params = {
        "shape": [n, m],
        "bandwidth_factor": float(bandwidth_factor),
        "compat": None,
        "center": bool(center),
        "seed": seed,
        "dtype": "float64",
        "lazy": 8.0 * n * m > limit,
    }
    if params["lazy"]:
        # compile the lazy kernels on a small slice first, so the timed set-up pass is clean
        k = min(WARM_UP_ROWS[-1], n, m)
        KernelSource.from_points(X[:k], Z[:k], kernel, gamma=gamma, center=bool(center))
        t0 = time.perf_counter()
        G = KernelSource.from_points(X, Z, kernel, gamma=gamma, center=bool(center))
        seconds = time.perf_counter() - t0
    else:
        for rows in WARM_UP_ROWS:
            kernel_matrix(X[:rows], Z[:rows], kernel, gamma=gamma, center=bool(center))
        G, seconds = kernel_as_raced(
            lambda: kernel_matrix(X, Z, kernel, gamma=gamma),
            name=name,
            center=bool(center),
            gamma=gamma,
        )
    return Problem(
        name=name,
        G=G,
        kernel_seconds=seconds,
        kernel=kernel,
        gamma=gamma,
        params=params,
        points=(X, Z),
        source=source,
    )


def _read(path, kind, name):
    what = {
        "data": "the data matrix A",
        "matrix": "the kernel matrix G",
        "points": "a point set (one point per row)",
    }[kind]
    return read_user_matrix(path, problem=name, what=what)


def _stem(path):
    return Path(path).name.split(".")[0] or Path(path).name


def read_problem_files(kind, paths, *, name=None):
    """Read and check the file(s) of one user problem, before any kernel is built.

    Parameters
    ----------
    kind : {"data", "matrix", "points"}
    paths : str or path, or a sequence of one or two (two only for ``"points"``: X and Z)
    name : str, optional
        The problem's name; default the first file's stem.

    Returns
    -------
    (name, arrays)
        ``arrays`` the checked matrices (:func:`~ksvd_bench.datasets.read_user_matrix`).

    Raises
    ------
    ksvd_bench.datasets.DatasetError
        A file that is missing, unreadable, empty, not 2-d, complex, NaN, or points of
        different dimensions; naming the file and the problem.
    """
    if kind not in FILE_KINDS:
        raise ValueError(f"kind must be one of {FILE_KINDS}, got {kind!r}")
    paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
    name = _stem(paths[0]) if paths and name is None else name
    if not 1 <= len(paths) <= (2 if kind == "points" else 1):
        raise DatasetError(
            f"problem {name!r}: --{kind} takes "
            f"{'one or two files (X [Z])' if kind == 'points' else 'one file'}, "
            f"got {len(paths)}: {' '.join(str(p) for p in paths)}"
        )
    arrays = [_read(p, kind, name) for p in paths]
    if kind == "points":
        if any(sp.issparse(a) for a in arrays):
            arrays = [a.toarray() if sp.issparse(a) else a for a in arrays]
        if len(arrays) == 2 and arrays[0].shape[1] != arrays[1].shape[1]:
            raise DatasetError(
                f"problem {name!r}: the point sets {str(paths[0])!r} and {str(paths[1])!r} have "
                f"{arrays[0].shape[1]} and {arrays[1].shape[1]} features (columns); X and Z "
                f"need the same"
            )
    return name, arrays


def problem_from_file(
    path,
    *,
    kind="data",
    name=None,
    kernel=DEFAULT_KERNEL,
    gamma=None,
    bandwidth_factor=1.0,
    compat=None,
    center=None,
    memory_limit=DEFAULT_MEMORY_LIMIT,
    random_state=0,
):
    """A :class:`Problem` from a user's file(s), named by the (first) file's stem.

    Parameters
    ----------
    path : str or path, or a pair of them for ``kind="points"`` (X and Z)
        ``.npy``, ``.npz`` (one array or a scipy sparse matrix), ``.mtx`` or ``.csv``.
    kind : {"data", "matrix", "points"}, default="data"
        ``"data"``: a data matrix A, the kernel built by :func:`problem_from_data`
        (``compat`` default ``"pca"`` when A is not square); ``"matrix"``: a precomputed
        kernel matrix G, raced as given (a sparse G is made dense: it must fit
        ``memory_limit``); ``"points"``: one or two point sets,
        :func:`problem_from_points`.
    name : str, optional
        Default: the file's stem (``graphs/web.mtx`` -> ``web``).
    center : bool, optional
        Double-centre G; default True for ``"data"`` (as the graphs), False for ``"points"``
        (a block of a PSD kernel, which ``sampling="rpcholesky"`` needs).
    kernel, gamma, bandwidth_factor, compat, random_state
        As :func:`problem_from_data` (ignored by ``"matrix"``).
    memory_limit : float, default=2 GiB
        Bytes a dense G may take (points: above it the problem is lazy; matrix: above it a
        sparse G is refused).

    Returns
    -------
    Problem
        ``source`` records the file path(s).

    Raises
    ------
    ksvd_bench.datasets.DatasetError
        A bad file (see :func:`read_problem_files`), before any kernel is built.
    """
    name, arrays = read_problem_files(kind, path, name=name)
    paths = [path] if isinstance(path, (str, Path)) else list(path)
    source = " ".join(str(p) for p in paths)
    if kind == "points":
        return problem_from_points(
            *arrays,
            name=name,
            kernel=kernel,
            gamma=gamma,
            bandwidth_factor=bandwidth_factor,
            center=bool(center),
            memory_limit=memory_limit,
            random_state=random_state,
            source=source,
        )
    (A,) = arrays
    if kind == "matrix":
        return _given_matrix(A, name, source, _check_memory_limit(memory_limit), random_state)
    if A.shape[0] != A.shape[1] and compat is None:
        compat = DEFAULT_FEATURE_COMPAT
    problem = problem_from_data(
        A,
        name=name,
        kernel=kernel,
        gamma=gamma,
        bandwidth_factor=bandwidth_factor,
        compat=compat,
        center=True if center is None else bool(center),
        random_state=random_state,
    )
    problem.source = source
    return problem


def _given_matrix(G, name, source, limit, random_state):
    if sp.issparse(G):
        if 8.0 * G.shape[0] * G.shape[1] > limit:
            raise DatasetError(
                f"problem {name!r}: the sparse kernel matrix in {source!r} is "
                f"{G.shape[0]}x{G.shape[1]}; raced as a dense G it needs "
                f"{8.0 * G.shape[0] * G.shape[1] / 2**30:.2f} GiB, over the memory limit of "
                f"{limit / 2**30:.2f} GiB (raise --memory-limit)"
            )
        G = G.toarray()
    check_given_matrix(G, name)
    params = {
        "shape": list(G.shape),
        "seed": _check_seed(random_state),
        "center": False,
        "compat": None,
        "dtype": "float64",
        "given": True,
    }
    return Problem(
        name=name,
        G=np.ascontiguousarray(G, dtype=np.float64),
        kernel_seconds=None,
        params=params,
        source=source,
    )


def _wedin_estimate(source, U, s, V, rank):
    """``max(||G V - U S||, ||G^T U - V S||) / (s_r - s_(r+1))`` over the top ``rank`` triplets
    (one pass): Wedin's bound on the subspace error, the gap from the values themselves."""
    Vr, Ur, sr = V[:, :rank], U[:, :rank], s[:rank]
    res = max(
        np.linalg.norm(source.matmat(Vr) - Ur * sr, 2),
        np.linalg.norm(source.rmatmat(Ur) - Vr * sr, 2),
    )
    gap = sr[-1] - s[rank] if s.size > rank else sr[-1]
    return (float(res / gap) if gap > 0 else math.inf), float(res)


def krylov_reference(
    source,
    rank,
    *,
    tol=LAZY_REFERENCE_TOL,
    depths=(2, 4, 8, 16, 32),
    n_extra=10,
    cache_dir=None,
    key=None,
):
    """Top triplets of a matrix too large to form, by block Krylov to a residual tolerance.

    Block Krylov (``n_oversamples=10``, seed 12345) for ``rank + n_extra`` triplets at the
    depths ``depths`` in turn, until the Wedin estimate of the top-``rank`` subspace error
    (:func:`_wedin_estimate`, one pass) is at most ``tol``. Not exact: ``info`` keeps the
    estimate reached (the last depth's, if none reached ``tol``).

    Parameters
    ----------
    source : matrix source
    rank : int
    tol : float, default=1e-10
    depths : sequence of int
    n_extra : int, default=10
        Triplets beyond ``rank``, so that a cluster cut by ``rank`` is seen by the metrics.
    cache_dir : str or Path, optional
        Directory of a cache keyed by ``key`` (``krylov-<digest>-r<rank>.npz``).
    key : optional
        The problem's definition (:func:`ksvd_bench.driver.definition_key`).

    Returns
    -------
    solvers.SVDResult
        ``info``: ``method="block_krylov"``, ``n_iter``, ``estimated_error``, ``residual``,
        ``tol``, ``reached`` (estimate <= tol), ``cached``.
    """
    path = None
    if cache_dir is not None and key is not None:
        path = Path(cache_dir) / f"krylov-{definition_key(key)}-r{rank}.npz"
        if path.is_file():
            with np.load(path, allow_pickle=False) as f:
                info = {
                    "method": "block_krylov",
                    "n_iter": int(f["n_iter"]),
                    "estimated_error": float(f["estimate"]),
                    "residual": float(f["residual"]),
                    "tol": tol,
                    "reached": bool(float(f["estimate"]) <= tol),
                    "cached": True,
                }
                U, V = np.ascontiguousarray(f["U"]), np.ascontiguousarray(f["V"])
                return solvers.SVDResult(U, f["s"], V, info)
    k = min(rank + n_extra, min(source.shape))
    t0 = time.perf_counter()
    for n_iter in depths:
        ref = solvers.svd(
            source, k, method="block_krylov", random_state=12345, n_oversamples=10, n_iter=n_iter
        )
        estimate, residual = _wedin_estimate(source, ref.U, ref.s, ref.V, rank)
        if estimate <= tol:
            break
    # C order, saved and returned: BLAS rounds products with an F-ordered U differently, and a
    # fresh reference must score every answer bit for bit as a cache hit does
    U, V = np.ascontiguousarray(ref.U), np.ascontiguousarray(ref.V)
    info = {
        "method": "block_krylov",
        "n_iter": n_iter,
        "estimated_error": estimate,
        "residual": residual,
        "tol": tol,
        "reached": bool(estimate <= tol),
        "cached": False,
        "seconds": time.perf_counter() - t0,
    }
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + f".{os.getpid()}.tmp.npz")  # one per process
        np.savez(tmp, U=U, s=ref.s, V=V, n_iter=n_iter, estimate=estimate, residual=residual)
        tmp.replace(path)
    return solvers.SVDResult(U, ref.s, V, info)


def user_problems(
    files,
    *,
    taken=(),
    rank=None,
    kernel=DEFAULT_KERNEL,
    gamma=None,
    bandwidth_factor=1.0,
    compat=None,
    center=True,
    memory_limit=DEFAULT_MEMORY_LIMIT,
    random_state=0,
):
    """The :class:`Problem` objects of a user's files (``compare --data/--points/--matrix``).

    Every file is read and checked first (a bad one, or one whose kernel matrix is smaller
    than ``rank`` in either direction, raises :class:`~ksvd_bench.datasets.DatasetError`
    naming the file and the problem before any kernel is built); then the problems are built
    in the order given. Two problems with the same name (file stem), or a name in ``taken``,
    are refused.

    Parameters
    ----------
    files : sequence of (str, list of path)
        ``(kind, paths)`` pairs, ``kind`` one of :data:`FILE_KINDS` (as
        :func:`read_problem_files` takes them).
    taken : sequence of str, default=()
        Names already used (the bundled datasets raced beside).
    rank : int, optional
        The rank the problems will be raced at (None: not checked).
    kernel, gamma, bandwidth_factor, compat, center
        The kernel of the ``"data"`` and ``"points"`` problems (see
        :func:`problem_from_data`; ``"points"`` problems are never centred; a non-square
        data matrix gets :data:`DEFAULT_FEATURE_COMPAT` when ``compat`` is None).
    memory_limit : float, default=DEFAULT_MEMORY_LIMIT
        Bytes a dense G of a ``"points"`` or ``"matrix"`` problem may take (see
        :func:`problem_from_points`).
    random_state : int, default=0
        Seed of the problems.

    Returns
    -------
    list of Problem
        Empty when ``files`` is.
    """
    read = [(kind, paths, *read_problem_files(kind, paths)) for kind, paths in files]
    names = [name for _, _, name, _ in read] + list(taken)
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise DatasetError(
            f"two problems are named {dup[0]!r} (problems are named by their "
            f"file's stem, and must differ from the --dataset names)"
        )
    for kind, _, name, arrays in read if rank is not None else ():
        # G's shape is known from the files: a rank it cannot have is refused before the
        # kernel is built (building it can take seconds)
        shape = (
            arrays[0].shape[0],
            arrays[-1].shape[0] if kind == "points" else arrays[0].shape[1],
        )
        if rank > min(shape):
            raise DatasetError(
                f"problem {name!r}: --rank must be at most min(N, M) = {min(shape)} of its "
                f"kernel matrix ({shape[0]}x{shape[1]}), got {rank}"
            )
    problems = []
    for kind, paths, name, arrays in read:
        source = " ".join(str(p) for p in paths)
        common = {
            "name": name,
            "kernel": kernel,
            "gamma": gamma,
            "bandwidth_factor": bandwidth_factor,
            "random_state": random_state,
        }
        try:
            problems.append(
                _user_problem(kind, arrays, source, memory_limit, compat, center, common)
            )
        except DatasetError:
            raise
        except ValueError as exc:  # the data cannot give this kernel (gamma, magnitudes)
            message = str(exc).replace("; pass gamma", "; pass --gamma")
            raise DatasetError(f"problem {name!r} ({source}): {message}") from exc
    return problems


def _user_problem(kind, arrays, source, limit, compat, center, common):
    """One problem of :func:`user_problems` from its checked arrays."""
    if kind == "points":
        return problem_from_points(
            *arrays, center=False, memory_limit=limit, source=source, **common
        )
    if kind == "matrix":
        return _given_matrix(arrays[0], common["name"], source, limit, common["random_state"])
    A = arrays[0]
    if A.shape[0] != A.shape[1] and compat is None:
        compat = DEFAULT_FEATURE_COMPAT
    problem = problem_from_data(A, compat=compat, center=bool(center), **common)
    problem.source = source
    return problem
