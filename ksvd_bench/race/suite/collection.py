"""The problem collections of ``ksvd-bench suite``: fixed, named and versioned.

A :class:`Collection` is a list of :class:`ProblemSpec` (a name, what it is, how to build it at
full and at ``--quick`` size, the entries raced on it) and the race settings (rank, measures,
tolerances, seeds, budgets), each for a full and a quick run. Its ``name`` and ``version`` go
into every result; the version is raised whenever a problem, a size or a setting changes, so
two results with the same name and version raced the same problems the same way.

The default collection (version 2), in this order:

==================  ========================================================================
``cora``            the directed citation graphs, centred SNE, the paper's bandwidth
``citeseer``        (factors 1 / 1 / 0.5); exact structured rows beside the dense solvers
``pubmed``          (19717 x 19717; left out of ``--quick``, see :data:`QUICK_SKIPS`)
``ionosphere``      the bundled UCI table (351 samples x 34 features) as a data matrix A,
                    centred SNE with the ``pca`` compatibility map (G is 351 x 34)
``rare-clusters``   issue 15's family: 20 shared clusters, 6 rare, d = 64, uncentred SNE
                    (6000 x 6000; quick 2000 x 2000)
``digits-by-class`` sklearn's ``load_digits`` (1797 x 64) as two point sets: the digits 0-4
                    (rows) against 5-9 (columns), uncentred SNE, the paper's bandwidth rule
                    on the stacked points
``synthetic-fast``  ``make_kernel_problem`` (1500 x 1200; quick 800 x 600), 20 planted
``synthetic-poly``  triplets: exponential decay exp(-0.2 (k - 1)), polynomial decay 1 / k,
``synthetic-flat``  flat (all 1) with a gap to the noise (1e-3) after the 20th
``lazy-points``     two clustered point sets (d = 16, 20 clusters) at N = M = 20000 (quick
                    4000), raced lazily: G (3.2 GB) is never formed, the solvers read the
                    lazy ``KernelSource.from_points`` and the reference is block Krylov to
                    1e-10 (:func:`ksvd_bench.race.problems.krylov_reference`). ``tsvd``
                    (ARPACK: hundreds of passes, each evaluating 4e8 kernel entries) is not
                    raced on it and counts as unsolved there
``attention``       softmax attention ``softmax(Q K^T / sqrt(d))`` of one head,
                    ``make_attention_points``: N = M = 4096 tokens (quick 2048) with rank-96
                    embeddings plus noise, d = 64, uncentred (dense)
``lazy-attention``  the same at N = M = 20000, raced lazily as ``lazy-points`` (``tsvd``
                    not raced); left out of ``--quick``
==================  ========================================================================

Versions: 1, the first ten problems; 2 (issue 33), the two attention problems added, every
other problem and setting unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ksvd_bench.datasets import load_table, make_attention_points, make_clustered_points
from ksvd_bench.race.compare import DEFAULT_METHODS
from ksvd_bench.race.problems import build_problem, problem_from_data, problem_from_points

__all__ = [
    "ProblemSpec",
    "Collection",
    "COLLECTIONS",
    "DEFAULT_COLLECTION",
    "QUICK_SKIPS",
    "get_collection",
]

#: the collection ``ksvd-bench suite`` races when none is named
DEFAULT_COLLECTION = "default"


@dataclass(frozen=True)
class ProblemSpec:
    """One problem of a collection.

    Attributes
    ----------
    name : str
        Its name in every result.
    description : str
        What it is, in a few words (recorded).
    build : callable
        ``build(quick, seed) -> Problem``.
    methods : tuple of str or None
        The entries raced on it (None: the collection's); an entry of the collection left
        out here counts as unsolved on this problem, with the reason :attr:`skip_reason`.
    skip_reason : str or None
        Why the left-out entries are not raced (recorded in the failures).
    """

    name: str
    description: str
    build: object
    methods: tuple | None = None
    skip_reason: str | None = None


@dataclass(frozen=True)
class Collection:
    """A fixed, versioned problem collection and how it is raced.

    ``settings`` and ``quick_settings`` are keyword arguments of
    :func:`ksvd_bench.race.compare.run_compare` (rank, eps, weights, seeds, methods,
    budget_seconds, sweep_limit, ...).
    """

    name: str
    version: int
    description: str
    problems: tuple
    settings: dict
    quick_settings: dict
    quick_skips: tuple = field(default=())

    def problems_for(self, quick):
        """The problems a (quick) run races, in order."""
        return tuple(p for p in self.problems if not (quick and p.name in self.quick_skips))

    def record(self, quick):
        """What every result keeps of the collection."""
        return {
            "name": self.name,
            "version": self.version,
            "quick": bool(quick),
            "description": self.description,
            "problems": [
                {"name": p.name, "description": p.description} for p in self.problems_for(quick)
            ],
            "skipped_in_quick": list(self.quick_skips) if quick else [],
        }


# --------------------------------------------------------------------------- the builders


def _named(name):
    def build(quick, seed):
        return build_problem(name, random_state=seed)

    return build


def _ionosphere(quick, seed):
    X = load_table("ionosphere")[0]
    return problem_from_data(X, name="ionosphere", compat="pca", center=True, random_state=seed)


def _rare_clusters(quick, seed):
    return build_problem(
        "rare-clusters", shape=(2000, 2000) if quick else (6000, 6000), random_state=seed
    )


def _digits(quick, seed):
    # scikit-learn's datasets: loaded only for this problem (start-up)
    from sklearn.datasets import load_digits

    digits = load_digits()
    X, y = digits.data.astype(float), digits.target
    return problem_from_points(
        X[y < 5],
        X[y >= 5],
        name="digits-by-class",
        center=False,
        random_state=seed,
        source="sklearn.datasets.load_digits",
    )


def _synthetic(name, decay):
    def build(quick, seed):
        shape = (800, 600) if quick else (1500, 1200)
        problem = build_problem(
            "synthetic",
            shape=shape,
            random_state=seed,
            synthetic_options={"rank": 20, "decay": decay},
        )
        problem.name = name
        return problem

    return build


#: N = M of the lazy problem (full, quick), and the memory limit that makes it lazy
LAZY_SIZES = (20_000, 4_000)
LAZY_MEMORY_LIMIT = 64 * 2**20


def _lazy_points(quick, seed):
    n = LAZY_SIZES[1] if quick else LAZY_SIZES[0]
    P = make_clustered_points(n, n, 16, 20, random_state=seed)
    return problem_from_points(
        P.X,
        P.Z,
        name="lazy-points",
        gamma=float(P.gamma),
        center=False,
        memory_limit=LAZY_MEMORY_LIMIT,
        random_state=seed,
        source="make_clustered_points(d=16, K=20)",
    )


#: N = M of the attention problems: (full, quick) of the dense one, and the lazy one's
ATTENTION_SIZES = (4096, 2048)
LAZY_ATTENTION_SIZE = 20_000


def _attention(n, name, memory_limit=None):
    def build(quick, seed):
        size = n(quick)
        P = make_attention_points(size, d=64, rank=96, random_state=seed)
        limit = {} if memory_limit is None else {"memory_limit": memory_limit}
        return problem_from_points(
            P.X,
            P.Z,
            name=name,
            kernel="softmax",
            gamma=P.gamma,
            center=False,
            random_state=seed,
            source="make_attention_points(d=64, rank=96)",
            **limit,
        )

    return build


_NO_TSVD = tuple(m for m in DEFAULT_METHODS if m != "tsvd")

_DEFAULT_PROBLEMS = (
    ProblemSpec("cora", "citation graph 2708 x 2708, centred SNE", _named("cora")),
    ProblemSpec("citeseer", "citation graph 3312 x 3312, centred SNE", _named("citeseer")),
    ProblemSpec(
        "pubmed", "citation graph 19717 x 19717, centred SNE (factor 0.5)", _named("pubmed")
    ),
    ProblemSpec(
        "ionosphere", "UCI table 351 x 34 as a data matrix, centred SNE, pca compat", _ionosphere
    ),
    ProblemSpec("rare-clusters", "20 clusters, 6 rare, d = 64, uncentred SNE", _rare_clusters),
    ProblemSpec("digits-by-class", "load_digits: digits 0-4 x digits 5-9 points, SNE", _digits),
    ProblemSpec(
        "synthetic-fast",
        "planted rank 20, exponential decay",
        _synthetic("synthetic-fast", "exponential"),
    ),
    ProblemSpec(
        "synthetic-poly",
        "planted rank 20, polynomial decay 1/k",
        _synthetic("synthetic-poly", "polynomial"),
    ),
    ProblemSpec(
        "synthetic-flat",
        "planted rank 20, flat, gap to noise 1e-3",
        _synthetic("synthetic-flat", "flat"),
    ),
    ProblemSpec(
        "lazy-points",
        "two clustered point sets N = M = 20000 (quick 4000), lazy",
        _lazy_points,
        methods=_NO_TSVD,
        skip_reason="not raced: ARPACK on a lazy G takes hundreds of passes, each "
        "evaluating every kernel entry",
    ),
    ProblemSpec(
        "attention",
        "softmax attention, d = 64, rank-96 tokens, N = M = 4096 (quick 2048)",
        _attention(lambda quick: ATTENTION_SIZES[quick], "attention"),
    ),
    ProblemSpec(
        "lazy-attention",
        "softmax attention, d = 64, rank-96 tokens, N = M = 20000, lazy",
        _attention(lambda quick: LAZY_ATTENTION_SIZE, "lazy-attention", LAZY_MEMORY_LIMIT),
        methods=_NO_TSVD,
        skip_reason="not raced: ARPACK on a lazy G takes hundreds of passes, each "
        "evaluating every kernel entry",
    ),
)

#: problems a ``--quick`` run leaves out (the record says so): PubMed's dense 19717 x 19717
#: G alone takes 3 GB and minutes per solver on 2 cores; the lazy attention problem's
#: passes over 4e8 entries, as long as lazy-points' at full size
QUICK_SKIPS = ("pubmed", "lazy-attention")

#: the race of the default collection: the strict measures (uniform eta, lowrank) at 1e-1 and
#: 1e-2, every compare entry; quick: one seed and shorter sweeps
_SETTINGS = {
    "rank": 20,
    "eps": (0.1, 0.01),
    "weights": ("uniform", "lowrank"),
    "seeds": 3,
    "methods": DEFAULT_METHODS,
    "budget_seconds": 3.0,
    "sweep_limit": 20.0,
    "random_state": 0,
}
_QUICK = {**_SETTINGS, "seeds": 1, "budget_seconds": 1.0, "sweep_limit": 6.0}

COLLECTIONS = {
    "default": Collection(
        name="default",
        version=2,
        description="the citation graphs, a UCI table, rare clusters, digits as two point "
        "sets, three synthetic decays, one lazy problem at N = M = 20000, and softmax "
        "attention (dense at N = M = 4096, lazy at 20000)",
        problems=_DEFAULT_PROBLEMS,
        settings=_SETTINGS,
        quick_settings=_QUICK,
        quick_skips=QUICK_SKIPS,
    ),
}


def get_collection(name):
    """The :class:`Collection` called ``name`` (a ValueError names the known ones)."""
    if name not in COLLECTIONS:
        raise ValueError(f"collection must be one of {tuple(COLLECTIONS)}, got {name!r}")
    return COLLECTIONS[name]


# --------------------------------------------------------------------------- smoke


def _smoke_synthetic(quick, seed):
    problem = build_problem(
        "synthetic",
        shape=(90, 70),
        random_state=seed,
        synthetic_options={"rank": 6, "decay": "exponential"},
    )
    problem.name = "smoke-synthetic"
    return problem


def _smoke_points(quick, seed):

    rng = np.random.default_rng(seed)
    X = np.vstack([rng.normal(c, 0.05, size=(20, 3)) for c in range(4)])
    return problem_from_points(
        X, X[::-1] + 0.01, name="smoke-points", gamma=1.0, memory_limit=1000.0, random_state=seed
    )


_SMOKE_SETTINGS = {
    "rank": 4,
    "eps": (0.1, 0.01),
    "weights": ("uniform", "lowrank"),
    "seeds": 2,
    "methods": ("tsvd", "rsvd", "block_krylov", "asym_nystrom", "asym_nystrom_rpcholesky"),
    "budget_seconds": None,  # no clock in the race: every run of it gives the same records
    "sweep_limit": None,
    "random_state": 0,
}

#: a check of a set-up in seconds (``suite --collection smoke --workers 2``), and the tests' run:
#: a 90 x 70 planted matrix and two 80-point sets raced lazily, 5 entries, no time budgets
COLLECTIONS["smoke"] = Collection(
    name="smoke",
    version=1,
    description="a check of a set-up in seconds: a 90 x 70 planted rank-6 matrix and two "
    "80-point sets raced lazily, 5 entries, no time budgets",
    problems=(
        ProblemSpec(
            "smoke-synthetic", "planted rank 6, exponential decay, 90 x 70", _smoke_synthetic
        ),
        ProblemSpec(
            "smoke-points",
            "4 clusters, 80 x 80 points, uncentred SNE, lazy",
            _smoke_points,
            methods=tuple(m for m in _SMOKE_SETTINGS["methods"] if m != "tsvd"),
            skip_reason="not raced: tsvd is not raced on a lazy G (as on lazy-points)",
        ),
    ),
    settings=_SMOKE_SETTINGS,
    quick_settings={**_SMOKE_SETTINGS, "seeds": 1},
)
