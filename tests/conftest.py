"""Shared test configuration.

Hypothesis runs without a deadline: the first example of a test pays the Numba JIT compile.
The default ``ci`` profile is derandomized, so a CI run is repeatable;
``HYPOTHESIS_PROFILE=thorough`` draws fresh random examples, and more of them.
"""

import os

import matplotlib
import numba
import pytest
from hypothesis import HealthCheck, settings

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
