"""The terminal tables of ``compare`` (one per dataset and eps), made from its rows.

The default layout fits 100 characters (:data:`ksvd_bench.report.TEXT_WIDTH`); ``wide=True``
shows every column. :func:`ksvd_bench.report.format_table` lays the cells out.
"""

from __future__ import annotations

from ksvd_bench.race.common import (
    EFFORT_LABELS,
    RESIDUAL_SUFFIX,
    STRUCTURED_NAME,
    num,
    ratio_text,
)
from ksvd_bench.race.paper_runtime import LOWRANK, PAPER_METHOD_NAMES
from ksvd_bench.report import format_table, wrap_note
from ksvd_bench.report.winners import seeds_mark

__all__ = ["format_compare", "display_row"]

#: columns of the default table: at most 100 characters with every cell at its widest
#: (19 + 4 + 6 + 6 + 8 + 8 + 8 + 5 + 5 + 7 + 4 plus ten 2-space gaps; a speedup below 0.1
#: shows as "<0.1x" there, its value in the wide table and the files)
_NARROW = [
    ("name", "method"),
    ("conv", "conv"),
    ("effort_label", "effort"),
    ("n_passes", "passes"),
    ("seconds", "time s"),
    ("e2e_seconds", "e2e s"),
    ("value", "value"),
    ("speedup_short", "xRSVD"),
    ("paper", "paper"),
    ("sv_error", "sv err"),
    ("warn", "warn"),
]
_WIDE = [
    ("name", "method"),
    ("conv", "conv"),
    ("effort_label", "effort"),
    ("effort_range", "range"),
    ("n_passes", "passes"),
    ("seconds", "time s"),
    ("cert_share", "cert"),
    ("kernel_seconds", "kernel s"),
    ("e2e_seconds", "e2e s"),
    ("value", "value"),
    ("value_worst", "worst"),
    ("best_value", "best"),
    ("resid_est", "resid est"),
    ("sv_error", "sv err"),
    ("triplet_residual", "triplet"),
    ("warn", "warn"),
    ("speedup", "xRSVD"),
    ("paper_seconds", "paper s"),
    ("paper", "paper"),
]


def _passes_text(value):
    """Passes: whole numbers for the product-based methods, 3 digits for Nystrom's fractions."""
    if value is None or value != value:
        return "-"
    return f"{value:.0f}" if value >= 10 or value == int(value) else f"{value:.3g}"


def _warn_text(r):
    """Warnings of the returned answers, ``!`` when the solver marked one unreliable, ``?``
    when one ran unchecked (unverified)."""
    n = r.get("n_warnings")
    text = "-" if n is None else str(n)
    if r.get("reliable") is False:
        return text + "!"
    return text + ("?" if r.get("verified") == "unverified" else "")


#: names too long for the 19-character method column, as the tables show them
SHORT_NAMES = {"asym_nystrom_rpcholesky": "asym_nys_rpcholesky"}


def _na_row(r, name):
    """An entry that does not apply to the problem: "n/a" and dashes."""
    cells = {key: "-" for key, _ in _WIDE}
    return {**cells, "name": name, "conv": "n/a", "paper": "n/a"}


def display_row(r, paper_key_known):
    """A summary row as the strings the table shows."""
    residual = r["method"].endswith(RESIDUAL_SUFFIX)
    if residual:
        # a stop that fired on a wrong answer says so where the eye lands first
        wrong = r.get("status") == "stopped early, wrong"
        name = "  + residual: WRONG" if wrong else "  + residual stop"
    else:
        name = SHORT_NAMES.get(r["method"], r["method"])
    if r["stop"] == "n/a":
        return _na_row(r, name)
    label = EFFORT_LABELS.get(r["effort_param"], r["effort_param"])
    effort = "-" if r["effort"] is None else f"{label}={r['effort']}"
    # For a miss the value column shows the best value reached (the time is '-').
    value = r["value"] if r["converged"] or r["stop"] != "reference" else r["best_value"]
    paper = r.get("paper_speedup")
    paper_method = r["method"] in PAPER_METHOD_NAMES
    return {
        "name": name,
        # '*': fewer seeds than asked (the cell's budget ran out first)
        "conv": f"{r['n_converged']}/{r['n_seeds']}" + ("*" if seeds_mark(r) else ""),
        "effort_label": effort,
        "effort_range": (
            "-" if r.get("effort_min") is None else f"{r['effort_min']}-{r['effort_max']}"
        ),
        "n_passes": _passes_text(r["n_passes"]),
        "seconds": num(r["seconds"]),
        "kernel_seconds": num(r["kernel_seconds"]),
        "e2e_seconds": num(r["e2e_seconds"]),
        "value": num(value),
        "value_worst": num(r["value_worst"]),
        "best_value": num(r["best_value"]),
        "resid_est": num(r["resid_est"]),
        "sv_error": num(r.get("sv_error"), 2),
        "triplet_residual": num(r.get("triplet_residual"), 2),
        "warn": _warn_text(r),
        "speedup": "-" if r.get("speedup_vs_rsvd") is None else ratio_text(r["speedup_vs_rsvd"]),
        "speedup_short": (
            "-"
            if r.get("speedup_vs_rsvd") is None
            else "<0.1x"
            if r["speedup_vs_rsvd"] < 0.1
            else ratio_text(r["speedup_vs_rsvd"])
        ),
        "paper_seconds": num(r.get("paper_seconds")),
        "paper": (
            ratio_text(paper)
            if paper is not None
            else "n/a"
            if paper_key_known and not paper_method and not residual
            else "-"
        ),
    }


def _group_label(measure, meta):
    if measure == LOWRANK:
        return "lowrank (gap-robust): ||G - U U^T G||_F <= (1 + eps) ||G - G_r||_F"
    paper = " (the paper's)" if measure == meta["paper_weights"] else ""
    return f"eta, {measure} weights{paper}"


def _ordered(rows, meta):
    """Rows of one table: per measure, methods in race order, each residual row under its own."""
    order = {m: i for i, m in enumerate(meta["methods"] + [STRUCTURED_NAME])}

    def key(r):
        base = r["method"].replace(RESIDUAL_SUFFIX, "")
        return (order.get(base, 99), r["method"].endswith(RESIDUAL_SUFFIX))

    return sorted(rows, key=key)


def _title(dataset, e, sel, meta):
    shape = "x".join(str(n) for n in sel[0]["shape"])
    kernel_s = next(
        (
            r["kernel_seconds"]
            for r in sel
            if r["kernel_seconds"] is not None and r["method"] != STRUCTURED_NAME
        ),
        None,
    )
    built = "" if kernel_s is None else f", kernel built in {num(kernel_s)} s"
    return (
        f"{dataset} {shape}, {sel[0]['kernel'] or 'given'} kernel, r={meta['rank']}, "
        f"eps={e:g}{built} (threads={meta['threads']}, float64)"
    )


def format_compare(result, *, wide=False):
    """Terminal tables of a :class:`~ksvd_bench.race.compare.CompareResult`, one per
    (dataset, eps).

    Within a table the rows are grouped per accuracy measure (eta under each weighting, the
    low-rank error); "conv" counts seeds whose answer met eps (measure, singular values,
    triplets, and not marked unreliable); a missing time ("-") means not converged, and then
    the value column shows the best value reached. The default layout fits 100 characters;
    ``wide=True`` adds the effort range, kernel time, worst and best values, the residual
    estimate, the triplet residual and the paper's seconds.
    """
    meta = result.meta
    columns = _WIDE if wide else _NARROW
    blocks = []
    for dataset in meta["datasets"]:
        ref = meta.get("reference", {}).get(dataset, {})
        for e in meta["eps"]:
            sel = [r for r in result.rows if r["dataset"] == dataset and r["eps"] == e]
            if not sel:
                continue
            paper_known = any(r.get("paper_seconds") is not None for r in sel)
            groups = []
            for m in meta["measures"]:
                group = [r for r in sel if (r["weights"] or r["measure"]) == m]
                if group:
                    label = "-- " + _group_label(m, meta)
                    bound = ref.get("value_max", {}).get(m)
                    if bound is not None and bound <= e:
                        label += f" -- VACUOUS: any answer scores <= {bound:.3g}"
                    groups.append(
                        (
                            wrap_note(label),
                            [display_row(r, paper_known) for r in _ordered(group, meta)],
                        )
                    )
            table = format_table(
                [], columns, title=wrap_note(_title(dataset, e, sel, meta)), groups=groups
            )
            notes = [
                _vacuity_note(m, bound, e)
                for m, bound in ref.get("value_max", {}).items()
                if bound <= e
            ]
            blocks.append("\n".join([table] + [wrap_note(n) for n in notes]))
    return "\n\n".join(blocks + [wrap_note(FOOTER + _entries_note(result))])


def _entries_note(result):
    """What the asym Nystrom entries of this run ran (core, check passes, sampling), and the
    entries that did not apply, so no label hides which method a row is."""
    options = result.meta.get("method_options") or {}
    parts = []
    for name, opts in options.items():
        if opts.get("solver") != "asym_nystrom":
            continue
        what = [f"sampling={opts['sampling']}"]
        if "core" in opts:
            what.append(f"core={opts['core']}")
        what.append(f"check_passes={opts['check_passes']}")
        paper = " (the paper's method)" if name in PAPER_METHOD_NAMES else ""
        parts.append(f"{SHORT_NAMES.get(name, name)}: {', '.join(what)}{paper}")
    text = ("\nasym Nystrom entries: " + "; ".join(parts) + ".") if parts else ""
    na = sorted({(r["method"], r["dataset"]) for r in result.rows if r["stop"] == "n/a"})
    if na:
        text += (
            "\nn/a: "
            + "; ".join(f"{SHORT_NAMES.get(m, m)} on {d}" for m, d in na)
            + " (sampling='rpcholesky' needs two point sets: a joint PSD kernel)."
        )
    return text


def _vacuity_note(measure, bound, eps):
    what = (
        "the low-rank excess"
        if measure == LOWRANK
        else f"eta with {measure} weights (<= 2 mean(w))"
    )
    return (
        f"NOTE: {what} is at most {bound:.3g} <= eps = {eps:g} for ANY answer (even random "
        f"vectors): this tolerance is vacuous, its times and speedups mean nothing."
    )


FOOTER = (
    "conv: seeds whose answer met eps: the measure, the singular values "
    "(max |s~_i - s_i| <= eps s_1), the triplets (||G V~ - U~ S~||_F and ||G^T U~ - V~ S~||_F "
    "<= eps ||G_r||_F), and not marked unreliable by the solver, of the seeds run ('*': fewer "
    "than asked, the cell's --budget ran out first). time s: solve at the found "
    "effort, median over seeds (JIT and reference excluded); '-' = not converged, value then "
    "shows the best reached. value: eta, or the low-rank excess in the lowrank group. sv err: "
    "max |s~_i - s_i| / s_1 reached (median over seeds). warn: warnings the solver raised for "
    "the answers counted (all seeds; '!' = an answer marked unreliable, '?' = unverified). "
    "effort: m = Nystrom samples, p = oversampling, q = Krylov/power iterations, ncv = ARPACK "
    "basis. passes: passes over G (a whole-G product counts 1; Nystrom: entries read / NM).\n"
    "e2e s: kernel + solve (dense G); lazy kernel source + solve (Nystrom-type methods: only "
    "what they read is charged); structured operator build + solve (exact row). xRSVD: speedup "
    "over RSVD; paper: the paper's speedup over its RSVD, beside the entries that run the "
    "paper's methods (n/a: method not in the paper; asym_nystrom_paper is the paper's asym "
    "Nystrom, asym_nystrom the solvers' stable default).\n"
    "+ residual stop: the method above stopped by the reference-free residual estimate of eta "
    "(seed 1 only); value is the true eta reached; '+ residual: WRONG' = the stop fired on an "
    "answer that misses eps (stopped early, wrong: see sv err). --wide shows more columns."
)
