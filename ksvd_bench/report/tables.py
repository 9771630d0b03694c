"""Plain-text tables, notes and the progress bar, for the terminal.

:func:`format_table` lays a list of dicts out as aligned columns, :func:`wrap_note` wraps a
note to :data:`TEXT_WIDTH`, and :func:`progress_bar` shows counts and elapsed time on stderr.
"""

from __future__ import annotations

import math
import textwrap

import numpy as np

__all__ = ["TEXT_WIDTH", "format_table", "wrap_note", "progress_bar"]

#: terminal width the tables and notes are laid out for
TEXT_WIDTH = 100


def _fmt(value, precision):
    if value is None:
        return "-"
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (float, np.floating)):
        if math.isnan(value):
            return "-"
        if value != 0 and (abs(value) >= 1e5 or abs(value) < 10 ** (-precision)):
            return f"{value:.{max(precision - 1, 1)}e}"
        return f"{value:.{precision}f}"
    return str(value)


def format_table(rows, columns=None, *, precision=3, title=None, groups=None):
    """Format a list of dicts as an aligned plain-text table.

    Parameters
    ----------
    rows : list of dict
    columns : list of str or list of (key, header) pairs, optional
        Which keys to show and in which order; default: keys of the first row.
    precision : int, default=3
        Digits after the decimal point for floats.
    title : str, optional
        A line printed above the table.
    groups : list of (str, list of dict), optional
        Row groups, each shown under its label line, after ``rows``; the columns are aligned
        across all groups.
    """
    rows = list(rows)
    groups = [(label, list(g)) for label, g in (groups or [])]
    if columns is None:
        first = rows or next((g for _, g in groups if g), [])
        columns = list(first[0]) if first else []
    pairs = [(c, c) if isinstance(c, str) else tuple(c) for c in columns]

    def cells_of(rs):
        return [[_fmt(row.get(key), precision) for key, _ in pairs] for row in rs]

    header = [header for _, header in pairs]
    body = [(None, cells_of(rows))] + [(label, cells_of(g)) for label, g in groups]
    every = [header] + [c for _, cs in body for c in cs]
    widths = [max(len(r[i]) for r in every) for i in range(len(pairs))]

    def line(cells):
        return "  ".join(c.rjust(w) for c, w in zip(cells, widths, strict=True))

    lines = [title] if title else []
    lines += [line(header), "  ".join("-" * w for w in widths)]
    for label, cs in body:
        if label is not None:
            lines.append(label)
        lines += [line(c) for c in cs]
    return "\n".join(lines)


def wrap_note(text, width=TEXT_WIDTH, indent=""):
    """Wrap a note (one paragraph per line of ``text``) to ``width`` characters."""
    return "\n".join(
        textwrap.fill(par, width=width, initial_indent=indent, subsequent_indent=indent + "  ")
        if par
        else ""
        for par in text.split("\n")
    )


def progress_bar(iterable=None, *, total=None, desc=None, enabled=True, unit="it"):
    """A tqdm bar (on stderr) that shows counts and elapsed time, never an ETA or a rate.

    The first steps of a race compile Numba code and build kernels, so tqdm's rate (and the
    ETA derived from it) is wrong by orders of magnitude early on (an ETA of 19:20 for a
    two-minute run); after that, steps differ in cost by 100x. Counts and elapsed time are
    what the bar can say truthfully.
    """
    # tqdm.auto probes for Jupyter when imported: only when a bar is drawn
    from tqdm.auto import tqdm

    return tqdm(
        iterable,
        total=total,
        desc=desc,
        unit=unit,
        disable=not enabled,
        leave=False,
        bar_format=(
            "{desc}: {percentage:3.0f}%|{bar:16}| {n_fmt}/{total_fmt} {unit} "
            "[{elapsed} elapsed]{postfix}"
        ),
    )
