"""The verdict of a result row in one word, and the list of failures a run shows.

**Input shape.** A *row* is one row of ``compare.json`` (``rows``): a dict with at least
``dataset``, ``method``, ``measure``, ``eps``, ``converged``, ``seconds``; optionally
``weights``, ``stop``, ``sv_error``, ``reliable``, ``note``, ``n_warnings``, ``warnings`` (list
of str), ``status``, ``shape``. Missing optional fields are tolerated.

``status`` is one of :data:`STATUSES`. Rows written before the field existed get it from
:func:`row_status`, which applies the race's whole-triplet rule to what the row holds.
"""

from __future__ import annotations

import math

from ksvd_bench.scoring import STATUSES

__all__ = [
    "STATUSES",
    "row_status",
    "is_right",
    "applies",
    "NOT_APPLICABLE",
    "failures",
    "measure_label",
    "problem_of",
    "base_solver",
]


def _num(value):
    """``value`` as a float, or None where it is missing or not finite."""
    if value is None or isinstance(value, bool):
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def row_status(row):
    """The verdict of ``row``: one of :data:`STATUSES`.

    ``row["status"]`` where present. Otherwise from the older fields: a row that says
    converged but whose singular-value error is above ``eps`` stopped early on a wrong answer;
    one whose answer is flagged unreliable (``reliable`` False) is unreliable; one that did not
    converge is not converged.
    """
    status = row.get("status")
    if status is not None:
        if status not in STATUSES:
            raise ValueError(
                f"row {row.get('method')!r} has unknown status {status!r}; "
                f"expected one of {STATUSES}"
            )
        return status
    sv_error, eps = _num(row.get("sv_error")), _num(row.get("eps"))
    if row.get("converged"):
        if row.get("reliable") is False:
            return "unreliable"
        if sv_error is not None and eps is not None and sv_error > eps:
            return "stopped early, wrong"
        return "converged"
    if row.get("reliable") is False:
        return "unreliable"
    return "not converged"


#: what the page says of a row whose solver does not apply to its problem (no status: it
#: ran nothing, so it neither converged nor failed to)
NOT_APPLICABLE = "does not apply"


def applies(row):
    """Whether the solver applies to the row's problem at all (``stop`` is not ``"n/a"``:
    e.g. rpcholesky sampling on a problem without point sets). A row that does not apply is
    no failure; it is listed apart, with its note."""
    return row.get("stop") != "n/a"


def is_right(row):
    """Whether ``row`` holds a right answer with a time: converged under the whole rule."""
    return row_status(row) == "converged" and _num(row.get("seconds")) is not None


def measure_label(row):
    """The measure a row is judged by, in words: ``eta[singular_values]``, ``lowrank``."""
    measure = str(row.get("measure", "?"))
    weights = row.get("weights")
    return f"{measure}[{weights}]" if weights else measure


def base_solver(method):
    """The solver a row runs, without its stopping-rule tag: ``rsvd [stop=residual]`` -> rsvd."""
    return str(method).split(" [", 1)[0]


def problem_of(row):
    """The problem a row belongs to (``problem``, else ``dataset``)."""
    return str(row.get("problem") or row.get("dataset") or "problem")


def failures(rows):
    """The rows whose answer is not right, and the rows that raised warnings.

    Returns
    -------
    list of dict
        One per failing or warning row, in row order, with ``problem``, ``solver``,
        ``measure``, ``eps``, ``status``, ``applies`` (False: the solver does not apply to
        the problem, see :func:`applies`), ``sv_error``, ``reason`` (the row's ``note``),
        ``warnings`` (the distinct messages, list of str) and ``n_warnings``.
    """
    out = []
    for row in rows:
        status = row_status(row)
        messages = list(dict.fromkeys(str(w) for w in (row.get("warnings") or [])))
        n_warnings = int(row.get("n_warnings") or len(messages))
        if status == "converged" and not n_warnings:
            continue
        out.append(
            {
                "problem": problem_of(row),
                "solver": str(row.get("method", "?")),
                "measure": measure_label(row),
                "eps": row.get("eps"),
                "status": status,
                "applies": applies(row),
                "sv_error": _num(row.get("sv_error")),
                "reason": row.get("note"),
                "n_warnings": n_warnings,
                "warnings": messages,
            }
        )
    return out
