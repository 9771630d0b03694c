"""Run a solver at growing effort until it meets an accuracy tolerance (the eta-tolerance driver).

A benchmark that times solvers at fixed parameters compares answers of different quality. The
driver instead fixes the quality: it grows each method's effort parameter along a schedule
(:func:`effort_schedule`) until an accuracy measure against a reference SVD is at most ``eps``
(``metric``: the paper's eta, the gap-robust low-rank error or the subspace error; without a
reference, ``stop="estimate"``: a reference-free estimate of the relative low-rank error), and
reports the time at that effort. An answer counts only as a whole: its singular values and the
pairing of ``U``, ``s`` and ``V`` are checked too, under every stop whenever a reference is
given, and an answer the solver marked unreliable never converges; each answer's verdict is
its ``status`` (:data:`STATUSES`: ``"stopped early, wrong"`` marks a reference-free stop that
fired on a wrong answer; :func:`solve_to_tolerance`, Notes).

Modules, by job:

* :mod:`.schedule`: the efforts tried per method (:func:`effort_schedule`);
* :mod:`.reference`: the exact reference SVD and its cache (:func:`reference_svd`,
  :func:`definition_key`);
* :mod:`.sweep`: the sweep itself (:func:`solve_to_tolerance`), its request grouped into
  :class:`StopRule`, :class:`Scoring` and :class:`Effort`;
* :mod:`.result`: :class:`ToleranceResult`.

The scoring of one answer is in :mod:`ksvd_bench.scoring`.
"""

from __future__ import annotations

from .reference import DENSE_REFERENCE_MAX_ENTRIES, definition_key, reference_svd
from .result import STATUSES, STOPPED_BY, ToleranceResult
from .schedule import EFFORT_OPTION, effort_kind, effort_schedule
from .sweep import METRICS, STOPS, Effort, Scoring, StopRule, solve_to_tolerance

__all__ = [
    "DENSE_REFERENCE_MAX_ENTRIES",
    "EFFORT_OPTION",
    "METRICS",
    "STATUSES",
    "STOPPED_BY",
    "STOPS",
    "Effort",
    "Scoring",
    "StopRule",
    "ToleranceResult",
    "definition_key",
    "reference_svd",
    "effort_kind",
    "effort_schedule",
    "solve_to_tolerance",
]
