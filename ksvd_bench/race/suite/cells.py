"""The suite's unit of work, a cell: one raced entry on one problem of a collection.

:func:`race_cell` races a cell, in this process or on a Dask worker (the same function: a
worker looks the collection up by name, so it needs the same ``ksvd_bench``). The caller keeps
each cell as ``<out>/cells/<problem>/<entry>.json`` the moment it finishes (:func:`save_cell`);
a rerun with the same ``out`` reads the finished cells back (:func:`finished_cells`) and races
only the rest. A cell is reused only when its ``key`` (collection, version, quick, problem,
entry, settings, threads) is the run's: a cell of another configuration is raced again and
overwritten. :func:`merge_problem` assembles a problem's cells into what one race of the whole
problem gives: compare's rows (the exact structured rows last, the speedups over RSVD taken
across cells), the per-seed runs, and the record of its reference.

Why a cell's answers do not depend on where it runs: it is one
:func:`~ksvd_bench.race.compare.run_compare` of one entry, whose per-run seeds derive from the
collection's ``random_state`` alone; every solver runs at the same thread count (one by
default, Numba's and BLAS's, set inside the cell); the reference is read from the cache under
``out`` (:func:`prepare_problem` writes it once per problem), and a fresh reference and a
cached one are the same numbers in the same memory order; and every cell goes through its
JSON file before it is merged, on every path. A cell's times are its worker's.
"""

from __future__ import annotations

import datetime
import json
import os
import socket
import time
from pathlib import Path

from ksvd_bench.race.common import STRUCTURED_NAME
from ksvd_bench.race.compare import run_compare
from ksvd_bench.race.compare.cells import add_speedups
from ksvd_bench.race.compare.run import problem_reference
from ksvd_bench.race.suite.collection import get_collection
from ksvd_bench.report import write_json

__all__ = [
    "CELLS_DIR",
    "race_settings",
    "cell_key",
    "race_cell",
    "prepare_problem",
    "forget_problems",
    "cell_path",
    "save_cell",
    "finished_cells",
    "merge_problem",
]

#: the directory under ``out`` that holds one JSON file per finished cell
CELLS_DIR = "cells"

#: the last problem built in this process, ``{(collection, version, quick, name): Problem}``:
#: consecutive cells of one problem share it; one at a time (PubMed's dense G is 3 GB)
_BUILT = {}


def race_settings(collection, quick):
    """``(settings, methods)``: the keyword arguments of ``run_compare`` for a (quick) run of
    ``collection`` (a :class:`~ksvd_bench.race.suite.Collection`) and its raced entries."""
    settings = dict(collection.quick_settings if quick else collection.settings)
    return settings, tuple(settings.pop("methods"))


def _spec(collection, name):
    return next(p for p in collection.problems if p.name == name)


def _slug(text):
    return "".join(c if c.isalnum() or c in "-." else "_" for c in str(text)).strip("_")


def cell_key(collection, quick, problem, method, threads):
    """What must match for a finished cell to be reused (as its JSON file holds it)."""
    settings, _ = race_settings(collection, quick)
    return json.loads(  # as its file reads back: tuples as lists
        json.dumps(
            {
                "collection": collection.name,
                "version": collection.version,
                "quick": bool(quick),
                "problem": problem,
                "method": method,
                "settings": settings,
                "threads": threads,
            }
        )
    )


def _problem(collection, quick, name):
    """The problem ``name`` of the collection, built once per process while its cells run."""
    key = (collection.name, collection.version, bool(quick), name)
    if key not in _BUILT:
        _BUILT.clear()  # let the previous problem go before the next is built
        settings, _ = race_settings(collection, quick)
        _BUILT[key] = _spec(collection, name).build(quick, settings["random_state"])
    return _BUILT[key]


def forget_problems():
    """Drop the problem this process keeps for its next cell (see :func:`race_cell`)."""
    _BUILT.clear()


def prepare_problem(collection, quick, problem, *, cache_dir):
    """Build a problem and write its reference into ``cache_dir``; returns the seconds taken.

    Run once per problem before its cells, so that cells racing at once on several workers
    read the reference instead of each computing it.
    """
    t0 = time.perf_counter()
    coll = get_collection(collection)
    settings, _ = race_settings(coll, quick)
    problem_reference(_problem(coll, quick, problem), settings["rank"], cache_dir=cache_dir)
    return time.perf_counter() - t0


def problem_info(problem, result):
    """A problem's entry of the suite's collection record (``result``: its ``run_compare``)."""
    ref = result.meta["reference"][problem.name]
    return {
        "name": problem.name,
        "shape": list(problem.shape),
        "kernel": problem.kernel,
        "gamma": problem.gamma,
        "lazy": problem.is_lazy,
        "source": problem.source,
        "points": problem.points is not None,
        "structured": problem.supports_structured,
        "kernel_seconds": problem.kernel_seconds,
        "reference": {
            k: ref.get(k)
            for k in (
                "method",
                "seconds_not_charged",
                "cached",
                "n_triplets",
                "note",
                "estimated_error",
            )
            if k in ref
        },
    }


def race_cell(
    collection, quick, problem, method, *, cache_dir, threads=1, command_line=None, after=None
):
    """Race one entry of a collection on one of its problems.

    Parameters
    ----------
    collection : str
        A name of :data:`~ksvd_bench.race.suite.COLLECTIONS` (looked up where the cell runs).
    quick : bool
        The collection's quick settings and sizes.
    problem, method : str
        The problem and the entry.
    cache_dir : str or Path
        The reference cache (``<out>/reference_cache``).
    threads : int, default=1
        Numba and BLAS threads of the solvers, set inside the cell.
    command_line : str, optional
        Kept in the cell's compare record.
    after : object, optional
        Ignored: a Dask future passed here makes the cell wait for it (the problem's
        :func:`prepare_problem`).

    Returns
    -------
    dict
        ``{"key", "problem", "method", "rows", "runs", "meta", "info", "seconds",
        "finished_at", "worker": {"host", "pid"}}``: ``rows`` and ``runs`` are
        ``run_compare``'s, ``meta`` its record, ``info`` the problem's entry of the suite's
        collection record, ``seconds`` the cell's wall time in its process.
    """

    t0 = time.perf_counter()
    coll = get_collection(collection)
    settings, _ = race_settings(coll, quick)
    built = _problem(coll, quick, problem)
    result = run_compare(
        [built],
        methods=(method,),
        threads=threads,
        cache_dir=cache_dir,
        progress=False,
        command_line=command_line,
        **settings,
    )
    return {
        "key": cell_key(coll, quick, problem, method, threads),
        "problem": problem,
        "method": method,
        "rows": result.rows,
        "runs": result.runs,
        "meta": result.meta,
        "info": problem_info(built, result),
        "seconds": time.perf_counter() - t0,
        "finished_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "worker": {"host": socket.gethostname(), "pid": os.getpid()},
    }


def cell_path(out, problem, method):
    """``<out>/cells/<problem>/<entry>.json``."""
    return Path(out) / CELLS_DIR / _slug(problem) / f"{_slug(method)}.json"


def save_cell(out, cell):
    """Write a finished cell atomically; returns it as the file reads back (what is merged)."""
    path = write_json(cell_path(out, cell["problem"], cell["method"]), cell)
    return json.loads(Path(path).read_text())


def finished_cells(out, keys):
    """The cells already finished under ``out``: ``{(problem, entry): cell}`` for each of
    ``keys`` (``{(problem, entry): cell_key(...)}``) whose file holds a cell of that key.

    A file that does not parse (a cell cut short by a crash is never one: files are written
    atomically) or holds another key is raced again.
    """
    done = {}
    for (problem, method), key in keys.items():
        path = cell_path(out, problem, method)
        try:
            cell = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(cell, dict) and cell.get("key") == key:
            done[(problem, method)] = cell
    return done


def merge_problem(cells):
    """One problem's cells, in the collection's entry order, as one race of the problem.

    Returns
    -------
    rows : list of dict
        The cells' rows in entry order, the exact structured rows last, the speedups over
        RSVD (:func:`~ksvd_bench.race.compare.cells.add_speedups`) across cells.
    runs : list of dict
        The per-seed runs in entry order.
    meta : dict
        The first cell's compare record, with the entries, their options, effort caps and
        wall seconds of every cell, and the warm-up warnings summed.
    """
    rows = [dict(r) for c in cells for r in c["rows"]]
    # stable: entry order kept, the structured rows after every entry, as one race adds them
    rows.sort(key=lambda r: r["method"] == STRUCTURED_NAME)
    add_speedups(rows)
    runs = [r for c in cells for r in c["runs"]]
    first = cells[0]["meta"]
    (name,) = first["reference"]  # the problem's own name (one problem per cell)
    reference = dict(first["reference"][name])
    reference["warm_up_warnings"] = sum(
        c["meta"]["reference"][name].get("warm_up_warnings") or 0 for c in cells
    )
    meta = {
        **first,
        "methods": [c["method"] for c in cells],
        "method_options": {k: v for c in cells for k, v in c["meta"]["method_options"].items()},
        "max_effort": {
            name: {k: v for c in cells for k, v in c["meta"]["max_effort"][name].items()}
        },
        "wall_seconds_per_method": {
            name: {
                k: v for c in cells for k, v in c["meta"]["wall_seconds_per_method"][name].items()
            }
        },
        "reference": {name: reference},
    }
    return rows, runs, meta
