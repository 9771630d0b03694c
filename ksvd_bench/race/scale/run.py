"""The scale study's orchestration: :func:`run_scale` checks its arguments, walks the parts,
sizes and methods (each cell through :class:`~ksvd_bench.race.scale.cells.CellRunner`), fits
the exponents and writes the files. The study is described in :mod:`ksvd_bench.race.scale`.
"""

from __future__ import annotations

import math
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ksvd_bench.race.scale.cells import CellRunner, score_cell
from ksvd_bench.race.scale.files import load_merge_base, merge_rows, write_scale
from ksvd_bench.race.scale.fit import fit_all
from ksvd_bench.race.scale.problems import (
    DEFAULT_METHODS,
    DEFAULT_PARTS,
    DEFAULT_RANK,
    DEFAULT_SIZES,
    DEFAULT_TIME_LIMIT,
    DENSE_REFERENCE_MAX_ENTRIES,
    DEVICES,
    PARTS,
    POINT_PARTS,
    POINTS_DIM,
    REFERENCE_KRYLOV,
    REFERENCE_TARGET_ERROR,
    ProblemSpec,
    effort_label,
)
from ksvd_bench.race.scale.runners import RUNNERS
from ksvd_bench.report import machine_info, progress_bar
from ksvd_bench.threads import DEFAULT_THREADS, check_threads, solver_threads

__all__ = ["ScaleResult", "run_scale"]


# --------------------------------------------------------------------------- the study


@dataclass
class ScaleResult:
    """Outcome of :func:`run_scale`.

    Attributes
    ----------
    rows : list of dict
        One per cell (:data:`ROW_FIELDS`); ``status`` is ``"ok"``, ``"timeout"``,
        ``"error"``, ``"memory"`` (over the memory limit) or ``"skipped"`` (over a limit at
        a smaller size).
    exponents : list of dict
        One per (part, method): ``exponent`` (slope of log seconds against log N, None where
        the cells cannot support a fit), ``solve_exponent`` (the same for the solve alone),
        ``fit_note`` (what was fitted, or why not), ``n_points``, ``sizes``.
    references : list of dict
        One per (part, size): how its reference was made (``label``, ``kind``, seconds).
    meta : dict
        Settings, efforts, machine.
    paths : dict
        Files written (``"csv"``, ``"json"``, ``"exponents_csv"``, ``"png"``).
    """

    rows: list
    exponents: list
    references: list
    meta: dict
    paths: dict = field(default_factory=dict)


def _check_choice_list(values, allowed, name):
    values = tuple(values)
    bad = [v for v in values if v not in allowed]
    if bad or not values:
        raise ValueError(f"{name} must be a non-empty list of {tuple(allowed)}, got {values!r}")
    return values


def _check_settings(parts, sizes, methods, rank, time_limit, dtype, device="cpu"):
    if isinstance(parts, str):
        parts = {"both": DEFAULT_PARTS, "all": PARTS}.get(parts, (parts,))
    parts = _check_choice_list(parts, PARTS, "parts")
    if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)) or rank < 1:
        raise ValueError(f"rank must be a positive int, got {rank!r}")
    if "c" in parts and rank < 2:
        raise ValueError(
            f"rank must be >= 2 for part c: the rare-cluster family has rank "
            f"clusters, some rare and some common, got {rank}"
        )
    sizes = dict(sizes or {})
    methods = dict(methods or {})
    for part in parts:
        sz = tuple(int(n) for n in sizes.get(part, DEFAULT_SIZES[part]))
        if not sz or any(n < 4 * rank for n in sz):
            raise ValueError(f"sizes of part {part} must be >= 4 * rank = {4 * rank}, got {sz!r}")
        sizes[part] = tuple(sorted(set(sz)))
        ms = _check_choice_list(methods.get(part, DEFAULT_METHODS[part]), RUNNERS, "methods")
        wrong = [mm for mm in ms if part not in RUNNERS[mm].parts]
        if wrong:
            raise ValueError(f"methods {wrong} do not apply to part {part}")
        methods[part] = ms
    if time_limit is not None and not (math.isfinite(time_limit) and time_limit > 0):
        raise ValueError(f"time_limit must be a finite positive number, got {time_limit!r}")
    if np.dtype(dtype) not in (np.float32, np.float64):
        raise ValueError(f"dtype must be float32 or float64, got {dtype!r}")
    if device not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES}, got {device!r}")
    return parts, sizes, methods


def _check_memory_limit(memory_limit):
    """Bytes; None means half the physical memory."""
    if memory_limit is None:
        # psutil: optional (it comes with ksvd-bench[dask] and [test]), not a core dependency
        import psutil

        return int(psutil.virtual_memory().total // 2)
    if (
        isinstance(memory_limit, bool)
        or not isinstance(memory_limit, (int, float, np.number))
        or not (math.isfinite(memory_limit) and memory_limit > 0)
    ):
        raise ValueError(f"memory_limit must be a positive number of bytes, got {memory_limit!r}")
    return int(memory_limit)


def _machine_at(threads):
    """:func:`machine_info` under the thread counts the cells ran with, as the other studies."""
    with solver_threads(threads):
        return machine_info()


def run_scale(
    parts="both",
    *,
    sizes=None,
    methods=None,
    rank=DEFAULT_RANK,
    random_state=0,
    threads=DEFAULT_THREADS,
    time_limit=DEFAULT_TIME_LIMIT,
    memory_limit=None,
    dtype="float64",
    device="cpu",
    reference="auto",
    dense_reference_max_entries=DENSE_REFERENCE_MAX_ENTRIES,
    isolate=True,
    client=None,
    scheduler=None,
    out=None,
    merge=False,
    progress=True,
):
    """Measure every method's cost against the problem size, and write the results.

    Parameters
    ----------
    parts : {"a", "b", "c", "both", "all"} or sequence of them, default="both"
        ``"both"``: a and b (graphs, clustered points); ``"all"``: a, b and c (rare
        clusters).
    sizes : dict, optional
        part -> sizes N (M = N); default :data:`DEFAULT_SIZES`. Each at least ``4 * rank``.
    methods : dict, optional
        part -> names in :data:`RUNNERS`; default :data:`DEFAULT_METHODS`.
    rank : int, default=20
        r; the points of parts b and c have r clusters (c: 30% of them rare).
    random_state : int, default=0
        Seed of the data (every method sees the same problem) and of the methods.
    threads : int or None, default=1
        Numba and BLAS threads of every cell, at most Numba's pool (None: Numba's current
        count). One by default, as in every study (steady timings on a shared machine).
    time_limit : float or None, default=600
        Wall-clock seconds per cell (process start, warm-up and data included); a cell over
        it is stopped and reported ``"timeout"``, and the method is skipped at larger sizes
        of that part. A reference gets 4x as long.
    memory_limit : float or None, optional
        Resident bytes per cell (and reference); a cell over it is stopped and reported
        ``"memory"``, and the method skipped at larger sizes. Default: half the machine's
        physical memory (so that one cell cannot exhaust a shared machine). Isolated cells
        only.
    dtype : {"float64", "float32"}, default="float64"
        Storage dtype of the sources.
    device : {"cpu", "cuda"}, default="cpu"
        Where the lazy kernel of parts b and c runs
        (``KernelSource.from_points(..., device=...)``); part a's structured operator runs
        on the CPU either way (and RPCholesky needs the points on the CPU).
    reference : {"auto", "none"}, default="auto"
        ``"none"`` skips the references (no subspace errors).
    dense_reference_max_entries : int, default=25e6
        ``N * M`` up to which a lazy problem's reference is a dense LAPACK SVD; above it,
        block Krylov (:data:`REFERENCE_KRYLOV`, labelled, with its estimated error).
    isolate : bool, default=True
        Run each cell and reference in a fresh process (peak RSS per cell, time limits).
        In process (False) peak RSS is not measured and time limits are not enforced.
    client : distributed.Client, optional
        Passed to the sources and runners (isolated cells connect to its scheduler).
    scheduler : str, optional
        Address of a Dask scheduler for the cells, when no ``client`` is given.
    out : str or Path, optional
        Directory for ``scale.csv``, ``scale.json``, ``scale_exponents.csv``, ``scale.png``
        and the reference cache (``reference_cache/``, reused by later runs).
    merge : bool, default=False
        Keep the cells of an earlier ``scale.json`` in ``out`` that this run does not redo
        (e.g. rerun only the largest cells), and fit the exponents on all of them. The file
        is read and checked before any cell is computed: an unreadable one, or one made for
        another rank, seed, dtype or device, is refused (ValueError).
    progress : bool, default=True
        Progress bar on stderr.

    Returns
    -------
    ScaleResult
    """
    parts, sizes, methods = _check_settings(parts, sizes, methods, rank, time_limit, dtype, device)
    if reference not in ("auto", "none"):
        raise ValueError(f"reference must be 'auto' or 'none', got {reference!r}")
    threads = check_threads(threads, "threads")
    memory_limit = _check_memory_limit(memory_limit)
    dtype = np.dtype(dtype).name
    seed = int(random_state)
    # an earlier file to merge onto is read and checked now, not after the cells
    earlier = (
        load_merge_base(out, {"rank": rank, "seed": seed, "dtype": dtype, "device": device})
        if merge and out is not None
        else None
    )
    n_cells = sum(len(sizes[p]) * len(methods[p]) for p in parts)
    cache_dir = None if out is None else Path(out) / "reference_cache"
    rows, references = [], []
    with (
        tempfile.TemporaryDirectory(prefix="ksvd_scale_") as workdir,
        progress_bar(total=n_cells, desc="scale", enabled=progress, unit="cell") as bar,
    ):
        runner = CellRunner(
            threads=threads,
            time_limit=time_limit,
            memory_limit=memory_limit,
            isolate=isolate,
            client=client,
            scheduler=scheduler,
            dense_max=dense_reference_max_entries,
            workdir=workdir,
            reference=reference,
        )
        for part in parts:
            gave_up = {}
            for n in sizes[part]:
                spec = ProblemSpec(
                    part, n, n, rank, seed, dtype, device if part in POINT_PARTS else "cpu"
                )
                bar.set_postfix_str(f"{part} N={n} reference")
                ref, ref_info = runner.reference_for(spec, cache_dir)
                references.append({"part": part, "n": n, **ref_info})
                for name in methods[part]:
                    bar.set_postfix_str(f"{part} N={n} {name}")
                    if name in gave_up:
                        row = {
                            **spec.fields,
                            "method": name,
                            "effort": effort_label(RUNNERS[name].effort(spec)),
                            "status": "skipped",
                            "error": f"{gave_up[name]} at a smaller size",
                        }
                    else:
                        row, answer = runner.cell(spec, RUNNERS[name], seed)
                        if row["status"] in ("timeout", "memory"):
                            gave_up[name] = row["status"]
                        if answer is not None and ref is not None:
                            score_cell(row, answer, ref, rank)
                    row["reference"] = ref_info["label"]
                    rows.append(row)
                    bar.update(1)
    rows, references = merge_rows(earlier, rows, references)
    meta = {
        "command": "scale",
        "parts": list(parts),
        "sizes": {p: list(sizes[p]) for p in parts},
        "methods": {p: list(methods[p]) for p in parts},
        "rank": rank,
        "seed": seed,
        "threads": threads,
        "time_limit": time_limit,
        "memory_limit": memory_limit,
        "dtype": dtype,
        "device": device,
        "isolate": bool(isolate),
        "reference": reference,
        "dense_reference_max_entries": dense_reference_max_entries,
        "reference_krylov": dict(REFERENCE_KRYLOV),
        "reference_target_error": REFERENCE_TARGET_ERROR,
        "points_dim": POINTS_DIM,
        "kernels": {
            "a": "sne, centred, kernel_source(A) (structured)",
            "b": "sne, uncentred, KernelSource.from_points, gamma from make_clustered_points",
            "c": "sne, uncentred, KernelSource.from_points, gamma from "
            "make_rare_clusters (r clusters, 30% rare, weight 0.02)",
        },
        "efforts": {
            p: {
                m: effort_label(RUNNERS[m].effort(ProblemSpec(p, n, n, rank, seed)))
                for m in methods[p]
                for n in sizes[p][-1:]
            }
            for p in parts
        },
        "dask": None
        if (client is None and scheduler is None)
        else (scheduler or client.scheduler.address),
        "merged": bool(merge),
        "machine": _machine_at(threads),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }
    result = ScaleResult(rows=rows, exponents=fit_all(rows), references=references, meta=meta)
    if out is not None:
        result.paths = write_scale(result, out)
    return result
