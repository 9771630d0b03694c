"""The files of the scale study: CSV/JSON/PNG writers, and merging onto an earlier run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ksvd_bench.race.scale.fit import best_cells
from ksvd_bench.race.scale.problems import ACCURACY_TARGET, PART_TITLES, ROW_FIELDS
from ksvd_bench.report import save_figure, write_csv, write_json

__all__ = ["write_scale", "plot_scale", "load_merge_base", "merge_rows"]


def write_scale(result, out):
    """Write ``scale.csv``, ``scale_exponents.csv``, ``scale.json`` and ``scale.png``."""
    out = Path(out)
    columns = list(ROW_FIELDS) + sorted({k for r in result.rows for k in r} - set(ROW_FIELDS))
    return {
        "csv": str(write_csv(out / "scale.csv", result.rows, columns)),
        "exponents_csv": str(write_csv(out / "scale_exponents.csv", result.exponents)),
        "json": str(
            write_json(
                out / "scale.json",
                {
                    "meta": result.meta,
                    "rows": result.rows,
                    "exponents": result.exponents,
                    "best": best_cells(result.rows),
                    "references": result.references,
                },
            )
        ),
        "png": str(plot_scale(result, out / "scale.png")),
    }


#: the parameters ``--merge`` compares (part and size may differ: that is what merging adds)
MERGE_KEYS = ("rank", "seed", "dtype", "device")


def load_merge_base(out, problem):
    """The earlier ``scale.json`` in ``out`` that a ``merge`` run will extend, checked now.

    Called before any cell is computed, so that a file that cannot be merged costs nothing.

    Parameters
    ----------
    out : str or Path
        The output directory.
    problem : dict
        This run's ``rank``, ``seed``, ``dtype`` and ``device``.

    Returns
    -------
    dict or None
        The earlier payload with every row carrying its problem's parameters (an older file's
        rows get them from its meta), or None when there is no earlier file.

    Raises
    ------
    ValueError
        When the file cannot be read as a scale result, or its rows were made for another
        rank, seed, dtype or device (their timings and errors are not comparable).
    """
    path = Path(out) / "scale.json"
    if not path.exists():
        return None
    where = f"cannot merge onto {str(path)!r}"
    try:
        old = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(
            f"{where}: not readable JSON ({exc}); move it away or run without merge"
        ) from None
    rows = old.get("rows") if isinstance(old, dict) else None
    refs = old.get("references", []) if isinstance(old, dict) else None
    if (
        not isinstance(rows, list)
        or not isinstance(refs, list)
        or not all(isinstance(r, dict) and {"part", "n", "method"} <= set(r) for r in rows)
    ):
        raise ValueError(
            f"{where}: not a scale result (needs 'rows' with part, n and method "
            f"per row); move it away or run without merge"
        )
    meta = old.get("meta") if isinstance(old.get("meta"), dict) else {}
    defaults = {
        "rank": meta.get("rank"),
        "seed": meta.get("seed"),
        "dtype": meta.get("dtype", "float64"),
        "device": meta.get("device", "cpu"),
    }
    rows = [{**defaults, "m": r["n"], **r} for r in rows]
    for key in MERGE_KEYS:
        for part in sorted({r["part"] for r in rows}):
            # part a's structured operator runs on the CPU whatever the device asked
            want = "cpu" if key == "device" and part == "a" else problem[key]
            found = sorted({str(r[key]) for r in rows if r["part"] == part} - {str(want)})
            if found:
                raise ValueError(
                    f"{where}: its part-{part} cells were made with "
                    f"{key}={', '.join(found)}, this run has {key}={want}; "
                    f"merging different problems is refused (use another out)"
                )
    return {**old, "rows": rows, "references": refs}


def merge_rows(old, rows, references):
    """This run's rows and references over those of an earlier payload (None: nothing)."""
    if old is None:
        return rows, references
    cell = {(r["part"], r["n"], r["method"]) for r in rows}
    size = {(r["part"], r["n"]) for r in references}
    kept = [r for r in old["rows"] if (r["part"], r["n"], r["method"]) not in cell]
    kept_refs = [r for r in old["references"] if (r["part"], r["n"]) not in size]
    return sorted(kept + rows, key=_row_order), sorted(kept_refs + references, key=_row_order)


def _row_order(row):
    return row["part"], row["n"], row.get("method", "")


def plot_scale(result, path):
    """Log-log figure: seconds against N (top) and subspace error against N (bottom)."""
    # matplotlib: loaded only when a figure is drawn (start-up)
    import matplotlib

    matplotlib.use("Agg")
    # matplotlib: loaded only when a figure is drawn (start-up)
    import matplotlib.pyplot as plt

    parts = sorted({r["part"] for r in result.rows}) or ["a"]
    fig, axes = plt.subplots(2, len(parts), figsize=(6 * len(parts), 8), squeeze=False)
    fits = {(f["part"], f["method"]): f["exponent"] for f in result.exponents}
    for col, part in enumerate(parts):
        top, bottom = axes[0, col], axes[1, col]
        methods = list(dict.fromkeys(r["method"] for r in result.rows if r["part"] == part))
        for i, method in enumerate(methods):
            ok = sorted(
                (
                    r
                    for r in result.rows
                    if r["part"] == part and r["method"] == method and r["status"] == "ok"
                ),
                key=lambda r: r["n"],
            )
            if not ok:
                continue
            n = np.array([r["n"] for r in ok], dtype=float)
            sec = np.array([r["seconds"] for r in ok], dtype=float)
            slope = fits.get((part, method))
            label = method if slope is None else f"{method} (N^{slope:.2f})"
            top.loglog(n, sec, "o-", color=f"C{i}", label=label)
            err = np.array(
                [
                    np.nan if r.get("subspace_error") is None else max(r["subspace_error"], 1e-16)
                    for r in ok
                ]
            )
            if np.isfinite(err).any():
                bottom.loglog(n, err, "s-", color=f"C{i}", label=method)
        top.set_title(PART_TITLES[part], fontsize=9)
        top.set_xlabel("N")
        top.set_ylabel("seconds (set-up + solve)")
        top.legend(fontsize=8)
        bottom.axhline(
            ACCURACY_TARGET, color="grey", ls=":", lw=1, label=f"target {ACCURACY_TARGET:g}"
        )
        bottom.set_xlabel("N")
        bottom.set_ylabel("subspace error (sin theta_max)")
        if bottom.get_legend_handles_labels()[0]:
            bottom.legend(fontsize=8)
    fig.tight_layout()

    return save_figure(fig, path)
