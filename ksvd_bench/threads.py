"""Thread counts of a run: the bound (Numba's pool), the check, and the limits in force.

A leaf module: the command line (:mod:`ksvd_bench.cliargs`) and the studies
(:mod:`ksvd_bench.race`) both use it, and it imports neither, so the command-line layer never
reaches back into a study for a helper. Importing it loads no BLAS (numpy is imported where
it is used), so the command line can call :func:`quiet_blas_spin` first.
"""

from __future__ import annotations

import contextlib
import os
import warnings

__all__ = [
    "DEFAULT_THREADS",
    "BLAS_SPIN",
    "max_threads",
    "check_threads",
    "solver_threads",
    "openblas_spin",
    "quiet_blas_spin",
]

#: the default of every study (``compare``, ``spectrum``, ``scale``): one thread, the same for
#: every solver. On a shared machine spinning BLAS/Numba threads make multi-threaded timings
#: erratic (2 threads under load took 9x the CPU time of 1 thread for the same ``compare``;
#: OpenBLAS's idle spin, now shortened by :func:`quiet_blas_spin`, was one cause); ask for more
#: with ``threads=`` / ``--threads``.
DEFAULT_THREADS = 1


#: ``OPENBLAS_THREAD_TIMEOUT`` of a ``ksvd-bench`` run (:func:`quiet_blas_spin`): OpenBLAS's
#: idle workers spin for ``2**20`` clock ticks (about 0.4 ms) after a threaded call, not
#: ``2**28`` (about 0.1 s). A solver alternates Numba passes over G with small dense BLAS work
#: (QR, Gram matrices), and with the default every pass of a small or medium problem starts
#: while those workers still hold cores: measured on the 2-core development machine, N = M =
#: 4000, 2 threads, top-20 rsvd 1.85 s with the default against 0.87 s, and slower at 2
#: threads than at 1 (1.43 s) with the default (``benchmarks/archive/blas_spin.py``,
#: ``benchmarks/recorded/passes/blas_spin_2core.txt``).
BLAS_SPIN = 20


def openblas_spin(environ=None):
    """The exponent ``e`` of OpenBLAS's idle spin, ``2**e`` clock ticks, as OpenBLAS reads it.

    ``OPENBLAS_THREAD_TIMEOUT`` clamped to ``[4, 30]``; 28 (OpenBLAS's default) where it is
    unset, not a number or not positive. OpenBLAS reads it once, when it is loaded.
    """
    environ = os.environ if environ is None else environ
    try:
        e = int(environ.get("OPENBLAS_THREAD_TIMEOUT", ""))
    except ValueError:
        return 28
    return 28 if e <= 0 else min(max(e, 4), 30)


def quiet_blas_spin(environ=None):
    """Set ``OPENBLAS_THREAD_TIMEOUT`` to :data:`BLAS_SPIN` unless the environment sets it.

    Call it before numpy is imported (OpenBLAS reads the variable when it is loaded); child
    processes inherit it. Returns the exponent now in force (:func:`openblas_spin`).
    """
    environ = os.environ if environ is None else environ
    environ.setdefault("OPENBLAS_THREAD_TIMEOUT", str(BLAS_SPIN))
    return openblas_spin(environ)


def _spinning_blas():
    """Whether a pthreads build of OpenBLAS (whose idle workers spin) is loaded."""
    # not at the top: the command line imports this module before numpy loads (BLAS spin)
    from threadpoolctl import threadpool_info

    return any(
        i.get("internal_api") == "openblas" and i.get("threading_layer") == "pthreads"
        for i in threadpool_info()
    )


def max_threads():
    """The largest thread count a run may ask for: the size of Numba's thread pool."""
    # not at the top: the command line imports this module before numpy loads (BLAS spin)
    import numba

    return int(numba.config.NUMBA_NUM_THREADS)


def check_threads(threads, name="threads"):
    """``threads`` as an int in ``[1, max_threads()]`` (None: Numba's current count)."""
    # not at the top: the command line imports this module before numpy loads (BLAS spin)
    import numba
    import numpy as np

    if threads is None:
        return int(numba.get_num_threads())
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or threads < 1:
        raise ValueError(f"{name} must be a positive int, got {threads!r}")
    if threads > max_threads():
        raise ValueError(
            f"{name} must be at most {max_threads()} (Numba's thread pool, "
            f"NUMBA_NUM_THREADS), got {threads}"
        )
    return int(threads)


@contextlib.contextmanager
def solver_threads(threads):
    """Numba and BLAS limited to ``threads`` inside; Numba's count restored afterwards.

    Take :func:`ksvd_bench.report.machine_info` inside, so that the record shows the counts
    the solvers ran with, not the machine's defaults. Warns (RuntimeWarning) at several
    threads where a pthreads OpenBLAS keeps its idle workers spinning for longer than
    :data:`BLAS_SPIN` allows: the timings would be theirs as much as the solvers'.
    """
    # not at the top: the command line imports this module before numpy loads (BLAS spin)
    import numba
    from threadpoolctl import threadpool_limits

    threads = check_threads(threads)
    spin = openblas_spin()
    if threads > 1 and spin > BLAS_SPIN and _spinning_blas():
        warnings.warn(
            f"OpenBLAS's idle workers spin for 2**{spin} clock ticks (about "
            f"{2.0**spin / 2.5e9:.2g} s) after each threaded call, so at {threads} "
            f"threads the Numba passes that follow a solver's QRs share their cores with them "
            f"(measured: up to 2x slower); set OPENBLAS_THREAD_TIMEOUT={BLAS_SPIN} before "
            f"Python starts (ksvd-bench does)",
            RuntimeWarning,
            stacklevel=3,
        )
    old = numba.get_num_threads()
    numba.set_num_threads(threads)
    try:
        with threadpool_limits(limits=threads):
            yield threads
    finally:
        numba.set_num_threads(old)
