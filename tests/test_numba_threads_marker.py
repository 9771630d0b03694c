"""``@pytest.mark.numba_threads(n)`` (tests/conftest.py): a test that needs n Numba threads runs
in a fresh interpreter with ``NUMBA_NUM_THREADS=n`` where this one has fewer, never skips, and
its failure there fails it here."""

import os
import subprocess
import sys
from pathlib import Path

import numba
import pytest

ROOT = Path(__file__).resolve().parents[1]
PROBE = "tests/test_numba_threads_marker.py::test_marked_probe_has_two_threads"


@pytest.mark.numba_threads(2)
def test_marked_probe_has_two_threads():
    assert numba.config.NUMBA_NUM_THREADS >= 2
    old = numba.get_num_threads()
    try:
        numba.set_num_threads(2)
        assert numba.get_num_threads() == 2
    finally:
        numba.set_num_threads(old)
    # lets the test below check that a failure in the child fails the parent
    assert os.environ.get("KSVD_BENCH_PROBE_FAIL") != "1", "probe failure requested"


def _pytest_with_one_thread(**extra_env):
    env = dict(os.environ, NUMBA_NUM_THREADS="1", **extra_env)
    env.pop("KSVD_BENCH_NUMBA_THREADS_CHILD", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", PROBE],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_one_thread_process_runs_the_marked_test_in_a_subprocess():
    proc = _pytest_with_one_thread()
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "1 passed" in out and "skipped" not in out, out


def test_failure_in_the_subprocess_fails_the_test():
    proc = _pytest_with_one_thread(KSVD_BENCH_PROBE_FAIL="1")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "NUMBA_NUM_THREADS=2 in a subprocess" in out and "probe failure requested" in out, out
