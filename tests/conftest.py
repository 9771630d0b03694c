"""Shared test configuration.

Hypothesis runs without a deadline: the first example of a test pays the Numba JIT compile.
The default ``ci`` profile is derandomized, so a CI run is repeatable;
``HYPOTHESIS_PROFILE=thorough`` draws fresh random examples, and more of them.

``@pytest.mark.numba_threads(n)`` marks a test that needs ``n`` Numba threads (a determinism
test comparing 1 and 2 threads, say). Where this process has fewer (``NUMBA_NUM_THREADS=1``,
or a one-CPU machine), the test is not skipped: it runs in a fresh interpreter started with
``NUMBA_NUM_THREADS=n`` (Numba fixes its pool size at import), and passes or fails there.

OpenBLAS's idle workers spin briefly, as in a ``ksvd-bench`` run
(:func:`ksvd_bench.threads.quiet_blas_spin`): set before anything below loads numpy.
"""

import os
import subprocess
import sys

from ksvd_bench.threads import quiet_blas_spin

quiet_blas_spin()

import matplotlib  # noqa: E402
import numba  # noqa: E402
import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

matplotlib.use("Agg")

settings.register_profile(
    "ci",
    deadline=None,
    max_examples=25,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("thorough", deadline=None, max_examples=300)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

#: set in the child interpreter, so a test that still lacks threads there fails, never recurses
_CHILD_FLAG = "KSVD_BENCH_NUMBA_THREADS_CHILD"


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "numba_threads(n): needs n Numba threads; run in a fresh interpreter with "
        "NUMBA_NUM_THREADS=n where this process has fewer",
    )


def run_test_in_subprocess(nodeid, rootdir, numba_threads, timeout=600):
    """Run one test (``nodeid``) in a fresh pytest with ``NUMBA_NUM_THREADS=numba_threads``.

    Fails the calling test, with the child's output, unless the child ran it and it passed
    (a skip or deselection in the child counts as a failure: the point is to run it).
    """
    env = dict(os.environ, NUMBA_NUM_THREADS=str(numba_threads), **{_CHILD_FLAG: "1"})
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA", nodeid],
        cwd=rootdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    out = proc.stdout + proc.stderr
    if proc.returncode != 0 or "1 passed" not in out:
        pytest.fail(
            f"{nodeid} with NUMBA_NUM_THREADS={numba_threads} in a subprocess "
            f"(exit code {proc.returncode}):\n{out[-4000:]}",
            pytrace=False,
        )


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    marker = pyfuncitem.get_closest_marker("numba_threads")
    if marker is None:
        return None
    needed = int(marker.args[0]) if marker.args else 2
    if numba.config.NUMBA_NUM_THREADS >= needed:
        return None  # enough threads here: run in this process as usual
    if os.environ.get(_CHILD_FLAG):
        pytest.fail(
            f"NUMBA_NUM_THREADS={numba.config.NUMBA_NUM_THREADS} in the child process, "
            f"{needed} needed"
        )
    run_test_in_subprocess(pyfuncitem.nodeid, pyfuncitem.config.rootpath, needed)
    return True


def _run_with_numba_threads(k, fn):
    old = numba.get_num_threads()
    numba.set_num_threads(k)
    try:
        return fn()
    finally:
        numba.set_num_threads(old)


@pytest.fixture
def with_numba_threads():
    """``with_numba_threads(k, fn)``: ``fn()`` run on ``k`` Numba threads (then restored)."""
    return _run_with_numba_threads
