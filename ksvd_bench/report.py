"""Formatting of result tables for the terminal, and JSON/CSV writers."""

from __future__ import annotations

import csv
import json
import math
import os
import platform
import sys
from pathlib import Path

import numpy as np


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


def format_table(rows, columns=None, *, precision=3, title=None):
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
    """
    rows = list(rows)
    if columns is None:
        columns = list(rows[0]) if rows else []
    pairs = [(c, c) if isinstance(c, str) else tuple(c) for c in columns]
    cells = [[header for _, header in pairs]]
    cells += [[_fmt(row.get(key), precision) for key, _ in pairs] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(pairs))]
    lines = [title] if title else []
    for k, r in enumerate(cells):
        lines.append("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)))
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


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


def write_json(path, payload):
    """Write ``payload`` (dicts, lists, numpy scalars/arrays) as indented JSON."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(_jsonable(payload), indent=2))
    return path


def write_csv(path, rows, columns=None):
    """Write a list of dicts as CSV (nested values are JSON-encoded)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = list(rows)
    if columns is None:
        columns = []
        for row in rows:
            columns += [k for k in row if k not in columns]
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow(
                {
                    k: json.dumps(_jsonable(v)) if isinstance(v, (dict, list, tuple)) else v
                    for k, v in row.items()
                }
            )
    return path


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
