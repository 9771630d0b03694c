"""Thread counts of a run: the bound (Numba's pool), the check, and the limits in force.

A leaf module: the command line (:mod:`ksvd_bench._cliargs`) and the studies
(:mod:`ksvd_bench.race`) both use it, and it imports neither, so the command-line layer never
reaches back into a study for a helper.
"""

from __future__ import annotations

import contextlib

import numpy as np

__all__ = ["DEFAULT_THREADS", "max_threads", "check_threads", "solver_threads"]

#: the default of every study (``compare``, ``spectrum``, ``scale``): one thread, the same for
#: every solver. On a shared machine spinning BLAS/Numba threads make multi-threaded timings
#: erratic (2 threads under load took 9x the CPU time of 1 thread for the same ``compare``);
#: ask for more with ``threads=`` / ``--threads``.
DEFAULT_THREADS = 1


def max_threads():
    """The largest thread count a run may ask for: the size of Numba's thread pool."""
    import numba

    return int(numba.config.NUMBA_NUM_THREADS)


def check_threads(threads, name="threads"):
    """``threads`` as an int in ``[1, max_threads()]`` (None: Numba's current count)."""
    import numba

    if threads is None:
        return int(numba.get_num_threads())
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or threads < 1:
        raise ValueError(f"{name} must be a positive int, got {threads!r}")
    if threads > max_threads():
        raise ValueError(f"{name} must be at most {max_threads()} (Numba's thread pool, "
                         f"NUMBA_NUM_THREADS), got {threads}")
    return int(threads)


@contextlib.contextmanager
def solver_threads(threads):
    """Numba and BLAS limited to ``threads`` inside; Numba's count restored afterwards.

    Take :func:`ksvd_bench.report.machine_info` inside, so that the record shows the counts
    the solvers ran with, not the machine's defaults.
    """
    import numba
    from threadpoolctl import threadpool_limits

    threads = check_threads(threads)
    old = numba.get_num_threads()
    numba.set_num_threads(threads)
    try:
        with threadpool_limits(limits=threads):
            yield threads
    finally:
        numba.set_num_threads(old)
