"""Shared test configuration.

Hypothesis runs without a deadline: the first example of a test pays the Numba JIT compile.
``HYPOTHESIS_PROFILE=thorough`` runs more examples than the default CI profile.
"""

import os

import matplotlib
from hypothesis import HealthCheck, settings

matplotlib.use("Agg")

settings.register_profile(
    "ci",
    deadline=None,
    max_examples=25,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("thorough", deadline=None, max_examples=300)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
