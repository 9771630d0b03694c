"""The problems of the scale study: their definition, data and sources, and the constants.

A problem is a :class:`ProblemSpec` (part, size, rank, seed, dtype, device); :func:`make_data`
draws its data and :func:`make_source` wraps it as a lazy matrix source; a cell solves it
through a :class:`ScaleProblem`, which times the source's set-up pass.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ksvd_bench.datasets import make_clustered_points, make_directed_graph, make_rare_clusters
from ksvd_bench.datasets.synthetic import rare_cluster_count
from ksvd_bench.kernels import KernelSource, kernel_source
from ksvd_bench.race.common import EFFORT_LABELS

__all__ = [
    "ProblemSpec",
    "ScaleProblem",
    "make_data",
    "make_source",
    "setup_passes",
    "effort_label",
    "n_rare",
    "PARTS",
    "DEFAULT_PARTS",
    "POINT_PARTS",
    "DEVICES",
    "PROBLEM_FIELDS",
    "ROW_FIELDS",
]

PARTS = ("a", "b", "c")
#: what ``parts="both"`` (the default) runs: the two original parts
DEFAULT_PARTS = ("a", "b")
#: parts whose problem is two point sets (a lazy ``from_points`` source with ``joint_psd()``)
POINT_PARTS = ("b", "c")
PART_TITLES = {
    "a": "(a) directed graphs, centred SNE, structured operator",
    "b": "(b) two clustered point sets (d = 64), SNE, lazy from_points",
    "c": "(c) rare clusters (d = 64, r clusters, 30% of them rare), SNE, lazy from_points",
}
DEFAULT_SIZES = {
    "a": (20_000, 50_000, 100_000, 200_000, 500_000, 1_000_000),
    "b": (5_000, 10_000, 20_000, 50_000, 100_000),
    "c": (6_000, 20_000, 50_000, 100_000),
}
#: CI sizes: the whole ``--quick`` study of parts a and b (27 cells, each in its own process)
#: takes about 2 min of CPU (measured: 132 s over all its processes), 2 to 3 min on a quiet
#: 2-core machine
QUICK_SIZES = {"a": (2_000, 4_000, 8_000), "b": (1_000, 2_000, 4_000), "c": (1_000, 2_000, 4_000)}
#: the asym Nystrom sampling entries (their own runners): ARP, RPCholesky, ACA
SAMPLING_METHODS = ("asym_nystrom_arp", "asym_nystrom_rpcholesky", "asym_nystrom_aca")
DEFAULT_METHODS = {
    "a": ("tsvd", "rsvd", "block_krylov", "generalized_nystrom", "asym_nystrom"),
    "b": ("rsvd", "block_krylov", "generalized_nystrom", "asym_nystrom"),
    "c": ("rsvd", "block_krylov", "generalized_nystrom", "asym_nystrom") + SAMPLING_METHODS,
}
DEFAULT_RANK = 20
#: the subspace error the issue asks of the best method (drawn in the figure)
ACCURACY_TARGET = 1e-2
#: dimension of the point sets of parts b and c
POINTS_DIM = 64
#: weight of part c's rare clusters (how many are rare: :func:`n_rare`)
RARE_WEIGHT = 0.02
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
#: the devices of the lazy kernel of parts b and c (part a's structured operator stays on the
#: CPU)
DEVICES = ("cpu", "cuda")
#: the fields that define a cell's problem: every row carries them, and ``--merge`` refuses
#: an earlier file whose rows were made for another rank, seed, dtype or device
PROBLEM_FIELDS = ("part", "n", "m", "rank", "seed", "dtype", "device")
#: every cell's row, in table order
ROW_FIELDS = (
    *PROBLEM_FIELDS,
    "method",
    "effort",
    "status",
    "seconds",
    "setup_seconds",
    "solve_seconds",
    "cpu_seconds",
    "passes",
    "setup_passes",
    "entries",
    "peak_rss_mb",
    "base_rss_mb",
    "subspace_error",
    "sin_u",
    "sin_v",
    "sv_error",
    "n_warnings",
    "reliable",
    "reference",
    "data_seconds",
    "threads",
    "warm_up_warnings",
    "warnings",
    "error",
)


@dataclass(frozen=True)
class ProblemSpec:
    """One problem of the study, fully determined by these fields (and the library).

    Attributes
    ----------
    part : {"a", "b", "c"}
    n, m : int
        Shape of G (``n == m`` for every part).
    rank : int
        r; parts b and c draw ``rank`` clusters (c: :func:`n_rare` of them rare).
    seed : int
        Seed of the data (graph or points).
    dtype : {"float64", "float32"}
        Storage dtype of the source.
    device : {"cpu", "cuda"}
        Where the lazy kernel of parts b and c runs
        (``KernelSource.from_points(..., device=...)``);
        part a's structured operator always runs on the CPU. Not part of :attr:`key`: the
        problem (and so its reference) is the same on either device.
    """

    part: str
    n: int
    m: int
    rank: int
    seed: int
    dtype: str = "float64"
    device: str = "cpu"

    @property
    def key(self):
        """A file-name-safe identifier (the reference cache's file name)."""
        return f"{self.part}_n{self.n}_m{self.m}_r{self.rank}_s{self.seed}_{self.dtype}"

    @property
    def fields(self):
        """The problem's parameters as every row of the study carries them."""
        return {
            "part": self.part,
            "n": self.n,
            "m": self.m,
            "rank": self.rank,
            "seed": self.seed,
            "dtype": self.dtype,
            "device": self.device,
        }


def n_rare(rank):
    """How many of part c's ``rank`` clusters are rare: the family's one rule,
    :func:`~ksvd_bench.datasets.synthetic.rare_cluster_count` (6 of 20, 2 of 5, at least one
    and never all; ``rank >= 2``), as the sampling study draws them."""
    return rare_cluster_count(rank)


def make_data(spec):
    """The problem's data: ``{"adjacency": A}`` (part a) or ``{"X", "Z", "gamma"}`` (parts b
    and c; part c also ``"rare"``, the indices of its rare clusters)."""
    if spec.part == "a":
        return {"adjacency": make_directed_graph(spec.n, random_state=spec.seed).adjacency}
    if spec.part == "c":
        points = make_rare_clusters(
            spec.n,
            spec.m,
            POINTS_DIM,
            n_clusters=spec.rank,
            n_rare=n_rare(spec.rank),
            rare_weight=RARE_WEIGHT,
            random_state=spec.seed,
            dtype=spec.dtype,
        )
        return {
            "X": points.X,
            "Z": points.Z,
            "gamma": points.gamma,
            "rare": [int(c) for c in points.params["rare"]],
        }
    points = make_clustered_points(
        spec.n, spec.m, POINTS_DIM, spec.rank, random_state=spec.seed, dtype=spec.dtype
    )
    return {"X": points.X, "Z": points.Z, "gamma": points.gamma}


def make_source(spec, data, client=None):
    """The lazy matrix source of the problem (part a: structured; parts b and c:
    ``from_points``, uncentred SNE with the family's gamma)."""
    if spec.part == "a":
        return kernel_source(data["adjacency"], "sne", dtype=spec.dtype, client=client)
    return KernelSource.from_points(
        data["X"],
        data["Z"],
        "sne",
        gamma=data["gamma"],
        center=False,
        dtype=spec.dtype,
        client=client,
        device=spec.device,
    )


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


def effort_label(options):
    """``{"n_oversamples": 10, "n_iter": 2}`` -> ``"p=10 q=2"``; ``{}`` -> ``"-"``."""
    parts = [f"{EFFORT_LABELS.get(k, k)}={v}" for k, v in options.items()]
    return " ".join(parts) or "-"
