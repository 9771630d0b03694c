"""``ksvd-bench suite`` cell by cell: on a Dask cluster, resumed from ``--out``, and the same
records as a run in one process (issue 33, section 6).

One loopback cluster of two single-threaded worker processes serves the module; the
``smoke`` collection (two tiny problems, 9 cells, no clock in the race) keeps it to seconds.
"""

import json
import os
import shutil
import signal
import time

import distributed  # the [dask] extra is part of [test]
import numpy as np
import pytest

from ksvd_bench.cli import main
from ksvd_bench.race.compare import run_compare
from ksvd_bench.race.suite import cells as cells_module
from ksvd_bench.race.suite import get_collection, run_suite
from ksvd_bench.race.suite import run as run_module
from ksvd_bench.race.suite.cells import (
    CELLS_DIR,
    cell_key,
    cell_path,
    finished_cells,
    race_settings,
)
from ksvd_bench.race.suite.cluster import check_cluster, local_cluster

# The smoke race provokes the solvers' certificate warnings on purpose (its Nystrom answers at
# small efforts are unreliable); the race counts them in the records, which are compared here.
pytestmark = pytest.mark.filterwarnings("ignore:.*cannot be trusted:RuntimeWarning")

#: fields of a row that are clocks (or ratios of clocks): everything else must match bit for bit
TIMES = {"seconds", "e2e_seconds", "kernel_seconds", "speedup_vs_rsvd", "cert_share"}


def _answers(rows):
    """Rows without their clocks (the sweep points without theirs); speedups as present or not."""
    out = []
    for row in rows:
        kept = {k: v for k, v in row.items() if k not in TIMES | {"history"}}
        kept["has_speedup"] = row.get("speedup_vs_rsvd") is not None
        kept["history"] = [
            {k: v for k, v in h.items() if k not in ("seconds", "cert_seconds")}
            for h in row["history"]
        ]
        out.append(kept)
    return out


def _verdicts(records):
    return [{k: v for k, v in r.items() if k not in ("seconds", "cert_seconds")} for r in records]


@pytest.fixture(scope="module")
def client():
    with local_cluster(2) as c:
        yield c


@pytest.fixture(scope="module")
def serial(tmp_path_factory):
    """The smoke collection raced in this process (the reference run of the module)."""
    out = tmp_path_factory.mktemp("serial")
    return run_suite("smoke", out=out, progress=False, report=False), out


def _saved(out):
    return json.loads((out / "suite.json").read_text())


def test_cells_merge_to_one_race_of_each_problem(serial):
    """Racing entry by entry gives the rows of one race of the whole problem."""
    result, _ = serial
    coll = get_collection("smoke")
    settings, methods = race_settings(coll, False)
    for spec in coll.problems:
        raced = spec.methods or methods
        whole = run_compare([spec.build(False, 0)], methods=raced, progress=False, **settings)
        whole = json.loads(json.dumps(whole.rows))  # as the suite's files hold them
        mine = [
            {k: v for k, v in r.items() if not k.startswith("collection")}
            for r in result.rows
            if r["dataset"] == spec.name
        ]
        assert [r["method"] for r in mine] == [r["method"] for r in whole]
        assert _answers(mine) == _answers(whole)


def test_cluster_run_equals_serial_and_resumes_finished_cells(serial, client, tmp_path):
    result, serial_out = serial
    # an earlier, interrupted run finished three cells: they are kept, never raced again
    kept = [("smoke-synthetic", "tsvd"), ("smoke-synthetic", "rsvd"), ("smoke-points", "rsvd")]
    for problem, method in kept:
        cell = json.loads(cell_path(serial_out, problem, method).read_text())
        cell["worker"] = {"host": "an earlier run", "pid": -1}
        target = cell_path(tmp_path, problem, method)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(cell))
    worker_pids = set(client.run(os.getpid).values())

    dask = run_suite("smoke", out=tmp_path, progress=False, report=False, client=client)

    assert len(dask.records) == len(result.records) == 56
    assert _verdicts(dask.records) == _verdicts(result.records)
    assert _answers(dask.rows) == _answers(result.rows)
    assert _verdicts(_saved(tmp_path)["records"]) == _verdicts(_saved(serial_out)["records"])
    cells = dask.meta["cells"]
    assert cells["n_cells"] == 9 and sorted(map(tuple, cells["resumed"])) == sorted(kept)
    assert cells["where"].startswith("Dask cluster at tcp://127.0.0.1:")
    for name, ran in cells["ran"].items():
        problem, method = name.split(" x ")
        if (problem, method) in kept:
            assert ran["worker"]["pid"] == -1  # the earlier run's cell, read back
        else:  # timed inside a worker process, not here
            assert ran["worker"]["pid"] in worker_pids and ran["worker"]["pid"] != os.getpid()
    for per_problem in dask.meta["compare"].values():  # one Numba and one BLAS thread each
        assert set(per_problem["threads"].values()) == {1}
        assert all(set(b) == {1} for b in per_problem["blas_threads"].values())
    # the workers let go of the last problem they built (a lambda: sent by value)
    held = client.run(
        lambda: len(__import__("ksvd_bench.race.suite.cells").race.suite.cells._BUILT)
    )
    assert set(held.values()) == {0}


def test_killed_worker_loses_no_finished_cell(serial, client, tmp_path, monkeypatch):
    """SIGKILL a busy worker once the first cell is saved: the run finishes, every cell is
    written once, and the records are the serial ones."""
    result, _ = serial
    saved, killed = [], []
    save = cells_module.save_cell

    def save_then_kill(out, cell):
        saved.append((cell["problem"], cell["method"]))
        kept = save(out, cell)
        if not killed:
            busy = [w for w, keys in client.processing().items() if keys]
            assert busy  # 8 cells to go: the victim holds some of them
            victim = busy[0]
            pid = client.run(os.getpid, workers=[victim])[victim]
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        return kept

    monkeypatch.setattr(run_module, "save_cell", save_then_kill)  # where the run saves
    dask = run_suite("smoke", out=tmp_path, progress=False, report=False, client=client)

    assert killed and sorted(saved) == sorted(set(saved)) and len(saved) == 9
    with pytest.raises(ProcessLookupError):
        os.kill(killed[0], 0)
    assert _verdicts(dask.records) == _verdicts(result.records)
    assert _answers(dask.rows) == _answers(result.rows)
    assert len(list((tmp_path / CELLS_DIR).rglob("*.json"))) == 9


def test_cli_scheduler_rerun_reads_every_finished_cell(serial, client, tmp_path, capsys):
    _, serial_out = serial
    shutil.copytree(serial_out / CELLS_DIR, tmp_path / CELLS_DIR)
    before = {p: p.stat().st_mtime_ns for p in (tmp_path / CELLS_DIR).rglob("*.json")}
    t0 = time.perf_counter()
    args = ["suite", "--collection", "smoke", "--out", str(tmp_path), "--no-progress"]
    assert main([*args, "--scheduler", client.scheduler.address]) == 0
    assert "cells: 9 (9 finished before, kept), Dask cluster at" in capsys.readouterr().out
    assert {p: p.stat().st_mtime_ns for p in before} == before  # none raced again
    assert _verdicts(_saved(tmp_path)["records"]) == _verdicts(_saved(serial_out)["records"])
    assert time.perf_counter() - t0 < 60


def test_cell_of_another_configuration_is_raced_again(serial):
    _, out = serial
    coll = get_collection("smoke")
    keys = {("smoke-points", "rsvd"): cell_key(coll, False, "smoke-points", "rsvd", 1)}
    assert list(finished_cells(out, keys)) == [("smoke-points", "rsvd")]
    for other in (
        cell_key(coll, True, "smoke-points", "rsvd", 1),  # --quick: one seed
        cell_key(coll, False, "smoke-points", "rsvd", 2),  # two threads
    ):
        assert finished_cells(out, {("smoke-points", "rsvd"): other}) == {}


def test_cli_scheduler_and_workers_exclude_each_other(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        main(
            ["suite", "--workers", "2", "--scheduler", "tcp://127.0.0.1:1", "--out", str(tmp_path)]
        )
    assert info.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["suite", "--workers", "0", "--out", str(tmp_path)])
    assert "argument --workers: expected a positive integer, got 0" in capsys.readouterr().err


def test_cluster_of_threaded_workers_is_refused():
    with (
        distributed.LocalCluster(
            n_workers=1, threads_per_worker=2, processes=False, dashboard_address=":0"
        ) as lc,
        distributed.Client(lc) as threaded,
    ):
        with pytest.raises(ValueError, match="--nthreads 1"):
            check_cluster(threaded)


def test_fresh_and_cached_references_are_the_same_numbers_in_the_same_order(tmp_path):
    """A cell reads the reference from the cache that another cell wrote: a fresh reference
    must score answers bit for bit as the cached one (F-ordered U did not: BLAS rounds
    differently)."""
    import solvers
    from ksvd_bench.metrics import eta
    from ksvd_bench.race.compare.run import problem_reference

    for spec in get_collection("smoke").problems:  # a dense G (LAPACK) and a lazy one (Krylov)
        problem = spec.build(False, 0)
        fresh = problem_reference(problem, 4, cache_dir=tmp_path)
        cached = problem_reference(spec.build(False, 0), 4, cache_dir=tmp_path)
        assert not fresh.info["cached"] and cached.info["cached"]
        for a, b in ((fresh.U, cached.U), (fresh.V, cached.V)):
            assert a.flags.c_contiguous and b.flags.c_contiguous
            assert np.array_equal(a, b)
        answer = solvers.svd(problem.G, 4, method="rsvd", random_state=1)
        assert eta(fresh, answer, weights="uniform", rank=4) == eta(
            cached, answer, weights="uniform", rank=4
        )
