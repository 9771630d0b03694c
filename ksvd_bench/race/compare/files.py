"""The files of ``compare``: their columns (:data:`ROW_FIELDS`, :data:`RUN_FIELDS`), JSON/CSV
results, the record kept in the repository, and the README table rendered from that record.

The README's race numbers are not typed by hand: ``ksvd-bench compare --record FILE`` keeps a
run's rows with its machine, load averages and the command that regenerates it (the
repository keeps one, ``benchmarks/recorded/race_cora.json``), and
``ksvd-bench compare --readme-table FILE`` renders the README's table from it
(:func:`readme_table`).
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path

from ksvd_bench.race.common import (
    EFFORT_LABELS,
    RESIDUAL_SUFFIX,
    STRUCTURED_NAME,
    VERDICT_FIELDS,
    num,
    ratio_text,
)
from ksvd_bench.report import write_csv, write_json, write_report
from ksvd_bench.report.winners import seeds_mark

__all__ = [
    "ROW_FIELDS",
    "CSV_ROW_FIELDS",
    "RUN_FIELDS",
    "write_compare_files",
    "write_record",
    "load_record",
    "readme_table",
]

#: fields of every summary row (CSV column order; ``history`` is in the JSON only). ``value``
#: is the measure reached: eta (``measure="eta"``, under ``weights``) or the low-rank excess
#: (``measure="lowrank"``); ``sv_error``, ``triplet_residual`` (medians over seeds),
#: ``n_warnings`` (all seeds), ``warnings`` (their messages) and ``reliable`` judge the whole
#: triplet (see :mod:`ksvd_bench.race.common`). ``n_seeds``: the seeds the row ran, of
#: ``n_seeds_asked`` (fewer where the cell's budget ran out first; a stopping-rule row asks
#: 1, an "n/a" row 0). ``converged`` is True only when every part of
#: the rule holds; ``status`` says the verdict in words (:data:`~ksvd_bench.race.common.
#: STATUSES`; None on an "n/a" row): a stopping rule that fired on a wrong answer is
#: ``"stopped early, wrong"``, with its sv error. ``history``: every seed's effort sweep, one
#: point per (seed, effort) tried (:func:`~ksvd_bench.race.compare.cells.sweep_point`:
#: ``seed``, ``effort``, ``seconds``, ``passes``, ``entries_read``, ``value``, ``sv_error``,
#: ``triplet_residual``, ``status``; the residual rows add ``residual_estimate``).
ROW_FIELDS = (
    "dataset",
    "shape",
    "kernel",
    "eps",
    "measure",
    "weights",
    "method",
    "stop",
    "n_seeds",
    "n_seeds_asked",
    "n_converged",
    "converged",
    "status",
    "effort_param",
    "effort",
    "effort_min",
    "effort_max",
    "n_passes",
    "seconds",
    "cert_share",
    "kernel_seconds",
    "e2e_seconds",
    "e2e_source",
    "value",
    "value_worst",
    "best_value",
    "resid_est",
    "value_ok",
    "sv_error",
    "triplet_residual",
    "n_warnings",
    "reliable",
    "speedup_vs_rsvd",
    "paper_seconds",
    "paper_speedup",
    "note",
    "warnings",
    "history",
)
#: the columns of ``compare.csv`` (the sweeps stay in the JSON)
CSV_ROW_FIELDS = tuple(f for f in ROW_FIELDS if f != "history")
#: per-seed run fields
RUN_FIELDS = (
    "dataset",
    "eps",
    "measure",
    "weights",
    "method",
    "stop",
    "seed",
    "effort",
    "n_passes",
    "value",
    "seconds",
    "cert_seconds",
    "converged",
    "status",
    "resid_est",
    "n_steps",
    "e2e_seconds",
    "e2e_value",
    "e2e_n_warnings",
    *VERDICT_FIELDS,
)

#: what a record must hold to be rendered
RECORD_KEYS = ("meta", "rows")


def write_compare_files(result, out):
    """Write ``compare.json``, ``compare.csv``, ``compare_runs.csv`` and the page
    ``report.html`` (:func:`ksvd_bench.report.write_report`: headline, time-to-accuracy
    curves, failures, the run's record) under ``out``, each atomically.

    Returns
    -------
    dict
        ``{"json": path, "csv": path, "runs_csv": path, "report": path}`` (str).
    """
    out = Path(out)
    return {
        "json": str(
            write_json(
                out / "compare.json",
                {"meta": result.meta, "rows": result.rows, "runs": result.runs},
            )
        ),
        "csv": str(write_csv(out / "compare.csv", result.rows, list(CSV_ROW_FIELDS))),
        "runs_csv": str(write_csv(out / "compare_runs.csv", result.runs, list(RUN_FIELDS))),
        "report": str(
            write_report(out, rows=result.rows, meta=result.meta, title="ksvd-bench compare")
        ),
    }


def write_record(result, path):
    """Keep a run as a record for the repository: its rows (without their sweeps) and meta
    (machine, load averages, the regenerating command), not the per-seed runs. Written
    atomically; returns the path."""
    recorded = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    rows = [{k: v for k, v in r.items() if k != "history"} for r in result.rows]
    return write_json(path, {"recorded_at": recorded, "meta": result.meta, "rows": rows})


def load_record(path):
    """A record (or a ``compare.json``) as a dict; a ValueError naming the file if it is not one."""
    path = Path(path)
    try:
        payload = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"{str(path)!r} is not a readable compare record: {exc}") from None
    if not isinstance(payload, dict) or any(k not in payload for k in RECORD_KEYS):
        raise ValueError(f"{str(path)!r} is not a compare record (needs 'meta' and 'rows')")
    return payload


def _cell(r):
    """One (method, measure) cell of the README table."""
    if r is None:
        return ""
    if r.get("stop") == "n/a":
        return "n/a"
    effort = "" if r.get("effort") is None else f"{_effort_label(r)}, "
    warn = r.get("n_warnings") or 0
    tail = f", {warn} warn." if warn else ""
    if r.get("reliable") is False:
        tail += ", unreliable"
    elif r.get("verified") == "unverified":  # ran unchecked: right by the reference only
        tail += ", unverified"
    short = seeds_mark(r)
    if short:
        tail += f", {short}"
    if not r["converged"]:
        best = r.get("best_value")
        sv = r.get("sv_error")
        off = f", sv err {num(sv, 2)}" if sv is not None and sv > r["eps"] else ""
        return f"not conv. ({effort}best {num(best)}{off}{tail})"
    speed = r.get("speedup_vs_rsvd")
    vs = "" if speed is None else f", {ratio_text(speed)}"
    return f"{effort}{num(r['seconds'])} s{vs}{tail}"


def _effort_label(r):
    return f"{EFFORT_LABELS.get(r.get('effort_param'), r.get('effort_param'))}={r['effort']}"


def _provenance(payload):
    meta = payload["meta"]
    machine = meta.get("machine", {})
    load = meta.get("load_average") or {}
    before, after = load.get("before"), load.get("after")
    loads = (
        "unknown"
        if not before
        else f"{before[0]:.1f} before, {after[0]:.1f} after"
        if after
        else f"{before[0]:.1f}"
    )
    command = meta.get("command_line") or "ksvd-bench compare (library call)"
    when = payload.get("recorded_at") or meta.get("finished_at") or "unknown date"
    return (
        f"Recorded {when} on {machine.get('processor', '?')} "
        f"({machine.get('cpu_count', '?')} CPUs, {machine.get('platform', '?')}), "
        f"threads={meta.get('threads')}, 1-minute load {loads}; up to "
        f"{meta.get('n_seeds')} seeds per cell (fewer where its "
        f"{meta.get('budget_seconds')} s budget ran out). Regenerate: `{command}`."
    )


def readme_table(payload, *, datasets=None):
    """The README's race tables (Markdown) from a record, one per (dataset, eps).

    Rows are the methods (the exact structured entry last), columns the accuracy measures;
    a cell gives the effort found, the median time and the speedup over RSVD, or "not conv."
    with the best value reached; warnings and unreliable answers are named in the cell.

    Parameters
    ----------
    payload : dict or str or Path
        A record (:func:`write_record`, or a ``compare.json``) or its path.
    datasets : sequence of str, optional
        Only these datasets (default: all in the record).

    Returns
    -------
    str
    """
    if not isinstance(payload, dict):
        payload = load_record(payload)
    meta, rows = payload["meta"], payload["rows"]
    measures = list(meta["measures"])
    methods = list(meta["methods"]) + [STRUCTURED_NAME]
    blocks = [_provenance(payload)]
    for dataset in datasets or meta["datasets"]:
        for e in meta["eps"]:
            sel = [
                r
                for r in rows
                if r["dataset"] == dataset
                and r["eps"] == e
                and not r["method"].endswith(RESIDUAL_SUFFIX)
            ]
            if not sel:
                continue
            shape = "x".join(str(n) for n in sel[0]["shape"])
            vacuous = [
                m
                for m, b in meta.get("reference", {}).get(dataset, {}).get("value_max", {}).items()
                if b <= e
            ]
            head = [f"**{dataset} {shape}, r = {meta['rank']}, eps = {e:g}**"]
            if vacuous:
                head.append(f"(vacuous at this eps, any answer meets it: {', '.join(vacuous)})")
            lines = [
                " ".join(head),
                "",
                "| method | " + " | ".join(measures) + " |",
                "|---" * (len(measures) + 1) + "|",
            ]
            for method in methods:
                cells = [
                    next(
                        (
                            r
                            for r in sel
                            if r["method"] == method and (r["weights"] or r["measure"]) == m
                        ),
                        None,
                    )
                    for m in measures
                ]
                if any(c is not None for c in cells):
                    lines.append(f"| {method} | " + " | ".join(_cell(c) for c in cells) + " |")
            blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"
