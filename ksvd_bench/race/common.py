"""What the race's studies share: names, small checks, the raced entries, the vacuity bound,
the warm-up, and the whole-triplet verdict.

The raced entries: :data:`VARIANTS` names the entries beyond ``solvers.METHODS`` (asym
Nystrom's paper core and samplers), :func:`solver_of`, :func:`effort_option`,
:func:`entry_options` and :func:`not_applicable` say what an entry runs and where.
:func:`measure_bound` is the largest value any answer can score (a tolerance at or above it is
vacuous), :func:`exact_operator` the cheapest exact form of a problem's G, :func:`warm_up`
compiles every solver before anything is timed.

The verdict: an answer meets ``eps`` only when its measure is within ``eps`` AND its
singular values are (``max_i |s~_i - s_i| <= eps s_1``), its triplets hang together
(``max(||G V~ - U~ S~||_F, ||G^T U~ - V~ S~||_F) <= eps ||G_r||_F``) and the solver did not
mark it unreliable. The driver records these per answer (:class:`ksvd_bench.driver.
ToleranceResult` and its history entries); :func:`meets` applies the same rule at any ``eps``,
so that one driver sweep to the tightest ``eps`` answers the looser ones too. A warning is
data: :func:`counting_warnings` records (and re-issues) the warnings of the solves the
studies make themselves, and ``warning_fields`` (the driver's, from
:mod:`ksvd_bench.scoring`) turns them into a count and deduplicated messages.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import statistics

import numpy as np

import solvers
from ksvd_bench.driver import EFFORT_OPTION
from ksvd_bench.metrics.common import unit_of
from ksvd_bench.race.paper_runtime import (
    LOWRANK,
    PAPER_WEIGHTS,
)
from ksvd_bench.race.problems import Problem
from ksvd_bench.scoring import (
    STATUSES,
    recording_warnings,
    reemit,
    verification,
    warning_fields,
)
from solvers import svd

__all__ = [
    "STRUCTURED_NAME",
    "RESIDUAL_SUFFIX",
    "EFFORT_LABELS",
    "VERDICT_FIELDS",
    "seeds_from",
    "median",
    "num",
    "ratio_text",
    "is_eta",
    "measure_fields",
    "driver_options",
    "meets",
    "verdict",
    "counting_warnings",
    "warning_fields",
    "merge_verdicts",
    "VARIANTS",
    "POINT_ONLY",
    "solver_of",
    "effort_option",
    "entry_options",
    "not_applicable",
    "measure_bound",
    "exact_operator",
    "warm_up",
    "STATUSES",
    "status_of",
    "point_status",
    "rule_failures",
    "audit_rows",
]

#: the exact entry of ``compare`` (structured operator + ARPACK)
STRUCTURED_NAME = "tsvd (structured)"
#: suffix of the rows stopped by the reference-free residual estimate
RESIDUAL_SUFFIX = " [stop=residual]"
#: how the effort of each solver option is labelled in the tables
EFFORT_LABELS = {
    "n_samples": "m",
    "n_oversamples": "p",
    "n_iter": "q",
    "ncv": "ncv",
    "check_passes": "chk",
}
#: the whole-triplet fields of every run and row (values, warning count and messages)
VERDICT_FIELDS = ("sv_error", "triplet_residual", "n_warnings", "warnings", "reliable")

#: raced entries beyond ``solvers.METHODS``: name -> (solver method, its options), the
#: variants ``solvers.SOLVERS`` declares (``f"{method}_{suffix}"``). The ``asym_nystrom*``
#: sampling entries keep the solver's default core and check; only :data:`PAPER_ASYM_ENTRY`
#: runs the paper's method.
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
    f"{name}_{suffix}": (name, dict(options))
    for name, spec in solvers.SOLVERS.items()
    for suffix, options in spec.variants.items()
}
#: entries that need a problem built from two point sets (a joint PSD kernel)
POINT_ONLY = ("asym_nystrom_rpcholesky",)


def seeds_from(random_state, n_seeds):
    """``n_seeds`` int seeds derived from ``random_state`` (recorded with the results)."""
    state = np.random.SeedSequence(random_state).generate_state(n_seeds)
    return [int(s) for s in state]


def _missing(value):
    return value is None or (isinstance(value, float) and math.isnan(value))


def median(values):
    """Median of the values that are not None or NaN (None when there are none)."""
    values = [v for v in values if not _missing(v)]
    return float(statistics.median(values)) if values else None


def num(value, digits=3):
    """A number in at most 8 characters: 3 significant digits, '-' for none."""
    if _missing(value):
        return "-"
    if value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e5):
        return f"{value:.{digits - 1}e}"
    return f"{value:.{digits}g}" if abs(value) < 1 else f"{value:.{max(digits - 1, 1)}f}"


def ratio_text(value):
    """A speedup as text: ``22.9x``, ``1.71x``, ``0.042x`` (two significant digits below 0.1)."""
    if value >= 10:
        return f"{value:.1f}x"
    return f"{value:.2f}x" if value >= 0.1 else f"{value:.2g}x"


def is_eta(measure):
    """Whether a measure name is an eta weighting (else it is ``"lowrank"``)."""
    return measure != LOWRANK


def measure_fields(measure):
    """The ``measure`` and ``weights`` fields of a row."""
    return (
        {"measure": "eta", "weights": measure}
        if is_eta(measure)
        else {"measure": measure, "weights": None}
    )


def driver_options(measure):
    """How :func:`~ksvd_bench.driver.solve_to_tolerance` is asked for one measure."""
    if is_eta(measure):
        return {"metric": "eta", "weights": measure}
    return {"metric": measure, "weights": PAPER_WEIGHTS, "track_residual": False}


# --------------------------------------------------------------------------- the verdict


def verdict(entry):
    """The whole-triplet fields of a driver result (attributes) or history entry (dict).

    ``sv_error`` is NaN where the driver had no reference; ``reliable`` is the solver's own
    ``info["reliable"]`` (True where the solver does not set it).
    """
    if isinstance(entry, dict):
        fields = {k: entry[k] for k in VERDICT_FIELDS}
    else:
        fields = {k: getattr(entry, k) for k in VERDICT_FIELDS}
    fields["warnings"] = list(fields["warnings"])
    fields["n_warnings"] = int(fields["n_warnings"])
    fields["reliable"] = bool(fields["reliable"])
    fields["verified"] = _verified_of(entry)
    for key in ("sv_error", "triplet_residual"):
        fields[key] = math.nan if fields[key] is None else float(fields[key])
    return fields


def _verified_of(entry):
    """The solver's own word on an answer (:func:`ksvd_bench.scoring.verification`):
    ``"certified"``, ``"flagged"`` or ``"unverified"``; None where the record predates it."""
    if isinstance(entry, dict):
        return entry.get("verified")
    value = getattr(entry, "verified", None)
    result = getattr(entry, "result", None)
    if value is None and result is not None:
        value = verification(result.info)
    return value


def meets(entry, eps, key="value"):
    """Whether an answer meets ``eps``: its ``key`` measure, singular values, triplets, trust.

    A check that was not computed (NaN) does not block: without a reference there is no
    singular-value error.
    """
    v = verdict(entry)
    if not entry[key] <= eps:
        return False
    for check in ("sv_error", "triplet_residual"):
        if v[check] > eps:  # NaN > eps is False: not computed
            return False
    return v["reliable"]


def status_of(right, reliable, fired=False):
    """The verdict in words (one of :data:`STATUSES`, the driver's, from
    :mod:`ksvd_bench.scoring`): ``right`` (every part of the rule met) is ``"converged"``; a
    stopping rule that ``fired`` on an answer that is not right stopped early, wrong (the
    finding a reference-free stop's row exists to show); otherwise ``"unreliable"`` where the
    solver distrusted the answer, else ``"not converged"``."""
    if right:
        return "converged"
    if fired:
        return "stopped early, wrong"
    return "not converged" if reliable else "unreliable"


def point_status(entry, eps, key="value"):
    """The verdict of one answer (a history entry) at ``eps``: converged, unreliable or not
    converged (no stopping rule is involved)."""
    return status_of(meets(entry, eps, key), verdict(entry)["reliable"])


def rule_failures(row, prefix=""):
    """The parts of the whole-triplet rule that a row saying converged fails (empty: none).

    A row says converged through ``row[prefix + "converged"]`` (``prefix`` names the method
    in a row that holds several, as ``spectrum``'s ``"rsvd_"``). The rule: the measure
    (``value``) within ``eps``, ``sv_error <= eps``, the triplet residual within its bound
    (``triplet_residual <= eps``), the answer not unreliable (``reliable`` True), and the
    ``status``, where the row has one, ``"converged"``. Fails safe: a check missing or NaN
    on a converged row is a failure, not a pass. A row that does not say converged fails
    nothing.
    """
    if row.get(prefix + "converged") is not True:
        return []
    eps = row.get("eps")
    failed = []
    for part in ("value", "sv_error", "triplet_residual"):
        value = row.get(prefix + part)
        if _missing(value) or _missing(eps) or not value <= eps:
            failed.append(f"{prefix}{part}={value!r} (eps={eps!r})")
    if row.get(prefix + "reliable") is not True:
        failed.append(f"{prefix}reliable={row.get(prefix + 'reliable')!r}")
    status = row.get(prefix + "status", "converged")
    if status != "converged":
        failed.append(f"{prefix}status={status!r}")
    return failed


def audit_rows(rows):
    """Every row of a result (``compare``, ``spectrum``, ``scale``, ``sampling`` JSON, or
    their runs) that says converged beside a failed part of the rule: a list of sentences,
    empty when every such row meets it. Each key ``converged`` or ``<method>_converged`` that
    is True is checked (:func:`rule_failures`)."""
    out = []
    for i, row in enumerate(rows):
        for key in row:
            if key == "converged" or key.endswith("_converged"):
                failed = rule_failures(row, key[: -len("converged")])
                if failed:
                    name = row.get("method") or row.get("factor") or i
                    out.append(
                        f"row {i} ({name}, eps={row.get('eps')}): {key} is true but "
                        f"{', '.join(failed)}"
                    )
    return out


@contextlib.contextmanager
def counting_warnings():
    """Record every warning raised inside (yields the list), then issue each distinct one once
    more, so the caller's filters decide what is shown: recorded, never dropped (as the
    driver does with its own solves)."""
    with recording_warnings() as caught:
        yield caught
    reemit(caught)


def merge_verdicts(entries):
    """One row's verdict from its runs: median errors, total warnings, all messages, trust."""
    entries = list(entries)
    messages = list(dict.fromkeys(m for e in entries for m in (e.get("warnings") or [])))
    return {
        "sv_error": median([e.get("sv_error") for e in entries]),
        "triplet_residual": median([e.get("triplet_residual") for e in entries]),
        "n_warnings": int(sum(e.get("n_warnings") or 0 for e in entries)),
        "warnings": messages,
        "reliable": all(e.get("reliable", True) for e in entries),
        # the weakest word of the solver on any of them: flagged, then unverified
        "verified": next(
            (
                v
                for v in ("flagged", "unverified", "certified")
                if any(e.get("verified") == v for e in entries)
            ),
            None,
        ),
    }


# --------------------------------------------------------------------------- the raced entries


def solver_of(name):
    """(solver method, options) of a raced entry."""
    return VARIANTS.get(name, (name, {}))


def entry_options(name):
    """What a raced entry runs, as recorded in the meta and named under the tables:
    ``{"solver": ..., **options}`` with asym Nystrom's ``core`` and ``check_passes`` spelled
    out (the solver's defaults where the entry does not set them)."""

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
        return (
            f"n/a: sampling='rpcholesky' needs a problem built from two point sets (a "
            f"joint PSD kernel, e.g. --dataset rare-clusters); {problem.name} has none"
        )
    return None


def effort_option(name):
    """The solver option that a raced entry's effort sets (None for tsvd)."""
    return EFFORT_OPTION.get(solver_of(name)[0])


# --------------------------------------------------------------------------- bound and warm-up


def measure_bound(measure, ref_s, norm_fro, rank):
    """The largest value ANY answer can score: a tolerance at or above it is vacuous.

    eta: every vector orthogonal to its reference gives ``2 mean(w)``. lowrank: any
    projection leaves at most ``||G||_F``, so the excess is at most
    ``||G||_F / ||G - G_r||_F - 1``.
    """
    s = ref_s[:rank]
    if measure == "singular_values":
        return float(2 * np.mean(s))
    if measure == "relative":
        return float(2 * np.mean(s / s[0])) if s[0] > 0 else 0.0
    if measure == "uniform":
        return 2.0
    unit = unit_of(norm_fro)  # squares in units of ||G||_F where it is extreme (1e+-300)
    norm_fro, s = norm_fro * unit, s * unit
    optimum = math.sqrt(max(norm_fro**2 - float(np.sum(s**2)), 0.0))
    return norm_fro / optimum - 1.0 if optimum > 0 else math.inf


def exact_operator(problem):
    """The cheapest exact form of a problem's G: the structured operator where it applies.

    The reference SVD through it is exact to rounding (ARPACK with ``tol=0`` on the exact
    operator: singular values within 1e-14 of a dense LAPACK SVD on Cora) and takes seconds
    where a dense LAPACK SVD of Cora's 2708 x 2708 G takes 10 to 100 s on 2 loaded cores.
    """
    return problem.structured_source() if problem.supports_structured else problem.G


def warm_up(problem, rank, methods):
    """Compile every solver's Numba code (and fault in BLAS) before anything is timed.

    ``problem`` is a :class:`Problem` or a bare dense matrix.

    Returns the number of warnings the warm-up solves raised (on a corner of G, so not about
    any answer raced; recorded in the meta, not shown per cell). The point-only entries
    (``sampling="rpcholesky"``) warm up on a lazy source of the first points, and are skipped
    where they do not apply.
    """
    if not isinstance(problem, Problem):  # a bare matrix (e.g. ``spectrum``'s G)
        problem = Problem(name="matrix", G=problem, kernel_seconds=None)
    G = problem.G
    k = min(rank, min(G.shape) // 4) or 1
    size = 4 * k + 8
    small = problem.corner(size)  # a lazy G gives its corner as a dense block
    with counting_warnings() as caught:
        for name in methods:
            if not_applicable(name, problem) is not None:
                continue
            method, extra = solver_of(name)
            matrix = small
            if name in POINT_ONLY:
                X, Z = problem.points
                matrix = Problem(
                    name=problem.name,
                    G=small,
                    kernel_seconds=None,
                    kernel=problem.kernel,
                    gamma=problem.gamma,
                    params=problem.params,
                    points=(X[:size], Z[:size]),
                ).lazy_source()
            opts = (
                {"n_samples": min(small.shape) // 2} if "n_samples" == effort_option(name) else {}
            )
            svd(matrix, k, method=method, random_state=0, **opts, **extra)
    return len(caught)
