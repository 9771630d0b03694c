"""The settings of ``compare``: what it races, and every argument checked before any work.

:func:`check_settings` turns the arguments of :func:`ksvd_bench.race.compare.run_compare`
into a frozen :class:`Settings` (every step reads it), each error naming its argument.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ksvd_bench._threads import check_threads
from ksvd_bench.race._common import check_positive_int, seeds_from
from ksvd_bench.race.paper_runtime import MEASURES, PAPER_ASYM_ENTRY, PAPER_ASYM_OPTIONS
from ksvd_bench.race.problems import (
    DATASETS,
    Problem,
    dataset_shape,
)

__all__ = ["VARIANTS", "DEFAULT_METHODS", "LAZY_E2E", "POINT_ONLY", "Settings",
           "check_settings", "check_datasets", "check_rank_fits", "solver_of", "effort_option",
           "entry_options", "not_applicable"]

#: raced entries beyond ``solvers.METHODS``: name -> (solver method, its options). The
#: ``asym_nystrom*`` sampling entries keep the solver's default core and check (stable core,
#: one check pass); only :data:`PAPER_ASYM_ENTRY` runs the paper's method.
#:
#: * ``asym_nystrom_paper``: the paper's core (eq. (10)) and no check pass (the paper's table);
#: * ``asym_nystrom_norm``: rows/columns with probability ~ squared norm, which finds localised
#:   singular vectors that uniform sampling misses (PubMed's are);
#: * ``asym_nystrom_arp``: adaptive randomized pivoting on the one-pass sketch (one pass plus
#:   the chosen rows and columns);
#: * ``asym_nystrom_rpcholesky``: randomly pivoted Cholesky on the joint PSD kernel of two
#:   point sets (no pass); needs a point problem (``rare-clusters``): n/a on the others;
#: * ``asym_nystrom_aca``: adaptive cross approximation (partial pivoting, ACA+), the classical
#:   baseline.
VARIANTS = {
    PAPER_ASYM_ENTRY: ("asym_nystrom", dict(PAPER_ASYM_OPTIONS)),
    "asym_nystrom_norm": ("asym_nystrom", {"sampling": "norm"}),
    "asym_nystrom_arp": ("asym_nystrom", {"sampling": "arp"}),
    "asym_nystrom_rpcholesky": ("asym_nystrom", {"sampling": "rpcholesky"}),
    "asym_nystrom_aca": ("asym_nystrom", {"sampling": "aca"}),
}
#: entries that need a problem built from two point sets (a joint PSD kernel)
POINT_ONLY = ("asym_nystrom_rpcholesky",)
#: what ``compare`` races by default
DEFAULT_METHODS = ("tsvd", "rsvd", "block_krylov", "sym_nystrom", "asym_nystrom",
                   PAPER_ASYM_ENTRY, "asym_nystrom_norm", "asym_nystrom_arp",
                   "asym_nystrom_rpcholesky", "asym_nystrom_aca", "generalized_nystrom")
#: solvers whose end-to-end time is charged on the lazy kernel source (only the blocks or the
#: one sketch pass they read), not on a dense G built first
LAZY_E2E = ("sym_nystrom", "asym_nystrom", "generalized_nystrom")



@dataclass(frozen=True)
class Settings:
    """The checked arguments of one :func:`run_compare` call (what every step reads)."""

    kernel: str
    rank: int
    eps: tuple          # loose first, tightest last
    measures: tuple     # eta weightings and/or "lowrank"
    methods: tuple
    seeds: tuple        # per-run seeds derived from random_state
    center: bool
    structured: bool
    residual: bool
    max_effort: object
    budget_seconds: float | None
    sweep_limit: float | None
    repeats: int
    threads: int
    random_state: int
    problem_options: dict | None
    cache_dir: Path | None


def _check_eps(eps):
    eps = [eps] if np.isscalar(eps) else list(eps)
    if not eps:
        raise ValueError("eps must hold at least one tolerance")
    out = []
    for e in eps:
        e = float(e)
        if not (math.isfinite(e) and e > 0):
            raise ValueError(f"eps must hold finite positive tolerances, got {e!r}")
        out.append(e)
    # Loose first, tightest last: one driver run to the tightest answers them all.
    return tuple(sorted(set(out), reverse=True))


def _check_measures(weights):
    measures = [weights] if isinstance(weights, str) else list(dict.fromkeys(weights))
    if not measures:
        raise ValueError("weights must name at least one measure")
    for w in measures:
        if w not in MEASURES:
            raise ValueError(f"weights must be drawn from {MEASURES}, got {w!r}")
    return tuple(measures)


def _check_methods(methods):
    import solvers

    methods = list(DEFAULT_METHODS if methods is None else dict.fromkeys(methods))
    allowed = tuple(solvers.METHODS) + tuple(VARIANTS)
    for m in methods:
        if m not in allowed:
            raise ValueError(f"methods must be drawn from {allowed}, got {m!r}")
    return tuple(methods)


def _check_max_effort(max_effort):
    ok = (max_effort is None or max_effort == "auto" or isinstance(max_effort, dict)
          or (isinstance(max_effort, (int, np.integer)) and not isinstance(max_effort, bool)
              and max_effort >= 1))
    if not ok:
        raise ValueError(f"max_effort must be 'auto', None, a positive int or a dict, got "
                         f"{max_effort!r}")
    return max_effort


def _check_seconds(value, name):
    if value is not None and not (isinstance(value, (int, float)) and not isinstance(value, bool)
                                  and math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number > 0 or None, got {value!r}")
    return value


def check_datasets(datasets):
    datasets = [datasets] if isinstance(datasets, (str, Problem)) else list(datasets)
    if not datasets:
        raise ValueError("datasets must name at least one problem")
    for d in datasets:
        if not isinstance(d, Problem) and d not in DATASETS:
            raise ValueError(f"datasets must be drawn from {DATASETS} or be Problem objects, "
                             f"got {d!r}")
    return datasets


def check_rank_fits(datasets, rank, problem_options):
    """``rank <= min(N, M)`` of every problem, known before any kernel is built."""
    for d in datasets:
        if isinstance(d, Problem):
            name, shape = d.name, d.G.shape
        else:
            name, shape = d, dataset_shape(d, (problem_options or {}).get("shape"))
        if rank > min(shape):
            raise ValueError(f"rank must be at most min(N, M) = {min(shape)} for {name} "
                             f"({shape[0]}x{shape[1]}), got {rank}")


def check_settings(*, kernel, rank, eps, weights, seeds, center, methods, structured,
                    residual, max_effort, budget_seconds, sweep_limit, repeats, threads,
                    random_state, problem_options, cache_dir):
    """Every argument of :func:`run_compare` checked up front, errors naming the argument."""
    if isinstance(random_state, bool) or not isinstance(random_state, (int, np.integer)):
        raise TypeError(f"random_state must be an int (it is recorded), got {random_state!r}")
    return Settings(
        kernel=kernel, rank=check_positive_int(rank, "rank"), eps=_check_eps(eps),
        measures=_check_measures(weights), methods=_check_methods(methods),
        seeds=tuple(seeds_from(random_state, check_positive_int(seeds, "seeds"))),
        center=bool(center), structured=bool(structured), residual=bool(residual),
        max_effort=_check_max_effort(max_effort),
        budget_seconds=_check_seconds(budget_seconds, "budget_seconds"),
        sweep_limit=_check_seconds(sweep_limit, "sweep_limit"),
        repeats=check_positive_int(repeats, "repeats"), threads=check_threads(threads),
        random_state=int(random_state), problem_options=problem_options,
        cache_dir=None if cache_dir is None else Path(cache_dir))


def solver_of(name):
    """(solver method, options) of a raced entry."""
    return VARIANTS.get(name, (name, {}))


def entry_options(name):
    """What a raced entry runs, as recorded in the meta and named under the tables:
    ``{"solver": ..., **options}`` with asym Nystrom's ``core`` and ``check_passes`` spelled
    out (the solver's defaults where the entry does not set them)."""
    import inspect

    import solvers

    solver, options = solver_of(name)
    out = {"solver": solver, **options}
    if solver == "asym_nystrom":
        defaults = inspect.signature(solvers.asym_nystrom).parameters
        out.setdefault("sampling", defaults["sampling"].default)
        if out["sampling"] != "rpcholesky":  # rpcholesky factors the joint kernel: no core
            # core=None resolves to "stable" (orthogonalize=True, the default)
            out.setdefault("core", defaults["core"].default or "stable")
        out.setdefault("check_passes", defaults["check_passes"].default)
    return out


def not_applicable(name, problem):
    """Why a raced entry cannot run on a problem (a sentence), or None when it can."""
    if name in POINT_ONLY and problem.points is None:
        return (f"n/a: sampling='rpcholesky' needs a problem built from two point sets (a "
                f"joint PSD kernel, e.g. --dataset rare-clusters); {problem.name} has none")
    return None


def effort_option(name):
    """The solver option that a raced entry's effort sets (None for tsvd)."""
    from ksvd_bench.driver import _EFFORT_OPTION

    return _EFFORT_OPTION.get(solver_of(name)[0])
