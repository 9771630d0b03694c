"""Race a collection: cell by cell through ``compare``'s engine, then the suite's records.

:func:`run_suite` races the collection's cells, one per problem and entry
(:mod:`~ksvd_bench.race.suite.cells`: in this process, or on a Dask cluster through
:mod:`~ksvd_bench.race.suite.cluster`), keeping each in ``<out>/cells/`` as it finishes and
reading back those an earlier run finished; it merges each problem's cells into one
``compare`` record (``<out>/problems/<name>/compare.json``) and turns its rows into suite
records (:func:`records_from_rows`): one per (problem, solver,
measure, tolerance), the shape :mod:`ksvd_bench.report.profiles` consumes. It then writes
``suite.json``, the profile figures and, where the report package has it, ``report.html``.
"""

from __future__ import annotations

import datetime
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from ksvd_bench.race.suite.cells import (
    _slug,
    cell_key,
    finished_cells,
    forget_problems,
    merge_problem,
    race_cell,
    race_settings,
    save_cell,
)
from ksvd_bench.race.suite.cluster import check_cluster, race_on_cluster
from ksvd_bench.race.suite.collection import get_collection
from ksvd_bench.report import (
    check_out_dir,
    machine_info,
    profile_tables,
    progress_bar,
    row_status,
    save_figure,
    write_csv,
    write_json,
    write_report,
)
from ksvd_bench.report.figures import profiles_figure
from ksvd_bench.report.status import measure_label

__all__ = [
    "SuiteResult",
    "run_suite",
    "records_from_rows",
    "failures_table",
    "write_record",
    "SUITE_FILE",
]

SUITE_FILE = "suite.json"


@dataclass(repr=False)
class SuiteResult:
    """Outcome of :func:`run_suite` (the content of ``suite.json``, see the package's docstring).

    Attributes
    ----------
    collection : dict
        Name, version, quick, problems.
    records : list of dict
        One per (problem, solver, measure, eps).
    rows : list of dict
        Every ``compare`` row of every problem (with ``collection`` and ``collection_version``).
    failures : list of dict
        The records that did not solve, with the reason.
    meta : dict
        Command line, settings, machine, load, wall seconds per problem, references.
    paths : dict
        Files written.
    """

    collection: dict
    records: list
    rows: list
    failures: list
    meta: dict
    paths: dict = field(default_factory=dict)

    def __repr__(self):
        solved = sum(r["status"] == "converged" for r in self.records)
        return (
            f"SuiteResult(collection={self.collection['name']!r} "
            f"v{self.collection['version']}, quick={self.collection['quick']}, "
            f"problems={len(self.collection['problems'])}, records={len(self.records)} "
            f"({solved} solved), paths={sorted(self.paths)})"
        )

    def to_json(self):
        return {
            "collection": self.collection,
            "records": self.records,
            "failures": self.failures,
            "meta": self.meta,
            "rows": self.rows,
        }


def _entries(row):
    """Entries of G read at the solve: ``n_passes * N * M`` (the solvers' own accounting)."""
    passes, shape = row.get("n_passes"), row.get("shape")
    if passes is None or shape is None or not math.isfinite(passes):
        return None
    return float(passes) * float(shape[0]) * float(shape[1])


def _reason(row, status):
    """Why a row did not solve, in words (None when it did)."""
    if status == "converged":
        return None
    note = row.get("note") or ""
    if status == "stopped early, wrong":
        sv = row.get("sv_error")
        sv = f"sv error {sv:.3g}" if isinstance(sv, (int, float)) else "sv error unknown"
        return f"stopped early, wrong: {sv} > eps {row['eps']:g}" + (f"; {note}" if note else "")
    if status == "unreliable":
        return "unreliable: the solver's own check flagged the answer" + (
            f"; {note}" if note else ""
        )
    return note or "not converged"


def records_from_rows(rows, collection, *, skipped=(), skip_reason=None):
    """The suite records of one problem's ``compare`` rows.

    Parameters
    ----------
    rows : list of dict
        Rows of :func:`~ksvd_bench.race.compare.run_compare` (one problem).
    collection : dict
        ``{"name", "version"}`` recorded in every record.
    skipped : sequence of str
        Entries of the collection not raced on this problem: a record each, per measure and
        eps of ``rows``, unsolved with ``skip_reason``.

    Returns
    -------
    list of dict
        Records with the fields of :data:`ksvd_bench.report.profiles.SUITE_RECORD_FIELDS`
        plus ``shape``, ``n_seeds``, ``stop``, ``collection``, ``collection_version``.
        ``seconds`` is ``inf`` unless the status is ``"converged"``; ``passes`` and
        ``entries_read`` are those of the solve (recorded also when unsolved: the budget
        spent on the last effort tried).
    """
    out = []
    cells = {}
    for row in rows:
        if row.get("stop") == "n/a":
            status = "not converged"
        else:
            status = row_status(row)
        seconds = row.get("seconds")
        solved = status == "converged" and seconds is not None
        if status == "converged" and seconds is None:
            status = "not converged"
        rec = {
            "problem": row["dataset"],
            "solver": row["method"],
            "measure": measure_label(row),
            "eps": float(row["eps"]),
            "seconds": float(seconds) if solved else math.inf,
            "passes": row.get("n_passes"),
            "entries_read": _entries(row),
            "status": status,
            "reason": _reason(row, status),
            "shape": row.get("shape"),
            "n_seeds": row.get("n_seeds"),
            "stop": row.get("stop"),
            "collection": collection["name"],
            "collection_version": collection["version"],
        }
        out.append(rec)
        cells[(rec["measure"], rec["eps"])] = (row["dataset"], row.get("shape"))
    for method in skipped:
        for (measure, eps), (problem, shape) in cells.items():
            out.append(
                {
                    "problem": problem,
                    "solver": method,
                    "measure": measure,
                    "eps": eps,
                    "seconds": math.inf,
                    "passes": None,
                    "entries_read": None,
                    "status": "not converged",
                    "reason": skip_reason or "not raced",
                    "shape": shape,
                    "n_seeds": 0,
                    "stop": "skipped",
                    "collection": collection["name"],
                    "collection_version": collection["version"],
                }
            )
    return out


def failures_table(records):
    """The records that did not solve: problem, solver, measure, eps, status, reason."""
    keys = ("problem", "solver", "measure", "eps", "status", "reason")
    return [{k: r[k] for k in keys} for r in records if r["status"] != "converged"]


def _load():
    return list(os.getloadavg()) if hasattr(os, "getloadavg") else None


def _race_cells(todo, coll, quick, out, threads, command_line, client):
    """Race the cells ``todo`` (in this process, or on ``client``'s cluster) and write each to
    ``out`` as it finishes; yield each as its file reads back."""
    options = dict(cache_dir=out / "reference_cache", threads=threads, command_line=command_line)
    if client is not None:
        raced = race_on_cluster(client, coll.name, quick, todo, **options)
    else:
        raced = (race_cell(coll.name, quick, p, m, **options) for p, m in todo)
    try:
        for cell in raced:
            yield save_cell(out, cell)
    finally:
        forget_problems()


def run_suite(
    collection="default",
    *,
    out,
    quick=False,
    problems=None,
    threads=1,
    progress=True,
    command_line=None,
    report=True,
    client=None,
):
    """Race every problem of a collection and write its records, profiles and report.

    The work is cut into cells, one per problem and raced entry
    (:mod:`ksvd_bench.race.suite.cells`): raced in this process, one after the other, or on a
    Dask cluster (``client``). Each finished cell is written to ``<out>/cells/`` at once, and
    a rerun with the same ``out`` races only the cells not yet finished: an interrupted run
    resumes. The records do not depend on where the cells ran: the answers, verdicts and
    passes are bit for bit those of a run in this process; only the times differ.

    Parameters
    ----------
    collection : str, default="default"
        A name of :data:`ksvd_bench.race.suite.COLLECTIONS`.
    out : str or Path
        Output directory (checked before any work): ``suite.json``, ``suite_records.csv``,
        ``failures.csv``, ``profiles_<measure>_<eps>.png``, ``report.html`` (when the report
        package has its page writer), ``problems/<name>/compare.json`` (compare's record of
        each problem, per-seed runs included), ``cells/`` (one file per finished cell, read
        back by a rerun) and the reference cache. With a cluster on several machines it must
        be a path the workers share (they read and write the reference cache under it).
    quick : bool, default=False
        The collection's quick settings and sizes (one seed, shorter sweeps, smaller shaped
        problems, :attr:`Collection.quick_skips` left out).
    problems : sequence of str, optional
        Race only these problems of the collection (the record says which); default all.
    threads : int, default=1
        Numba and BLAS threads of every solver (set inside each cell).
    progress : bool, default=True
        A progress bar of the cells on stderr.
    command_line : str, optional
        The command that regenerates the run (kept in the record).
    report : bool, default=True
        Draw the profiles and write ``report.html``.
    client : distributed.Client, optional
        Race the cells on this client's Dask cluster (workers of one thread each, the same
        ``ksvd_bench``); :func:`ksvd_bench.race.suite.cluster.local_cluster` starts one on
        this machine. Default: in this process.

    Returns
    -------
    SuiteResult

    Raises
    ------
    ValueError
        An unknown collection or problem name, an ``out`` that cannot be written, a cluster
        without workers or with workers of several threads.

    Examples
    --------
    >>> from ksvd_bench.race.suite import run_suite
    >>> from ksvd_bench.race.suite.cluster import local_cluster
    >>> with local_cluster(2) as client:  # doctest: +SKIP
    ...     result = run_suite("smoke", out="results/smoke", client=client)
    """
    coll = get_collection(collection)
    specs = coll.problems_for(quick)
    if problems is not None:
        known = [p.name for p in coll.problems]
        for name in problems:
            if name not in known:
                raise ValueError(
                    f"problems must be drawn from collection {coll.name!r}'s {known}, got {name!r}"
                )
        specs = tuple(p for p in specs if p.name in set(problems))
    out = Path(check_out_dir(out, "out")).resolve()
    settings, methods = race_settings(coll, quick)
    where = "in process"
    if client is not None:
        n_workers = check_cluster(client)
        where = f"Dask cluster at {client.scheduler.address} ({n_workers} workers at the start)"
    record = coll.record(quick)
    record_head = {k: record[k] for k in ("name", "version", "quick")}
    if problems is not None:
        record["only"] = list(problems)
    raced = {s.name: tuple(m for m in (s.methods or methods) if m in methods) for s in specs}
    keys = {
        (s.name, m): cell_key(coll, quick, s.name, m, threads) for s in specs for m in raced[s.name]
    }
    t_start = time.perf_counter()
    load = {"before": _load()}
    cells = finished_cells(out, keys)
    resumed = sorted(cells)
    todo = [cell for cell in keys if cell not in cells]
    bar = progress_bar(total=len(keys), desc="suite", unit="cells", enabled=progress)
    with bar:
        bar.update(len(cells))
        for cell in _race_cells(todo, coll, quick, out, threads, command_line, client):
            cells[(cell["problem"], cell["method"])] = cell
            bar.set_postfix_str(f"{cell['problem']}: {cell['method']}")
            bar.update(1)
    load["after"] = _load()
    rows, records, infos, seconds, metas = [], [], [], {}, {}
    for spec in specs:
        p_cells = [cells[(spec.name, m)] for m in raced[spec.name]]
        p_rows, p_runs, p_meta = merge_problem(p_cells)
        for row in p_rows:
            row.update(collection=coll.name, collection_version=coll.version)
        # compare's record of the problem, per-seed runs included; the one page is the
        # suite's (a page per problem would draw every figure twice)
        write_json(
            out / "problems" / spec.name / "compare.json",
            {"meta": {**p_meta, "collection": record_head}, "rows": p_rows, "runs": p_runs},
        )
        rows += p_rows
        skipped = [m for m in methods if m not in raced[spec.name]]
        records += records_from_rows(p_rows, record, skipped=skipped, skip_reason=spec.skip_reason)
        infos.append(
            {**p_cells[0]["info"], "description": spec.description, "methods_skipped": skipped}
        )
        metas[spec.name] = {
            "max_effort": p_meta["max_effort"],
            "seeds": p_meta["seeds"],
            # the counts in force inside each cell, where it ran
            "threads": {c["method"]: c["meta"]["threads"] for c in p_cells},
            "blas_threads": {c["method"]: c["meta"]["blas_threads"] for c in p_cells},
        }
        seconds[spec.name] = sum(c["seconds"] for c in p_cells)
    record["problems"] = infos
    meta = {
        "command": "suite",
        "command_line": command_line,
        "settings": {**settings, "methods": methods},
        "threads": threads,
        "machine": machine_info(),
        "load_average": load,
        "wall_seconds": time.perf_counter() - t_start,
        # the cells' own wall times, summed per problem (on a cluster, in their workers)
        "wall_seconds_per_problem": seconds,
        "compare": metas,
        "cells": {
            "where": where,
            "n_cells": len(keys),
            "resumed": [list(c) for c in resumed],
            "ran": {
                f"{p} x {m}": {
                    "seconds": c["seconds"],
                    "worker": c["worker"],
                    "finished_at": c["finished_at"],
                }
                for (p, m), c in sorted(cells.items())
            },
        },
        "record_shape": "see ksvd_bench.race.suite (module docstring)",
        "finished_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    result = SuiteResult(
        collection=record, records=records, rows=rows, failures=failures_table(records), meta=meta
    )
    result.paths = write_suite_files(result, out, report=report)
    return result


def write_suite_files(result, out, *, report=True):
    """``suite.json``, the records and failures as CSV, the profile figures and the page."""
    out = Path(out)
    paths = {
        "json": write_json(out / SUITE_FILE, result.to_json()),
        "records_csv": write_csv(out / "suite_records.csv", result.records),
        "failures_csv": write_csv(out / "failures.csv", result.failures),
    }
    if report:
        paths.update(_draw(result, out))
    return {k: str(v) for k, v in paths.items() if v is not None}


def write_record(result, path):
    """Keep a suite run as a record for the repository: its collection, records, failures,
    meta (machine, load, the regenerating command) and rows without their sweeps. Written
    atomically; returns the path."""
    recorded = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    payload = {
        **result.to_json(),
        "recorded_at": recorded,
        "rows": [{k: v for k, v in r.items() if k != "history"} for r in result.rows],
    }
    return write_json(path, payload)


def _draw(result, out):
    """The profile figures (one PNG per measure and eps) and ``report.html`` where the report
    package provides its page writer."""
    paths = {}
    tables = profile_tables(result.records)
    coll = result.collection
    for (measure, eps), table in tables.items():
        fig = profiles_figure(
            table,
            title=f"{coll['name']} v{coll['version']}"
            f"{' (quick)' if coll['quick'] else ''}: {measure}, "
            f"eps = {eps:g}, {len(table['problems'])} problems",
        )
        paths[f"profile {measure} {eps:g}"] = save_figure(
            fig, out / f"profiles_{_slug(measure)}_{eps:g}.png"
        )
    paths["report"] = write_report(
        out,
        rows=result.rows,
        meta=result.meta,
        records=result.records,
        title=f"ksvd-bench suite: {coll['name']} v{coll['version']}",
        headline_extra=(
            f"collection {coll['name']} version "
            f"{coll['version']}"
            f"{' (quick)' if coll['quick'] else ''}: "
            f"{len(coll['problems'])} problems",
        ),
    )
    return paths
