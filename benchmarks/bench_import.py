"""Cold start: import time and the first (compiling) kernel call, each in a fresh process."""

from __future__ import annotations

from .common import FULL

# Runs untimed before the timed code; the directory is removed at interpreter exit.
_FRESH_CACHE = """
import atexit, os, shutil, tempfile
_d = tempfile.mkdtemp(prefix="ksvd-bench-asv-numba-")
atexit.register(shutil.rmtree, _d, True)
os.environ["NUMBA_CACHE_DIR"] = _d
"""

_FIRST_CALLS = """
import numpy as np
import scipy.sparse as sp
import solvers
from ksvd_bench.kernels import ksvd_kernel
A = sp.random(60, 60, density=0.1, random_state=0, format="csr")
G = ksvd_kernel(A, "sne", gamma=1.0, compat=None, center=True)
for method, opts in (("rsvd", {"n_oversamples": 5}), ("asym_nystrom", {"n_samples": 30})):
    solvers.svd(G, 5, method=method, random_state=0, **opts)
"""


def timeraw_import():
    """``import ksvd_bench`` and ``solvers`` in a fresh interpreter."""
    return "import ksvd_bench, solvers"


def timeraw_import_and_jit_cold():
    """Import plus the first kernel build and solves with an empty Numba cache (full compile)."""
    return _FIRST_CALLS, _FRESH_CACHE


def timeraw_import_and_jit_cached():
    """Import plus the same first calls with the on-disk Numba cache (what users see next)."""
    return _FIRST_CALLS


timeraw_import_and_jit_cold.timeout = 300
timeraw_import_and_jit_cached.timeout = 300

if not FULL:
    # every sample starts an interpreter (a cold compile takes seconds): by default one round of
    # at most 3 samples or 6 s; KSVD_BENCH_ASV_FULL=1 keeps asv's sampling
    for _bench in (timeraw_import, timeraw_import_and_jit_cold, timeraw_import_and_jit_cached):
        _bench.rounds, _bench.repeat, _bench.warmup_time = 1, (1, 3, 6.0), 0.0
