"""The record of a run: machine, library versions, BLAS and thread settings."""

from __future__ import annotations

import importlib.util
import os
import platform
import sys

import numba
import numpy as np
import scipy

__all__ = ["machine_info"]


def machine_info():
    """Machine, library versions, BLAS and thread settings, for the record of a run."""
    # start-up: scikit-learn and threadpoolctl load only when a record is written
    import sklearn
    from threadpoolctl import threadpool_info

    try:
        svml = importlib.util.find_spec("intel_cmplr_lib_rt") is not None
    except (ImportError, ValueError):
        svml = False
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "numba": numba.__version__,
        "scikit-learn": sklearn.__version__,
        "numba_threads": numba.get_num_threads(),
        # how long idle OpenBLAS workers spin (2**value clock ticks; ksvd_bench.threads.BLAS_SPIN)
        "openblas_thread_timeout": os.environ.get("OPENBLAS_THREAD_TIMEOUT"),
        "numba_svml": bool(getattr(numba.config, "USING_SVML", False)),
        "intel_cmplr_lib_rt_installed": svml,
        "blas": [
            {k: p.get(k) for k in ("internal_api", "version", "num_threads", "architecture")}
            for p in threadpool_info()
            if p.get("user_api") == "blas"
        ],
    }
