"""Names, small checks and the whole-triplet verdict shared by the race's studies.

The verdict: an answer meets ``eps`` only when its measure is within ``eps`` AND its
singular values are (``max_i |s~_i - s_i| <= eps s_1``), its triplets hang together
(``max(||G V~ - U~ S~||_F, ||G^T U~ - V~ S~||_F) <= eps ||G_r||_F``) and the solver did not
mark it unreliable. The driver records these per answer (:class:`ksvd_bench.driver.
ToleranceResult` and its history entries); :func:`meets` applies the same rule at any ``eps``,
so that one driver sweep to the tightest ``eps`` answers the looser ones too. A warning is
data: :func:`counting_warnings` records (and re-issues) the warnings of the solves the
studies make themselves, and ``warning_fields`` (the driver's, from
:mod:`ksvd_bench._scoring`) turns them into a count and deduplicated messages.
"""

from __future__ import annotations

import contextlib
import math
import statistics

import numpy as np

from ksvd_bench._scoring import recording_warnings, reemit, warning_fields
from ksvd_bench.race.paper_runtime import LOWRANK, PAPER_WEIGHTS

__all__ = [
    "STRUCTURED_NAME", "RESIDUAL_SUFFIX", "EFFORT_LABELS", "VERDICT_FIELDS",
    "check_positive_int", "seeds_from", "median", "num", "ratio_text", "is_eta",
    "measure_fields", "driver_options", "meets", "verdict", "counting_warnings",
    "warning_fields", "merge_verdicts",
]

#: the exact entry of ``compare`` (structured operator + ARPACK)
STRUCTURED_NAME = "tsvd (structured)"
#: suffix of the rows stopped by the reference-free residual estimate
RESIDUAL_SUFFIX = " [stop=residual]"
#: how the effort of each solver option is labelled in the tables
EFFORT_LABELS = {"n_samples": "m", "n_oversamples": "p", "n_iter": "q", "ncv": "ncv",
                 "check_passes": "chk"}
#: the whole-triplet fields of every run and row (values, warning count and messages)
VERDICT_FIELDS = ("sv_error", "triplet_residual", "n_warnings", "warnings", "reliable")


def check_positive_int(value, name):
    """``value`` as an int >= 1, or a ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return int(value)


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
    return ({"measure": "eta", "weights": measure} if is_eta(measure)
            else {"measure": measure, "weights": None})


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
    for key in ("sv_error", "triplet_residual"):
        fields[key] = math.nan if fields[key] is None else float(fields[key])
    return fields


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
    }
