"""The benchmark problems: one kernel matrix per ``--dataset``, built the paper's way.

=====================  =========================================================================
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
=====================  =========================================================================

:func:`build_problem` times the dense kernel construction (after a JIT warm-up on a small slice,
so compile time is never charged) and keeps the data matrix, so the lazy sources of the
Nystrom methods and the exact structured operator can be built (and timed) later from it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from ksvd_bench.race.paper_runtime import BANDWIDTH_FACTORS, DEFAULT_KERNEL

__all__ = ["DATASETS", "DATASET_SHAPES", "POINT_DATASETS", "SHAPED_DATASETS", "DEFAULT_SHAPES",
           "Problem", "build_problem", "problem_data", "problem_from_data", "dataset_shape"]

GRAPH_DATASETS = ("cora", "citeseer", "pubmed")
FEATURE_DATASETS = ("cora-features", "citeseer-features")
#: problems built from two point sets (a lazy ``KernelSource.from_points`` exists for them)
POINT_DATASETS = ("rare-clusters",)
#: problems whose shape is a parameter (``shape=``, ``--size``)
SHAPED_DATASETS = ("synthetic",) + POINT_DATASETS
DATASETS = GRAPH_DATASETS + FEATURE_DATASETS + SHAPED_DATASETS

#: shape (N, M) of each real dataset's kernel matrix, to check ``rank`` before any work
DATASET_SHAPES = {"cora": (2708, 2708), "citeseer": (3312, 3312), "pubmed": (19717, 19717),
                  "cora-features": (2708, 1433), "citeseer-features": (3312, 3703)}
#: the compatibility map used when N != M and none is given (the paper's a1)
DEFAULT_FEATURE_COMPAT = "pca"
#: size of the default synthetic problem
DEFAULT_SYNTHETIC_SHAPE = (1500, 1200)
#: size of the default rare-cluster problem (issue 15's N = M = 6000)
DEFAULT_RARE_SHAPE = (6000, 6000)
#: default shape of each shaped dataset
DEFAULT_SHAPES = {"synthetic": DEFAULT_SYNTHETIC_SHAPE, "rare-clusters": DEFAULT_RARE_SHAPE}


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
    """

    name: str
    G: np.ndarray
    kernel_seconds: float | None
    A: object = None
    kernel: str | None = None
    gamma: float | None = None
    params: dict = field(default_factory=dict)
    points: tuple | None = None

    @property
    def shape(self):
        return self.G.shape

    @property
    def definition(self):
        """What defines ``G`` (name, kernel, bandwidth, parameters, data): the reference-cache key.

        A kernel matrix built by a freshly compiled Numba function and by a cached one can
        differ in the last bit; keying the reference cache on this definition instead of on
        ``G``'s bits makes the second run hit the cache the first one wrote. A problem without
        a data matrix (a given G, e.g. ``synthetic``, made by numpy alone) is keyed by G.
        """
        data = (self.A if self.A is not None
                else self.points if self.points is not None else self.G)
        return ("ksvd-bench problem", self.name, self.kernel, self.gamma, dict(self.params),
                data)

    def __repr__(self):
        kernel = self.kernel or "given"
        gamma = "" if self.gamma is None else f", gamma={self.gamma:.4g}"
        secs = "" if self.kernel_seconds is None else f", kernel_seconds={self.kernel_seconds:.3g}"
        return (f"Problem(name={self.name!r}, shape={self.G.shape[0]}x{self.G.shape[1]}, "
                f"kernel={kernel!r}{gamma}{secs})")

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
            Passed to ``KernelSource``. ``False`` evaluates only the blocks a solver asks for,
            which is what the Nystrom methods' end-to-end time should charge.

        Returns
        -------
        source
            For a point problem ``KernelSource.from_points(X, Z, kernel, gamma=gamma)``
            (uncentred; it has ``joint_psd()``); for ``synthetic`` (no data) the dense matrix
            wrapped by ``solvers.as_source``.
        """
        from ksvd_bench.kernels import KernelSource

        if self.points is not None:
            X, Z = self.points
            return KernelSource.from_points(X, Z, self.kernel, gamma=self.gamma,
                                            center=bool(self.params.get("center", False)))
        if self.A is None:
            from solvers import as_source

            return as_source(self.G)

        p = self.params
        return KernelSource(
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
        from ksvd_bench.kernels import StructuredKernelSource

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
    from ksvd_bench.datasets import load_features, load_graph

    # content_only: the paper's node counts (Citeseer 3312, not the 3327 ids of the cites file).
    if name in GRAPH_DATASETS:
        return load_graph(name, content_only=True).adjacency
    if name in FEATURE_DATASETS:
        return sp.csr_matrix(load_features(name.split("-")[0], content_only=True),
                             dtype=np.float64)
    raise ValueError(f"dataset must be one of {GRAPH_DATASETS + FEATURE_DATASETS}, got {name!r}")


#: row counts of the warm-up slices: the kernel builders run a serial compile below
#: 2**16 output entries and a parallel one above (``kernels._numba.SERIAL_BELOW``); a 64-row
#: slice reaches only the serial one, so the timed build compiled the parallel one (3-7 s
#: charged to "kernel s" on a first run, 0.1 s warm on Cora). 320 x 320 > 2**16 reaches both.
WARM_UP_ROWS = (64, 320)


def _warm_up(A, kernel, gamma, compat, center, seed):
    """Compile every kernel builder the timed build will call, on slices of ``A``.

    The slices have the same type, dtype and layout as ``A``, at sizes below and above the
    builders' serial/parallel switch, so neither compile (nor its load from Numba's disk
    cache) is charged to the timed build.
    """
    from ksvd_bench.kernels import ksvd_kernel

    for rows in WARM_UP_ROWS:
        k = min(rows, A.shape[0], A.shape[1])
        small = A[:k, :k] if A.shape[0] == A.shape[1] else A[:k]
        if sp.issparse(small):
            small = sp.csr_matrix(small)
        ksvd_kernel(small, kernel, gamma=gamma, compat=compat, center=center,
                    random_state=seed)
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
        from ksvd_bench.datasets import make_kernel_problem

        n, m = DEFAULT_SYNTHETIC_SHAPE if shape is None else shape
        opts = dict(synthetic_options or {})
        G = np.ascontiguousarray(make_kernel_problem(int(n), int(m), random_state=seed, **opts),
                                 dtype=np.float64)
        params = {"shape": [int(n), int(m)], "seed": seed, "center": False, "compat": None,
                  **opts}
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
    return problem_from_data(A, name=name, kernel=kernel, gamma=gamma, bandwidth_factor=factor,
                             compat=compat, center=center, random_state=seed)


def problem_from_data(A, *, name, kernel=DEFAULT_KERNEL, gamma=None, bandwidth_factor=1.0,
                      compat=None, center=True, random_state=0):
    """A :class:`Problem` from any data matrix: the dense kernel matrix, timed after a warm-up.

    Parameters
    ----------
    A : ndarray or sparse matrix of shape (N, M)
        Data matrix (rows x_i = A[i, :], columns z_j = A[:, j]).
    name : str
        Label of the problem in tables and files.
    kernel : str, default="sne"
    gamma : float, optional
        Bandwidth; default the paper's rule with ``bandwidth_factor``.
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
    from ksvd_bench.kernels import ksvd_kernel, paper_gamma

    if isinstance(random_state, bool) or not isinstance(random_state, (int, np.integer)):
        raise TypeError(f"random_state must be an int (it is recorded), got {random_state!r}")
    seed = int(random_state)
    factor = float(bandwidth_factor)
    if gamma is None and kernel in ("sne", "rbf", "t"):
        gamma = paper_gamma(A, factor)
    _warm_up(A, kernel, gamma, compat, center, seed)
    t0 = time.perf_counter()
    G = ksvd_kernel(A, kernel, gamma=gamma, compat=compat, center=center, random_state=seed)
    seconds = time.perf_counter() - t0
    G = np.asarray(G, dtype=np.float64)
    params = {"bandwidth_factor": factor, "compat": compat, "center": bool(center),
              "seed": seed, "dtype": "float64"}
    return Problem(name=name, G=G, kernel_seconds=seconds, A=A, kernel=kernel,
                   gamma=None if gamma is None else float(gamma), params=params)


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
    from ksvd_bench.datasets import make_rare_clusters
    from ksvd_bench.kernels import kernel_matrix

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
    params = {"shape": [n, m], "seed": seed, "center": False, "compat": None,
              "rare": [int(c) for c in P.params["rare"]], "dtype": "float64"}
    return Problem(name=name, G=G, kernel_seconds=seconds, kernel="sne", gamma=gamma,
                   params=params, points=(P.X, P.Z))
