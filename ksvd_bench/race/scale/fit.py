"""What the scale study concludes from its cells: growth exponents and the fastest accurate cell.

A growth exponent is fitted only where it can mean something: at least
:data:`MIN_FIT_POINTS` sizes whose times are at least :data:`MIN_FIT_SECONDS` (below that,
process noise and a shared machine's load dominate: the ``--quick`` cells, 0.05-0.5 s, gave
N^-0.91) and spanning a factor of at least :data:`MIN_FIT_SPAN` in N. Otherwise the exponent
is None and ``fit_note`` says why.

A cell counts as accurate (:func:`accurate`) when its subspace error and its singular-value
error are both within the target and the solver did not mark its answer unreliable: the same
whole-triplet rule as the race's convergence.
"""

from __future__ import annotations

import numpy as np

from ksvd_bench.race.scale.problems import ACCURACY_TARGET

__all__ = [
    "fit_exponent",
    "fit_all",
    "best_cells",
    "accurate",
    "MIN_FIT_SECONDS",
    "MIN_FIT_POINTS",
    "MIN_FIT_SPAN",
]

#: shortest time a fitted cell may take (seconds)
MIN_FIT_SECONDS = 0.5
#: fewest sizes a fit uses (two points always fit a line: a third tests it)
MIN_FIT_POINTS = 3
#: smallest ratio largest N / smallest N a fit spans
MIN_FIT_SPAN = 4.0


def fit_exponent(sizes, seconds):
    """Least-squares slope of ``log(seconds)`` against ``log(sizes)``; None below 2 sizes.

    Parameters
    ----------
    sizes, seconds : sequence of positive float

    Returns
    -------
    float or None
    """
    x = np.log(np.asarray(sizes, dtype=float))
    y = np.log(np.asarray(seconds, dtype=float))
    keep = np.isfinite(x) & np.isfinite(y)
    if np.unique(x[keep]).size < 2:
        return None
    slope, _ = np.polyfit(x[keep], y[keep], 1)
    return float(slope)


def _meaningful_fit(sizes, seconds):
    """``(exponent or None, note)``: the fit over the cells long enough to time, if enough."""
    pairs = [
        (n, t)
        for n, t in zip(sizes, seconds, strict=True)
        if t is not None and t >= MIN_FIT_SECONDS
    ]
    long = sorted({n for n, _ in pairs})
    if len(long) < MIN_FIT_POINTS:
        return None, (
            f"not fitted: {len(long)} size(s) >= {MIN_FIT_SECONDS:g} s, need {MIN_FIT_POINTS}"
        )
    if long[-1] / long[0] < MIN_FIT_SPAN:
        return None, (
            f"not fitted: N spans x{long[-1] / long[0]:.2g} among cells >= "
            f"{MIN_FIT_SECONDS:g} s, need x{MIN_FIT_SPAN:g}"
        )
    exponent = fit_exponent([n for n, _ in pairs], [t for _, t in pairs])
    return exponent, f"fitted on N = {long[0]}-{long[-1]} ({len(long)} sizes)"


def fit_all(rows):
    """One fit per (part, method) over its finished cells (see the module's rule)."""
    fits = []
    keys = sorted({(r["part"], r["method"]) for r in rows}, key=lambda k: (k[0], k[1]))
    for part, method in keys:
        ok = [
            r
            for r in rows
            if r["part"] == part
            and r["method"] == method
            and r["status"] == "ok"
            and r.get("seconds")
        ]
        ok.sort(key=lambda r: r["n"])
        sizes = [r["n"] for r in ok]
        exponent, note = _meaningful_fit(sizes, [r["seconds"] for r in ok])
        solve_exponent, _ = _meaningful_fit(sizes, [r.get("solve_seconds") for r in ok])
        fits.append(
            {
                "part": part,
                "method": method,
                "n_points": len(ok),
                "sizes": f"{sizes[0]}-{sizes[-1]}" if sizes else "-",
                "exponent": exponent,
                "solve_exponent": solve_exponent,
                "fit_note": note,
                "largest_n_seconds": ok[-1]["seconds"] if ok else None,
            }
        )
    return fits


def accurate(row, target=ACCURACY_TARGET):
    """Whether a finished cell met ``target`` on the whole triplet and was not unreliable."""
    if row.get("status") != "ok" or row.get("subspace_error") is None:
        return False
    sv = row.get("sv_error")
    return (
        row["subspace_error"] <= target
        and (sv is None or sv <= target)
        and row.get("reliable", True) is not False
    )


def best_cells(rows, target=ACCURACY_TARGET):
    """Per (part, size): the fastest cell that is :func:`accurate` at ``target``.

    Returns
    -------
    list of dict
        ``part``, ``n``, ``method``, ``effort``, ``seconds``, ``passes``, ``peak_rss_mb``,
        ``subspace_error``, ``sv_error`` of the winner; ``method`` None when no cell met the
        target.
    """
    best = []
    for part, n in sorted({(r["part"], r["n"]) for r in rows}):
        ok = [r for r in rows if r["part"] == part and r["n"] == n and accurate(r, target)]
        win = min(ok, key=lambda r: r["seconds"], default=None)
        keys = (
            "method",
            "effort",
            "seconds",
            "passes",
            "peak_rss_mb",
            "subspace_error",
            "sv_error",
        )
        best.append(
            {"part": part, "n": n, **{k: None if win is None else win.get(k) for k in keys}}
        )
    return best
