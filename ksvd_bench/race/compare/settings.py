"""The settings of ``compare``: what it races, and every argument checked before any work.

:func:`check_settings` turns the arguments of :func:`ksvd_bench.race.compare.run_compare`
into a frozen :class:`Settings` (every step reads it), each error naming its argument. The
raced entries themselves (:data:`VARIANTS`, :func:`solver_of`, ...) are shared by every study
and live in :mod:`ksvd_bench.race.common`; they are re-exported here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import solvers
from ksvd_bench.race.common import (
    POINT_ONLY,
    VARIANTS,
    effort_option,
    entry_options,
    not_applicable,
    seeds_from,
    solver_of,
)
from ksvd_bench.race.paper_runtime import LOWRANK, MEASURES, PAPER_ASYM_ENTRY, STRICT_WEIGHTS
from ksvd_bench.race.problems import (
    DATASETS,
    Problem,
    dataset_shape,
)
from ksvd_bench.threads import check_threads
from solvers import check_int

__all__ = [
    "VARIANTS",
    "DEFAULT_METHODS",
    "DEFAULT_MEASURES",
    "DEFAULT_SEEDS",
    "FULL_MEASURES",
    "FULL_SEEDS",
    "DEFAULT_SWEEP_LIMIT",
    "FULL_SWEEP_LIMIT",
    "STRICT_WEIGHTS",
    "LAZY_E2E",
    "POINT_ONLY",
    "Settings",
    "check_settings",
    "check_tolerance",
    "check_datasets",
    "check_rank_fits",
    "solver_of",
    "effort_option",
    "entry_options",
    "not_applicable",
]

#: what ``compare`` races by default
DEFAULT_METHODS = (
    "tsvd",
    "rsvd",
    "block_krylov",
    "sym_nystrom",
    "asym_nystrom",
    PAPER_ASYM_ENTRY,
    "asym_nystrom_norm",
    "asym_nystrom_arp",
    "asym_nystrom_rpcholesky",
    "asym_nystrom_aca",
    "generalized_nystrom",
)
#: what the default race asks (README command 1): the strict measures, eta under uniform
#: weights and the gap-robust low-rank error, at 1e-1 and 1e-2, with 3 seeds, each effort
#: sweep cut at 8 s (a sweep that long is already tens of times RSVD's time: it cannot win,
#: and the cut is reported as such)
DEFAULT_MEASURES = (STRICT_WEIGHTS, LOWRANK)
DEFAULT_SEEDS = 3
DEFAULT_SWEEP_LIMIT = 8.0
#: what ``--full`` asks: every measure (the paper's weighting included) with 5 seeds and
#: 20 s sweeps
FULL_MEASURES = MEASURES
FULL_SEEDS = 5
FULL_SWEEP_LIMIT = 20.0
#: solvers whose end-to-end time is charged on the lazy kernel source (only the blocks or the
#: one sketch pass they read), not on a dense G built first
LAZY_E2E = ("sym_nystrom", "asym_nystrom", "generalized_nystrom")


@dataclass(frozen=True)
class Settings:
    """The checked arguments of one :func:`run_compare` call (what every step reads)."""

    kernel: str
    rank: int
    eps: tuple  # loose first, tightest last
    measures: tuple  # eta weightings and/or "lowrank"
    methods: tuple
    seeds: tuple  # per-run seeds derived from random_state
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


def check_tolerance(e):
    """One tolerance of the race as a float in ``(0, 1)``, or raise ``ValueError``.

    At ``eps >= 1`` every answer is right: the singular values of an answer of zeros are off
    by 1 relative, and its triplet residual is 0.
    """
    e = float(e)
    if not (math.isfinite(e) and e > 0):
        raise ValueError(f"eps must hold finite positive tolerances, got {e!r}")
    if e >= 1:
        raise ValueError(
            f"eps must be below 1, got {e:g}: at eps >= 1 every answer is right (the singular "
            f"values of an answer of zeros are off by 1, relative), so the race would crown "
            f"any solver"
        )
    return e


def _check_eps(eps):
    eps = [eps] if np.isscalar(eps) else list(eps)
    if not eps:
        raise ValueError("eps must hold at least one tolerance")
    out = [check_tolerance(e) for e in eps]
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
    methods = list(DEFAULT_METHODS if methods is None else dict.fromkeys(methods))
    allowed = tuple(solvers.METHODS) + tuple(VARIANTS)
    for m in methods:
        if m not in allowed:
            raise ValueError(f"methods must be drawn from {allowed}, got {m!r}")
    return tuple(methods)


def _check_max_effort(max_effort):
    ok = (
        max_effort is None
        or max_effort == "auto"
        or isinstance(max_effort, dict)
        or (
            isinstance(max_effort, (int, np.integer))
            and not isinstance(max_effort, bool)
            and max_effort >= 1
        )
    )
    if not ok:
        raise ValueError(
            f"max_effort must be 'auto', None, a positive int or a dict, got {max_effort!r}"
        )
    return max_effort


def _check_seconds(value, name):
    if value is not None and not (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    ):
        raise ValueError(f"{name} must be a finite number > 0 or None, got {value!r}")
    return value


def check_datasets(datasets):
    datasets = [datasets] if isinstance(datasets, (str, Problem)) else list(datasets)
    if not datasets:
        raise ValueError("datasets must name at least one problem")
    for d in datasets:
        if not isinstance(d, Problem) and d not in DATASETS:
            raise ValueError(
                f"datasets must be drawn from {DATASETS} or be Problem objects, got {d!r}"
            )
    return datasets


def check_rank_fits(datasets, rank, problem_options):
    """``rank <= min(N, M)`` of every problem, known before any kernel is built."""
    for d in datasets:
        if isinstance(d, Problem):
            name, shape = d.name, d.G.shape
        else:
            name, shape = d, dataset_shape(d, (problem_options or {}).get("shape"))
        if rank > min(shape):
            raise ValueError(
                f"rank must be at most min(N, M) = {min(shape)} for {name} "
                f"({shape[0]}x{shape[1]}), got {rank}"
            )


def check_settings(
    *,
    kernel,
    rank,
    eps,
    weights,
    seeds,
    center,
    methods,
    structured,
    residual,
    max_effort,
    budget_seconds,
    sweep_limit,
    repeats,
    threads,
    random_state,
    problem_options,
    cache_dir,
):
    """Every argument of :func:`run_compare` checked up front, errors naming the argument."""
    if isinstance(random_state, bool) or not isinstance(random_state, (int, np.integer)):
        raise TypeError(f"random_state must be an int (it is recorded), got {random_state!r}")
    return Settings(
        kernel=kernel,
        rank=check_int("rank", rank, 1),
        eps=_check_eps(eps),
        measures=_check_measures(weights),
        methods=_check_methods(methods),
        seeds=tuple(seeds_from(random_state, check_int("seeds", seeds, 1))),
        center=bool(center),
        structured=bool(structured),
        residual=bool(residual),
        max_effort=_check_max_effort(max_effort),
        budget_seconds=_check_seconds(budget_seconds, "budget_seconds"),
        sweep_limit=_check_seconds(sweep_limit, "sweep_limit"),
        repeats=check_int("repeats", repeats, 1),
        threads=check_threads(threads),
        random_state=int(random_state),
        problem_options=problem_options,
        cache_dir=None if cache_dir is None else Path(cache_dir),
    )
