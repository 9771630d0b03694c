"""The terminal text of the scale study: the cells, references, best cells and exponents.

The default layout fits 100 characters (:data:`ksvd_bench.report.TEXT_WIDTH`), like
``compare``'s; ``wide=True`` adds the set-up/solve split, CPU seconds, set-up passes and
entries read.
"""

from __future__ import annotations

from ksvd_bench.race.common import num
from ksvd_bench.race.scale.fit import (
    MIN_FIT_POINTS,
    MIN_FIT_SECONDS,
    MIN_FIT_SPAN,
    accurate,
    best_cells,
)
from ksvd_bench.race.scale.problems import ACCURACY_TARGET, PART_TITLES
from ksvd_bench.report import format_table, wrap_note

__all__ = ["format_scale"]

#: the cells, at most 100 characters with every cell at its widest
#: (7 + 19 + 8 + 8 + 6 + 7 + 8 + 8 + 4 plus eight 2-space gaps)
_NARROW = [
    ("n", "N"),
    ("method", "method"),
    ("effort", "effort"),
    ("seconds", "seconds"),
    ("passes", "passes"),
    ("peak_rss_mb", "peak MB"),
    ("subspace_error", "sin err"),
    ("sv_error", "sv err"),
    ("warn", "warn"),
]
_WIDE = [
    ("n", "N"),
    ("method", "method"),
    ("effort", "effort"),
    ("status", "status"),
    ("seconds", "seconds"),
    ("setup_seconds", "setup s"),
    ("solve_seconds", "solve s"),
    ("cpu_seconds", "cpu s"),
    ("passes", "passes"),
    ("setup_passes", "+setup"),
    ("entries", "entries"),
    ("ns_per_entry", "ns/entry"),
    ("blas_ratio", "/ BLAS"),
    ("peak_rss_mb", "peak MB"),
    ("subspace_error", "sin err"),
    ("sv_error", "sv err"),
    ("warn", "warn"),
]
_NUMBERS = (
    "seconds",
    "setup_seconds",
    "solve_seconds",
    "cpu_seconds",
    "passes",
    "peak_rss_mb",
    "subspace_error",
    "sv_error",
    "entries",
    "ns_per_entry",
    "blas_ratio",
)


def _cell_text(r):
    """A cell's row as the strings the table shows; a cell that did not finish shows its
    status in the seconds column."""
    shown = {k: r.get(k) for k in ("n", "method", "effort", "status", "setup_passes")}
    for key in _NUMBERS:
        value = r.get(key)
        shown[key] = num(None if value is None else float(value), 2 if "error" in key else 3)
    if r.get("status") != "ok":
        shown["seconds"] = r.get("status")
    n = r.get("n_warnings")
    mark = "!" if r.get("reliable") is False else "?" if r.get("verified") == "unverified" else ""
    shown["warn"] = ("-" if n is None else str(n)) + mark
    return shown


def _fit_notes(exponents):
    """One line per reason a fit was not made, naming the (part, method) pairs."""
    reasons = {}
    for f in exponents:
        if f.get("exponent") is None and f.get("n_points"):
            note = f.get("fit_note") or "not fitted"
            reasons.setdefault(note, []).append(f"{f['part']}/{f['method']}")
    return [f"{note}: {', '.join(names)}" for note, names in reasons.items()]


def format_scale(result, *, wide=False):
    """Terminal text: per part the cells and the references, then the best cells and the
    fitted exponents (with the reason where a fit was not made)."""
    meta = result.meta
    blocks = []
    for part in sorted({r["part"] for r in result.rows}):
        rows = [_cell_text(r) for r in result.rows if r["part"] == part]
        device = "" if part == "a" else f", device={meta.get('device', 'cpu')}"
        title = (
            f"{PART_TITLES[part]}: top-{meta['rank']}, threads={meta['threads']}{device};"
            f" seconds = set-up + solve (or why the cell did not finish); sin err, sv err "
            f"vs the reference below; warn: warnings of the solve ('!': the solver marked "
            f"its answer unreliable; '?': unverified, no check ran)"
        )
        blocks.append(format_table(rows, _WIDE if wide else _NARROW, title=wrap_note(title)))
        refs = [r for r in result.references if r["part"] == part]
        blocks.append(
            format_table(
                refs,
                [("n", "N"), ("label", "reference"), ("seconds", "seconds")],
                title="references (not charged)",
            )
        )
    best = [
        dict(
            b,
            seconds=num(b["seconds"]),
            passes=num(b["passes"]),
            peak_rss_mb=num(b["peak_rss_mb"]),
            subspace_error=num(b["subspace_error"], 2),
            sv_error=num(b["sv_error"], 2),
        )
        for b in best_cells(result.rows)
    ]
    n_bad = sum(
        r.get("status") == "ok" and r.get("subspace_error") is not None and not accurate(r)
        for r in result.rows
    )
    blocks.append(
        format_table(
            best,
            [
                ("part", "part"),
                ("n", "N"),
                ("method", "method"),
                ("effort", "effort"),
                ("seconds", "seconds"),
                ("passes", "passes"),
                ("peak_rss_mb", "peak MB"),
                ("subspace_error", "sin err"),
                ("sv_error", "sv err"),
            ],
            title=wrap_note(
                f"fastest cell with subspace and singular-value errors <= "
                f"{ACCURACY_TARGET:g} and a reliable answer ('-': none; {n_bad} "
                f"finished cell(s) missed it)"
            ),
        )
    )
    fits = [
        dict(
            f,
            exponent="-" if f["exponent"] is None else f"{f['exponent']:.2f}",
            solve_exponent=("-" if f["solve_exponent"] is None else f"{f['solve_exponent']:.2f}"),
            largest_n_seconds=num(f["largest_n_seconds"]),
        )
        for f in result.exponents
    ]
    rule = (
        f"fitted on cells >= {MIN_FIT_SECONDS:g} s, at least {MIN_FIT_POINTS} sizes "
        f"spanning x{MIN_FIT_SPAN:g} in N"
    )
    table = format_table(
        fits,
        [
            ("part", "part"),
            ("method", "method"),
            ("sizes", "N range"),
            ("n_points", "cells"),
            ("exponent", "exponent"),
            ("solve_exponent", "solve exp."),
            ("largest_n_seconds", "s at max N"),
        ],
        title=wrap_note(
            f"growth exponents: seconds ~ N^exponent (least squares on log-log; {rule})"
        ),
    )
    blocks.append("\n".join([table] + [wrap_note(n) for n in _fit_notes(result.exponents)]))
    return "\n\n".join(blocks)
