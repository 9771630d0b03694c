"""The methods of the scale study: :class:`MethodRunner` objects in :data:`RUNNERS`.

Each runner says how to solve a cell (``solve(problem, rank, options, random_state)``), at
which fixed effort per part (``effort(spec)``) and on which parts; :func:`register_runner` adds
one. Runners are module-level, picklable objects: isolated cells receive them by pickle.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import solvers
from ksvd_bench.race.scale.problems import PARTS, POINT_PARTS

__all__ = [
    "RUNNERS",
    "DASK_METHODS",
    "MethodRunner",
    "SolverCall",
    "SamplingCall",
    "SampledEffort",
    "register_runner",
]


@dataclass(frozen=True)
class SolverCall:
    """``solve(problem, rank, options, random_state)`` through ``solvers.svd(method=...)``."""

    method: str

    def __call__(self, problem, rank, options, random_state):
        return solvers.svd(
            problem.source(), rank, method=self.method, random_state=random_state, **options
        )


def _effort_tsvd(spec):
    return {}


def _effort_rsvd(spec):
    # part b has a wide gap at r: no power iteration needed for 1e-2 (2 passes)
    return {"n_oversamples": 10, "n_iter": 2 if spec.part == "a" else 0}


def _effort_block_krylov(spec):
    return {"n_oversamples": 10, "n_iter": 2 if spec.part == "a" else 1}


def _effort_generalized_nystrom(spec):
    # one pass, no certificate (its answer is unverified: info["reliable"] None)
    return {"n_oversamples": 20, "check_passes": 0}


def _effort_asym_nystrom(spec):
    # 400 samples (the reproduction); at least 2 r, at most half the matrix
    return {"n_samples": int(min(max(400, 2 * spec.rank), min(spec.n, spec.m) // 2))}


@dataclass(frozen=True)
class SampledEffort:
    """Effort of a sampling entry: ``multiple * r`` samples (at most half the matrix) and no
    check pass, so that its passes and entries are the sampler's own (issue 15's race by
    entries: ARP one pass plus the chosen rows and columns, RPCholesky no pass). A class, not
    a closure: isolated cells receive their runner by pickle."""

    multiple: int

    def __call__(self, spec):
        m = int(min(self.multiple * spec.rank, min(spec.n, spec.m) // 2))
        return {"n_samples": m, "check_passes": 0}


#: effort of each sampling entry: samples per r (the stable core reads 2 m rows and m columns;
#: RPCholesky reads (m + 1)(N + M) entries for m pivots)
_effort_arp = SampledEffort(2)
_effort_rpcholesky = SampledEffort(8)
_effort_aca = SampledEffort(4)


@dataclass(frozen=True)
class SamplingCall:
    """``solvers.svd(source, method="asym_nystrom", sampling=...)`` (a picklable runner)."""

    sampling: str

    def __call__(self, problem, rank, options, random_state):
        return solvers.svd(
            problem.source(),
            rank,
            method="asym_nystrom",
            sampling=self.sampling,
            random_state=random_state,
            **options,
        )


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
    "tsvd": _solver_runner(
        "tsvd", _effort_tsvd, "ARPACK, or the source's exact path (part a: exact structured)"
    ),
    "rsvd": _solver_runner("rsvd", _effort_rsvd, "randomized SVD (2 q + 2 passes)"),
    "block_krylov": _solver_runner(
        "block_krylov",
        _effort_block_krylov,
        "randomized block Krylov (2 q + 2 passes, Musco & Musco Alg. 2)",
    ),
    "generalized_nystrom": _solver_runner(
        "generalized_nystrom",
        _effort_generalized_nystrom,
        "generalized Nystrom (one pass through sketch, unchecked)",
    ),
    "asym_nystrom": _solver_runner(
        "asym_nystrom",
        _effort_asym_nystrom,
        "asymmetric Nystrom, uniform sampling (solvers' default: "
        "stable core, 2 m rows and m columns, one check pass)",
    ),
    "asym_nystrom_arp": MethodRunner(
        "asym_nystrom_arp",
        SamplingCall("arp"),
        _effort_arp,
        PARTS,
        "asym Nystrom, adaptive randomized pivoting on the one-pass sketch (stable core, "
        "m = 2 r, no check pass: one pass plus 2 m rows and m columns)",
    ),
    "asym_nystrom_rpcholesky": MethodRunner(
        "asym_nystrom_rpcholesky",
        SamplingCall("rpcholesky"),
        _effort_rpcholesky,
        POINT_PARTS,
        "asym Nystrom, randomly pivoted Cholesky on the joint PSD kernel of the points "
        "(m = 8 r pivots, no check pass; reads (m + 1)(N + M) entries, no pass; point "
        "parts only; the source's SNE set-up pass is in setup_seconds/setup_passes)",
    ),
    "asym_nystrom_aca": MethodRunner(
        "asym_nystrom_aca",
        SamplingCall("aca"),
        _effort_aca,
        PARTS,
        "asym Nystrom, adaptive cross approximation with partial pivoting (ACA+; stable "
        "core, m = 4 r, no check pass): the classical baseline",
    ),
}


def _solve_svd_compressed(problem, rank, options, random_state):
    """Dask's own ``svd_compressed`` on G as ``map_blocks`` tiles of the same source."""
    # dask: an optional dependency (ksvd-bench[dask]), needed for this peer only
    from ksvd_bench.kernels.distributed import svd_compressed

    return svd_compressed(problem.source(), rank, random_state=random_state, **options)


# Dask's peer of rsvd, with rsvd's power iterations and oversampling (2 q + 2 passes)
RUNNERS["svd_compressed"] = MethodRunner(
    "svd_compressed",
    _solve_svd_compressed,
    _effort_rsvd,
    POINT_PARTS,
    "dask.array.linalg.svd_compressed on map_blocks kernel tiles, rsvd's q and p",
)
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
        raise ValueError(
            f"runner.parts must be a non-empty subset of {PARTS}, got {runner.parts!r}"
        )
    RUNNERS[runner.name] = runner
    return runner
