"""The asv suites load and their call signatures are valid (``asv check``), offline.

``asv check`` imports every benchmark module in the environment asv runs in
(``-E existing:<this python>``, nothing is installed or downloaded) and checks the argument
counts of setup/setup_cache/benchmark functions, without running any benchmark.
"""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import asv
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "asv.conf.json"


def _run(args, tmp_path):
    env = dict(os.environ)
    # asv looks for ~/.asv-machine.json; keep the user's home untouched.
    env["HOME"] = str(tmp_path)
    return subprocess.run(
        [sys.executable, "-m", "asv", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


def test_config_is_usable_offline():
    text = CONFIG.read_text()
    # asv.conf.json allows // comments; strip them before parsing as plain JSON.
    conf = json.loads(
        "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//"))
    )
    assert conf["benchmark_dir"] == "benchmarks"
    assert conf["environment_type"] == "existing"
    assert (ROOT / conf["benchmark_dir"] / "__init__.py").exists()


def test_asv_check_passes(tmp_path):
    proc = _run(["check", "--config", str(CONFIG), "-E", f"existing:{sys.executable}"], tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "No problems found" in out, out


def _discover(tmp_path, full=False):
    """asv's own discovery of the suites: {benchmark name: its parameter lists}."""
    runner = Path(asv.__file__).parent / "benchmark.py"
    result = tmp_path / f"discovered_{int(full)}.json"
    env = {k: v for k, v in os.environ.items() if k != "KSVD_BENCH_ASV_FULL"}
    if full:
        env["KSVD_BENCH_ASV_FULL"] = "1"
    proc = subprocess.run(
        [sys.executable, str(runner), "discover", str(ROOT / "benchmarks"), str(result)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return {b["name"]: b["params"] for b in json.loads(result.read_text())}


def test_asv_discovers_every_suite(tmp_path):
    names = set(_discover(tmp_path))
    expected = {
        "bench_import.timeraw_import_and_jit_cold",
        "bench_kernels_asv.KernelBuild.time_ksvd_kernel",
        "bench_kernels_asv.KernelBuild.peakmem_ksvd_kernel",
        "bench_solvers.TimeSolve.time_solve",
        "bench_solvers.PubMedEndToEndMemory.peakmem_end_to_end",
        "bench_tolerance.TimeToTolerance.time_solve_at_tolerance",
        "bench_tolerance.TrackTolerance.track_effort",
        "bench_tolerance.TrackTolerance.track_eta",
        "bench_tolerance.TrackTolerance.track_speedup_vs_rsvd",
        "bench_tolerance.TrackTolerance.track_sv_error",
        "bench_datasets.TimeDatasets.time_load_graph_pubmed",
        "bench_datasets.TimeDatasets.time_make_directed_graph_20k",
    }
    assert expected <= names, sorted(expected - names)


def _n_cells(params):
    return int(np.prod([len(p) for p in params])) if params else 1


def test_default_grids_are_the_small_ones_and_the_full_ones_are_behind_the_env_var(tmp_path):
    small, full = _discover(tmp_path), _discover(tmp_path, full=True)
    assert set(small) == set(full)
    solve = "bench_solvers.TimeSolve.time_solve"
    assert small[solve][0] == ["'cora'"] and full[solve][0] == ["'cora'", "'pubmed'"]
    tol = "bench_tolerance.TimeToTolerance.time_solve_at_tolerance"
    assert small[tol][1] == ["0.1"] and full[tol][1] == ["0.1", "0.01"]
    assert _n_cells(small[tol]) == 6 * 1 * 2 and _n_cells(full[tol]) == 6 * 2 * 3
    total_small = sum(_n_cells(p) for p in small.values())
    total_full = sum(_n_cells(p) for p in full.values())
    assert total_small < total_full / 2, (total_small, total_full)


def _common():
    # benchmarks/ is not an installed package: load its shared module from the file
    spec = importlib.util.spec_from_file_location("_asv_common", ROOT / "benchmarks" / "common.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _low_rank_problem(seed, n_rows, decay):
    """``G = U0 diag(s0) V0^T`` of rank 30, 40 columns, ``s0 = decay^i``."""
    rng = np.random.default_rng(seed)
    U0, _ = np.linalg.qr(rng.standard_normal((n_rows, 30)))
    V0, _ = np.linalg.qr(rng.standard_normal((40, 30)))
    s0 = decay ** np.arange(30)
    return (U0 * s0) @ V0.T, U0, s0, V0


def test_check_accuracy_refuses_right_vectors_with_wrong_singular_values():
    from solvers import SVDResult

    common = _common()
    G, U0, s0, V0 = _low_rank_problem(0, 60, 0.8)
    r = common.RANK
    ref = SVDResult(U=U0[:, :r], s=s0[:r], V=V0[:, :r], info={})
    assert common.check_accuracy(ref, ref, 1e-8, "singular_values", "exact") <= 1e-12
    # exact vectors, values at 60 %: eta and the low-rank error see nothing wrong
    wrong = SVDResult(U=U0[:, :r], s=0.6 * s0[:r], V=V0[:, :r], info={})
    assert common.accuracy(G, ref, wrong, "singular_values") <= 1e-12
    assert common.accuracy(G, ref, wrong, "lowrank") <= 1e-12
    assert common.sv_error(ref, wrong) == pytest.approx(0.4)
    for measure in ("singular_values", "lowrank"):
        with pytest.raises(common.MissedTolerance, match="singular-value error 0.4"):
            common.check_accuracy(ref, wrong, 0.1, measure, "wrong values", G=G)
    # too few values can never pass
    short = SVDResult(U=U0[:, :3], s=s0[:3], V=V0[:, :3], info={})
    assert common.sv_error(ref, short) == np.inf


def test_meets_is_the_race_rule():
    """benchmarks' ``meets`` is the race's verdict: an answer its solver flagged unreliable
    misses, whatever its measure (it was timed before, issue 34)."""
    from ksvd_bench.race.common import meets as race_meets
    from solvers import SVDResult

    common = _common()
    G, U0, s0, V0 = _low_rank_problem(1, 50, 0.7)
    r = common.RANK
    ref = SVDResult(U=U0[:, :r], s=s0[:r], V=V0[:, :r])
    for reliable, expected in ((True, True), (None, True), (False, False)):
        ans = SVDResult(U=U0[:, :r], s=s0[:r], V=V0[:, :r], info={"reliable": reliable})
        ok, value, err = common.meets(G, ref, ans, 1e-8, "lowrank")
        assert ok is expected and value <= 1e-8 and err <= 1e-12
        entry = {"value": value, "sv_error": err, "triplet_residual": np.nan}
        entry.update(n_warnings=0, warnings=[], reliable=reliable is not False)
        assert race_meets(entry, 1e-8) is ok
    with pytest.raises(common.MissedTolerance, match="reliable=False"):
        common.check_accuracy(ref, ans, 1e-8, "lowrank", "flagged", G=G)


def test_asv_machine_file_is_written_in_a_private_home(tmp_path):
    proc = _run(["machine", "--yes", "--config", str(CONFIG)], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / ".asv-machine.json").exists()
