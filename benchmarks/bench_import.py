"""Cold start: import time and the first (compiling) kernel call, each in a fresh process."""

from __future__ import annotations

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
