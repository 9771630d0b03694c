"""The asv suites load and their call signatures are valid (``asv check``), offline.

``asv check`` imports every benchmark module in the environment asv runs in
(``-E existing:<this python>``, nothing is installed or downloaded) and checks the argument
counts of setup/setup_cache/benchmark functions, without running any benchmark.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import asv

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "asv.conf.json"


def _run(args, tmp_path):
    env = dict(os.environ)
    # asv looks for ~/.asv-machine.json; keep the user's home untouched.
    env["HOME"] = str(tmp_path)
    return subprocess.run(
        [sys.executable, "-m", "asv", *args], cwd=ROOT, env=env, capture_output=True,
        text=True, timeout=240, check=False)


def test_config_is_usable_offline():
    text = CONFIG.read_text()
    # asv.conf.json allows // comments; strip them before parsing as plain JSON.
    conf = json.loads("\n".join(line for line in text.splitlines()
                                if not line.lstrip().startswith("//")))
    assert conf["benchmark_dir"] == "benchmarks"
    assert conf["environment_type"] == "existing"
    assert (ROOT / conf["benchmark_dir"] / "__init__.py").exists()


def test_asv_check_passes(tmp_path):
    proc = _run(["check", "--config", str(CONFIG), "-E", f"existing:{sys.executable}"],
                tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "No problems found" in out, out


def test_asv_discovers_every_suite(tmp_path):
    runner = Path(asv.__file__).parent / "benchmark.py"
    result = tmp_path / "discovered.json"
    proc = subprocess.run([sys.executable, str(runner), "discover", str(ROOT / "benchmarks"),
                           str(result)], cwd=ROOT, capture_output=True, text=True,
                          timeout=240, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    names = {b["name"] for b in json.loads(result.read_text())}
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
    }
    assert expected <= names, sorted(expected - names)


def test_asv_machine_file_is_written_in_a_private_home(tmp_path):
    proc = _run(["machine", "--yes", "--config", str(CONFIG)], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / ".asv-machine.json").exists()
