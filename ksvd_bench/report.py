"""Formatting of result tables for the terminal, JSON/CSV writers and progress bars.

Result files are written atomically (a temporary file in the same directory, then
``os.replace``): an interrupted or failed write never leaves a truncated file behind, and a
reader never sees a half-written one. :func:`check_out_dir` checks an output directory before
any work is done, so a bad ``--out`` costs nothing.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import os
import platform
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np

__all__ = [
    "format_table", "wrap_note", "write_json", "write_csv", "atomic_path", "save_figure",
    "check_out_dir", "progress_bar", "machine_info",
]

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
        textwrap.fill(par, width=width, initial_indent=indent,
                      subsequent_indent=indent + "  ") if par else ""
        for par in text.split("\n")
    )


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


@contextlib.contextmanager
def atomic_path(path):
    """Yield a temporary path beside ``path``; on success move it onto ``path`` atomically.

    The temporary file lives in the same directory (``os.replace`` is atomic only within one
    file system). If the body raises, the temporary file is removed and ``path`` keeps its
    previous content.

    Examples
    --------
    >>> with atomic_path("results/figure.png") as tmp:   # doctest: +SKIP
    ...     fig.savefig(tmp, format="png")
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    # mkstemp makes the file private (0600); a result file gets the mode any new file would
    os.chmod(tmp, 0o666 & ~_umask())
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def save_figure(fig, path, *, dpi=110):
    """Save a matplotlib figure as PNG at ``path``, atomically, and close it; returns the path."""
    import matplotlib.pyplot as plt

    path = Path(path)
    try:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, dpi=dpi, format="png")
    finally:
        plt.close(fig)
    return path


def _umask():
    """The process's umask (read by setting it and restoring it at once)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _write_text(path, text):
    path = Path(path)
    with atomic_path(path) as tmp:
        tmp.write_text(text)
    return path


def write_json(path, payload):
    """Write ``payload`` (dicts, lists, numpy scalars/arrays) as indented JSON, atomically."""
    return _write_text(path, json.dumps(_jsonable(payload), indent=2))


def write_csv(path, rows, columns=None):
    """Write a list of dicts as CSV (nested values are JSON-encoded), atomically."""
    rows = list(rows)
    if columns is None:
        columns = []
        for row in rows:
            columns += [k for k in row if k not in columns]
    buf = io.StringIO(newline="")
    writer = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore")
    writer.writeheader()
    for row in rows:
        writer.writerow(
            {
                k: json.dumps(_jsonable(v)) if isinstance(v, (dict, list, tuple)) else v
                for k, v in row.items()
            }
        )
    return _write_text(path, buf.getvalue())


def check_out_dir(out, name="out"):
    """Check, before any work, that result files can be written under ``out``.

    Creates the directory (and its parents) and writes and removes a probe file in it, so
    that every reason a later write could fail (a path under a file, no permission, a
    read-only file system) is found now.

    Parameters
    ----------
    out : str or Path
        The output directory. The empty string is refused: it would silently mean the
        current directory.
    name : str, default="out"
        How the caller names the argument in the error message (e.g. ``"--out"``).

    Returns
    -------
    Path
        ``out`` as a Path.

    Raises
    ------
    ValueError
        Naming ``name`` and the reason, when ``out`` is empty or not writable.
    """
    if not isinstance(out, (str, os.PathLike)):
        raise TypeError(f"{name} must be a path, got {type(out).__name__}")
    if str(out).strip() == "":
        raise ValueError(f"{name} must name a directory, got an empty string (use '.' for the "
                         f"current directory)")
    path = Path(out)
    if path.exists() and not path.is_dir():
        raise ValueError(f"{name}={str(out)!r} exists and is not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(prefix=".write-probe.", dir=path):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ValueError(f"{name}={str(out)!r} is not a writable directory ({reason})") from None
    return path


def progress_bar(iterable=None, *, total=None, desc=None, enabled=True, unit="it"):
    """A tqdm bar (on stderr) that shows counts and elapsed time, never an ETA or a rate.

    The first steps of a race compile Numba code and build kernels, so tqdm's rate (and the
    ETA derived from it) is wrong by orders of magnitude early on (an ETA of 19:20 for a
    two-minute run); after that, steps differ in cost by 100x. Counts and elapsed time are
    what the bar can say truthfully.
    """
    from tqdm.auto import tqdm

    return tqdm(iterable, total=total, desc=desc, unit=unit, disable=not enabled, leave=False,
                bar_format=("{desc}: {percentage:3.0f}%|{bar:16}| {n_fmt}/{total_fmt} {unit} "
                            "[{elapsed} elapsed]{postfix}"))


def machine_info():
    """Machine, library versions, BLAS and thread settings, for the record of a run."""
    import numba
    import scipy
    import sklearn
    from threadpoolctl import threadpool_info

    try:
        import importlib.util

        svml = importlib.util.find_spec("intel_cmplr_lib_rt") is not None
    except (ImportError, ValueError):
        svml = False
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "numba": numba.__version__,
        "scikit-learn": sklearn.__version__,
        "numba_threads": numba.get_num_threads(),
        "numba_svml": bool(getattr(numba.config, "USING_SVML", False)),
        "intel_cmplr_lib_rt_installed": svml,
        "blas": [
            {k: p.get(k) for k in ("internal_api", "version", "num_threads", "architecture")}
            for p in threadpool_info()
            if p.get("user_api") == "blas"
        ],
    }
