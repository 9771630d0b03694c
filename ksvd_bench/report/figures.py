"""Figures: PNG files, inline PNG for the page, time-to-accuracy curves and profile plots.

Every figure is drawn with matplotlib's object API on a fresh ``Figure`` (no pyplot state
shared with the caller), and closed after it is written.
"""

from __future__ import annotations

import base64
import io
import struct
import zlib
from pathlib import Path

import numpy as np

from ksvd_bench.report.files import atomic_path
from ksvd_bench.report.profiles import data_profile, performance_profile
from ksvd_bench.report.status import _num as _finite  # float, or None: missing, not finite
from ksvd_bench.report.status import applies, base_solver, is_right
from ksvd_bench.report.winners import verdicts

__all__ = [
    "save_figure",
    "figure_data_uri",
    "solver_colors",
    "time_to_accuracy_figure",
    "curve_marks",
    "CHECK_WORDS",
    "EXACT_PASSES_NOTE",
    "profiles_figure",
]


def save_figure(fig, path, *, dpi=110):
    """Save a matplotlib figure as PNG at ``path``, atomically, and close it; returns the path."""
    # matplotlib: loaded only when a figure is drawn (start-up)
    import matplotlib.pyplot as plt

    path = Path(path)
    try:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, dpi=dpi, format="png")
    finally:
        plt.close(fig)
    return path


def figure_data_uri(fig, *, dpi=100):
    """The figure as an inline ``data:image/png;base64,...`` URI (for a self-contained page);
    closes the figure.

    PNG rather than SVG: matplotlib's SVG names its XML namespaces by ``http://`` URLs, and a
    page that must open offline should not even mention the network. For the same reason the
    base64 text never holds the letters ``http``, in any case (a large figure's text would
    by chance about one time in ten): the first of :func:`_png_variants` whose text does not
    is used.
    """
    # matplotlib: loaded only when a figure is drawn (start-up)
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    try:
        fig.savefig(buf, dpi=dpi, format="png", metadata={"Software": None})
    finally:
        plt.close(fig)
    for png in _png_variants(buf.getvalue()):
        text = base64.b64encode(png).decode("ascii")
        if "http" not in text.lower():
            return "data:image/png;base64," + text
    raise RuntimeError("could not encode the figure without the letters 'http'")


def _png_variants(png):
    """The image of ``png`` as PNG files whose base64 texts differ: ``png`` itself, then its
    pixel data compressed again at zlib levels 9 to 1, each behind padding of 0, 1 and 2
    bytes (:func:`_png_padded`).

    base64 encodes three bytes at a time, so padding only shifts the text after it, three
    ways; compressing again changes the bytes themselves. Only the signature and the header
    chunk (the first 44 characters) are the same in all.
    """
    yield png
    head, data, tail = _split_pixel_data(png)
    raw = zlib.decompress(data)
    for level in range(9, 0, -1):
        body = head + _png_chunk(b"IDAT", zlib.compress(raw, level)) + tail
        for pad in range(3):
            yield _png_padded(body, pad) if pad else body


def _png_chunk(kind, data):
    """One PNG chunk: length, type, data and CRC."""
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _split_pixel_data(png):
    """``(head, data, tail)``: the bytes before the first ``IDAT`` chunk, the pixel data
    (every ``IDAT`` chunk's, joined: one zlib stream) and the chunks after the last."""
    pos, head_end, tail_start, data = 8, None, None, []
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos : pos + 4])
        kind = png[pos + 4 : pos + 8]
        end = pos + 12 + length
        if kind == b"IDAT":
            head_end = pos if head_end is None else head_end
            data.append(png[pos + 8 : pos + 8 + length])
            tail_start = end
        pos = end
    if head_end is None:
        raise ValueError("not a PNG with pixel data (no IDAT chunk)")
    return png[:head_end], b"".join(data), png[tail_start:]


def _png_padded(png, n):
    """``png`` with a ``tEXt`` chunk of ``n`` padding bytes after its header chunk."""
    chunk = _png_chunk(b"tEXt", b"pad\x00" + b"." * n)
    end_of_ihdr = 8 + 8 + 13 + 4  # signature, IHDR length+type, IHDR data, CRC
    return png[:end_of_ihdr] + chunk + png[end_of_ihdr:]


# ---------------------------------------------------------------------------------- the page

#: smallest error drawn on a log axis (an exact answer has error 0 or round-off)
_ERROR_FLOOR = 1e-16
#: errors more than this factor below the smallest eps are drawn at that level: the axis
#: spends its height near the tolerances, not on round-off
_BELOW_EPS = 1e-5


#: room for the legend at the right of a figure, inches
_LEGEND_WIDTH = 2.4


def _new_figure(width, height, n_panels, *, title=False):
    """A figure of ``n_panels`` panels in a row sharing y, with fixed margins (in inches) and
    room for the legend at the right. Fixed margins, not a layout engine: the figures of a
    page are alike, and constrained layout costs more than the drawing itself."""
    # matplotlib: loaded only when a figure is drawn (start-up)
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width + _LEGEND_WIDTH, height))
    w, h = width + _LEGEND_WIDTH, height
    fig.subplots_adjust(
        left=0.85 / w,
        right=1 - (_LEGEND_WIDTH + 0.1) / w,
        bottom=0.6 / h,
        top=1 - (0.6 if title else 0.35) / h,
        wspace=0.08,
    )
    return fig, fig.subplots(1, n_panels, sharey=True, squeeze=False)[0]


#: qualitative colours, distinct in pairs (tab10, then four more); solvers beyond these reuse
#: them in sorted order
_PALETTE = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
    "#000000",
    "#b8860b",
    "#4b0082",
    "#00a087",
)


def solver_colors(names):
    """A fixed colour per solver name (the same solver has the same colour in every figure)."""
    names = sorted(dict.fromkeys(str(n) for n in names))
    return {n: _PALETTE[i % len(_PALETTE)] for i, n in enumerate(names)}


def _legend(fig, axes):
    """One legend for the figure, from every panel's labels (each solver once)."""
    seen = {}
    for ax in axes:
        for h, label in zip(*ax.get_legend_handles_labels(), strict=True):
            seen.setdefault(label, h)
    if seen:
        w, h = fig.get_size_inches()
        top = max(ax.get_position().y1 for ax in axes)
        fig.legend(
            list(seen.values()),
            list(seen),
            loc="upper left",
            fontsize=8,
            frameon=False,
            bbox_to_anchor=(1 - _LEGEND_WIDTH / w, top),
        )
    return bool(seen)


def _log_axis(axis):
    """Major ticks only on a log axis (minor labels such as 3x10^0 overlap on short ranges)."""
    # matplotlib: loaded only when a figure is drawn (start-up)
    from matplotlib.ticker import LogLocator, NullFormatter

    axis.set_major_locator(LogLocator(base=10, numticks=12))
    axis.set_minor_formatter(NullFormatter())


def _history(rows):
    """The sweep points of ``rows``, one per (seed, effort): the first row's (the value does
    not depend on the row's eps; the status does, see :func:`_hollow_checks`)."""
    seen = {}
    for row in rows:
        for p in row.get("history") or []:
            seen.setdefault((p.get("seed"), p.get("effort")), p)
    return seen


def _sweep_points(rows, x_key, floor=_ERROR_FLOOR):
    """``(points, efforts)``: per effort, (x, median value, min value, max value) over seeds,
    sorted by effort, and the efforts in that order."""
    by_effort = {}
    for p in _history(rows).values():
        x, v = _finite(p.get(x_key)), _finite(p.get("value"))
        if x is None or v is None:
            continue
        by_effort.setdefault(p.get("effort"), []).append((x, max(v, floor)))
    out, efforts = [], sorted(by_effort, key=lambda e: (e is None, e))
    for effort in efforts:
        xs, vs = np.array(by_effort[effort]).T
        out.append((float(np.median(xs)), float(np.median(vs)), float(vs.min()), float(vs.max())))
    return (np.array(out) if out else np.empty((0, 4))), efforts


#: the parts of the whole-triplet rule besides the measure, in the words the caption uses
CHECK_WORDS = {
    "sv_error": "singular values off by > eps",
    "triplet_residual": "triplets off by > eps",
    "reliable": "not certified reliable",
    "seeds": "not every seed within eps",
}


def _failed_checks(point, eps):
    """The checks an answer (a sweep point judged at ``eps``) fails besides the measure: keys
    of :data:`CHECK_WORDS`. ``reliable`` False or None (unverified) is not certified: the
    point's status is then not ``"converged"``, and no other check explains it."""
    failed = []
    value = _finite(point.get("value"))
    if value is None or value > eps:
        failed.append("seeds")
    for key in ("sv_error", "triplet_residual"):
        v = _finite(point.get(key))
        if v is not None and v > eps:
            failed.append(key)
    if point.get("status") == "unreliable" or (not failed and point.get("status") != "converged"):
        failed.append("reliable")
    return failed


def _hollow_checks(rows):
    """Per effort of a solver's curve whose median value (over seeds) meets an eps: the checks
    some seed's answer at that effort fails at that eps (empty: right at every eps it meets).

    Read from the rows' sweeps at each eps (each point's ``status`` is judged at its row's
    eps); a stopping-rule row judges its own stop, not the race, and is left out.
    """
    judged = {}  # effort -> eps -> [points over seeds]
    for row in rows:
        eps = _finite(row.get("eps"))
        if eps is None or row.get("stop") not in ("reference", "exact"):
            continue
        for p in row.get("history") or []:
            if p.get("status") is not None:  # older sweeps were not judged point by point
                judged.setdefault(p.get("effort"), {}).setdefault(eps, []).append(p)
    out = {}
    for effort, by_eps in judged.items():
        checks = set()
        for eps, points in by_eps.items():
            values = [v for p in points if (v := _finite(p.get("value"))) is not None]
            if not values or float(np.median(values)) > eps:
                continue
            for p in points:
                if p.get("status") != "converged":
                    checks.update(_failed_checks(p, eps))
        out[effort] = checks
    return out


def curve_marks(rows):
    """What :func:`time_to_accuracy_figure` marks on one problem's rows under one measure, and
    what its caption must say.

    Returns
    -------
    dict
        ``right``: one dict per right row: ``solver``, ``method``, ``eps``, ``seconds``,
        ``passes``, ``value`` (the row's: median over its seeds' first right answers),
        ``ring`` (True: the race's own row, drawn as a ring; a stopping-rule row is listed
        only where it wins), ``winner`` (the fastest right answer at that eps) and
        ``raced_winner`` (the fastest raced one, where the winner is an exact path). ``hollow``:
        ``{solver: {effort: checks}}``, the curve points whose median value meets an eps
        but whose answers fail another check there (keys of :data:`CHECK_WORDS`).
        ``checks``: ``{solver: checks}``, their union. ``winners``: ``{eps: (winner,
        raced winner or None)}``. ``one_seed``: solvers drawn from rows that ran one seed
        (no band). ``exact``: solvers that are exact paths (``stop == "exact"``: their
        products are with a structured operator, not passes over G).
        ``not_applicable``: solvers that do not apply to the problem (not drawn).
    """
    rows = list(rows)
    found = {_finite(v["eps"]): v for v in verdicts(rows)}
    winners = {eps: (v["winner"], v.get("raced_winner")) for eps, v in found.items() if v["winner"]}
    by_solver = {}
    for row in rows:
        by_solver.setdefault(base_solver(row.get("method", "?")), []).append(row)
    right, hollow, one_seed, exact, na = [], {}, [], [], []
    for solver, srows in by_solver.items():
        raced = [r for r in srows if r.get("stop") in ("reference", "exact")]
        if srows and not any(applies(r) for r in srows):
            na.append(solver)
            continue
        if any(r.get("stop") == "exact" for r in srows):
            exact.append(solver)
        if any(r.get("history") for r in raced) and all(r.get("n_seeds") == 1 for r in raced):
            one_seed.append(solver)
        marks = {e: c for e, c in _hollow_checks(srows).items() if c}
        if marks:
            hollow[solver] = marks
        for r in srows:
            eps = _finite(r.get("eps"))
            if not is_right(r) or eps is None:
                continue
            won = winners.get(eps, (None, None))
            mark = {
                "solver": solver,
                "method": str(r.get("method")),
                "eps": eps,
                "seconds": _finite(r.get("seconds")),
                "passes": _finite(r.get("n_passes")),
                "value": _finite(r.get("value")),
                "ring": r in raced,
                "winner": won[0] == r.get("method"),
                "raced_winner": won[1] == r.get("method"),
            }
            # a stopping-rule row is marked only where it wins: it is not the race's sweep
            if mark["ring"] or mark["winner"] or mark["raced_winner"]:
                right.append(mark)
    return {
        "right": right,
        "hollow": hollow,
        "checks": {s: set().union(*m.values()) for s, m in hollow.items()},
        "winners": winners,
        "one_seed": one_seed,
        "exact": exact,
        "not_applicable": na,
    }


#: the note on an exact path's point in the passes panel
EXACT_PASSES_NOTE = "products with the sparse operator, not passes over G"


def _draw_curve(ax, pts, efforts, hollow, color, solver):
    """One solver's median curve: a line, filled points, and hollow ones where the measure
    meets an eps but another check fails there."""
    ax.plot(pts[:, 0], pts[:, 1], "-", lw=1.5, color=color, label=solver)
    is_hollow = [bool(hollow.get(e)) for e in efforts]
    filled = [i for i, h in enumerate(is_hollow) if not h]
    empty = [i for i, h in enumerate(is_hollow) if h]
    if filled:
        ax.plot(pts[filled, 0], pts[filled, 1], "o", ms=3, color=color, gid=f"point:{solver}")
    if empty:
        ax.plot(
            pts[empty, 0],
            pts[empty, 1],
            "o",
            ms=5.5,
            mfc="white",
            mec=color,
            mew=1.3,
            gid=f"hollow:{solver}",
        )


def _draw_right_points(ax, marks, colors, x_key, floor):
    """A ring where each solver's whole answer is first right at each eps; a star on the
    winner's (white: the fastest raced solver, where the winner is an exact path)."""
    for m in marks["right"]:
        x, v = m[x_key], m["value"]
        if x is None or v is None or x <= 0:
            continue
        v, color = max(v, floor), colors.get(m["solver"])
        tag = f"{m['method']}:{m['eps']:g}"
        if m["ring"]:
            ax.plot(x, v, "o", ms=11, mfc="none", mec=color, mew=2, gid=f"right:{tag}")
        if m["winner"] or m["raced_winner"]:
            ax.plot(
                x,
                v,
                "*",
                ms=15,
                mfc=color if m["winner"] else "white",
                mec="black",
                mew=1,
                zorder=5,
                gid=f"{'winner' if m['winner'] else 'raced-winner'}:{tag}",
            )


def _key_entries(ax, marks):
    """Legend entries (proxies) for the markers this figure uses."""
    if any(m["ring"] for m in marks["right"]):
        ax.plot([], [], "o", ms=10, mfc="none", mec="0.2", mew=2, label="first right (whole)")
    if marks["hollow"]:
        ax.plot([], [], "o", ms=5.5, mfc="white", mec="0.2", mew=1.3, label="eps met, a check not")
    if any(m["winner"] for m in marks["right"]):
        ax.plot([], [], "*", ms=13, mfc="0.4", mec="black", label="winner")
    if any(m["raced_winner"] for m in marks["right"]):
        ax.plot([], [], "*", ms=13, mfc="white", mec="black", label="fastest raced")


def time_to_accuracy_figure(rows, *, title=None, colors=None):
    """The error each solver reached against seconds and against passes over G.

    ``rows`` are one problem's rows under one measure (any tolerances). Each solver's curve
    follows its effort sweep (``row["history"]``): the median over seeds as a line, the
    spread over seeds (min to max) as a band; a row without a history is drawn as one point
    at its found effort. Each tolerance is a dashed line. Rows with a stopping-rule tag
    (``[stop=residual]``) run the same sweep as their solver and are drawn with it.

    What "right" means is drawn (:func:`curve_marks`): a ring where a solver's whole answer
    (measure, singular values, triplets, ``reliable``) is first right at each eps, a star on
    the winner's, and hollow points where the measure meets an eps but another check fails
    there. An exact path's point in the passes panel (the structured SVD) says its products
    are with the sparse operator, not passes over G. Artists carry ``gid`` tags
    (``point:``, ``hollow:``, ``right:``, ``winner:``, ``raced-winner:``, ``exact-passes:``
    and the solver) for tests and tools.

    Returns
    -------
    matplotlib.figure.Figure
    """
    rows = list(rows)
    by_solver = {}
    for row in rows:
        by_solver.setdefault(base_solver(row.get("method", "?")), []).append(row)
    colors = colors or solver_colors(by_solver)
    marks = curve_marks(rows)
    fig, axes = _new_figure(9.4, 4.0, 2, title=bool(title))
    tolerances = sorted({float(r["eps"]) for r in rows if r.get("eps") is not None})
    floor = max(tolerances[0] * _BELOW_EPS, _ERROR_FLOOR) if tolerances else _ERROR_FLOOR
    panels = (
        ("seconds", "seconds", "seconds", "time to solve (s)"),
        ("passes", "n_passes", "passes", "passes over G"),
    )
    for ax, (hist_key, row_key, mark_key, xlabel) in zip(axes, panels, strict=True):
        for solver, srows in by_solver.items():
            if solver in marks["not_applicable"]:  # nothing ran: the caption names it
                continue
            color = colors.get(solver)
            pts, efforts = _sweep_points(srows, hist_key, floor)
            if len(pts):
                _draw_curve(ax, pts, efforts, marks["hollow"].get(solver, {}), color, solver)
                if len(pts) > 1:
                    ax.fill_between(pts[:, 0], pts[:, 2], pts[:, 3], color=color, alpha=0.18, lw=0)
            else:
                xy = [(_finite(r.get(row_key)), _finite(r.get("value"))) for r in srows]
                xy = [(x, max(v, floor)) for x, v in xy if None not in (x, v) and x > 0]
                if not xy:
                    continue
                xs, vs = np.array(xy).T
                ax.plot(xs, vs, "o", ms=5, color=color, label=solver, alpha=0.85)
            if mark_key == "passes" and solver in marks["exact"]:
                x = pts[0, 0] if len(pts) else xs[0]
                y = pts[0, 1] if len(pts) else vs[0]
                ax.annotate(
                    f"{solver}:\n" + EXACT_PASSES_NOTE.replace(", ", ",\n"),
                    xy=(x, y),
                    xytext=(-8, 10),
                    textcoords="offset points",
                    ha="right",
                    fontsize=7,
                    color=color,
                    arrowprops={"arrowstyle": "-", "color": color, "lw": 0.8},
                    # readable where it crosses other curves
                    bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "none", "alpha": 0.85},
                    gid=f"exact-passes:{solver}",
                )
        _draw_right_points(ax, marks, colors, mark_key, floor)
        for eps in tolerances:
            ax.axhline(eps, color="0.25", ls="--", lw=1)
            ax.annotate(
                f"eps {eps:g}",
                xy=(1, eps),
                xycoords=("axes fraction", "data"),
                xytext=(-4, 3),
                textcoords="offset points",
                ha="right",
                fontsize=8,
                color="0.25",
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        _log_axis(ax.xaxis)
        _log_axis(ax.yaxis)
        ax.set_xlabel(xlabel)
        ax.grid(True, which="major", alpha=0.3)
    axes[0].set_ylabel(
        f"error reached (measure; below {floor:.0e} drawn at {floor:.0e})", fontsize=9
    )
    drawn = any(ax.get_legend_handles_labels()[1] for ax in axes)
    if drawn:
        _key_entries(axes[-1], marks)  # last in the legend, after the solvers
    if not _legend(fig, axes):
        for ax in axes:
            ax.text(
                0.5,
                0.5,
                "no timed answer to draw",
                ha="center",
                va="center",
                transform=ax.transAxes,
                color="0.4",
            )
    if title:
        fig.suptitle(title, fontsize=11)
    return fig


def profiles_figure(table, *, title=None, colors=None, tau_max=100.0):
    """Performance profile (time) and data profiles (passes, entries read) side by side.

    Parameters
    ----------
    table : dict
        One entry of :func:`ksvd_bench.report.profiles.profile_tables`.

    Returns
    -------
    matplotlib.figure.Figure
    """

    solvers = table["solvers"]
    colors = colors or solver_colors(base_solver(s) for s in solvers)
    n = len(table["problems"])
    panels = [
        (
            "perf",
            "seconds",
            None,
            "performance ratio tau (time / fastest time)",
            "Performance profile (time)",
        )
    ]
    panels.append(("data", "passes", None, "budget: passes over G", "Data profile (passes)"))
    if any(np.isfinite(v).any() for v in table["entries"].values()):
        scaled = table.get("entries_scale") is not None
        panels.append(
            (
                "data",
                "entries",
                table.get("entries_scale"),
                "budget: entries read / (N M)" if scaled else "budget: entries read",
                "Data profile (entries read)",
            )
        )
    fig, axes = _new_figure(3.6 * len(panels) + 0.4, 3.8, len(panels), title=bool(title))
    for ax, (kind, field, scale, xlabel, name) in zip(axes, panels, strict=True):
        if kind == "perf":
            x, frac = performance_profile(table[field], tau_max=tau_max)
        else:
            x, frac = data_profile(table[field], scale=scale)
        for s in solvers:
            # a step that holds its value up to the right edge (Dolan & More draw it so)
            xs = np.append(x, x[-1] * (1 if kind == "perf" else 1.5))
            ys = np.append(frac[s], frac[s][-1])
            # a solver under a stopping rule ("rsvd [stop=residual]") is its solver's colour,
            # dashed: 23 entries stay 12 colours and one legend line for the rule
            tagged = base_solver(s) != s
            ax.step(
                xs,
                ys,
                where="post",
                color=colors.get(s, colors.get(base_solver(s))),
                lw=1.2 if tagged else 1.7,
                ls="--" if tagged else "-",
                label=None if tagged else s,
            )
        ax.set_xscale("log")
        _log_axis(ax.xaxis)
        if kind == "perf":
            ax.set_xlim(1, tau_max)
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel(xlabel, fontsize=9)
        ax.set_title(name, fontsize=10)
        ax.grid(True, which="major", alpha=0.3)
    axes[0].set_ylabel(f"fraction of the {n} problems solved")
    if any(base_solver(s) != s for s in solvers):
        axes[0].plot(
            [],
            [],
            color="0.3",
            ls="--",
            lw=1.2,
            label="dashed: the same solver,\nstopped by the residual\nestimate ([stop=residual])",
        )
    _legend(fig, axes)
    if title:
        fig.suptitle(title, fontsize=11)
    return fig
