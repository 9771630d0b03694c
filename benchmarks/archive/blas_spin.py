"""Solves on a lazy kernel source with OpenBLAS's idle spin at its default and cut short.

After each threaded call, OpenBLAS's idle worker threads spin for ``2**OPENBLAS_THREAD_TIMEOUT``
clock ticks (28 by default: about 0.1 s) before they sleep. A solver alternates Numba passes
over G with small dense BLAS work (QR, Gram matrices), so every pass can start while those
workers still hold cores. ``ksvd-bench`` sets the variable to :data:`ksvd_bench.threads.BLAS_SPIN`
unless the environment does. This script times the same solves in child processes, one per
setting (OpenBLAS reads the variable when it is loaded), all at the same thread count::

    python benchmarks/archive/blas_spin.py --n 4000 --threads 2

Prints one row per setting, dtype and method: the median seconds of ``--repeats`` solves after
one untimed solve (compile, cache load).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

#: the solvers timed, with their options (asym_nystrom: the scale study's default sample)
METHODS = {"rsvd": {}, "block_krylov": {}, "asym_nystrom": {"n_samples": 400}}


def child(n, threads, repeats, dtypes):
    """Time the solves in this process (its OpenBLAS already read the variable)."""
    import time
    import warnings

    import numpy as np

    import solvers
    from ksvd_bench.kernels import KernelSource
    from ksvd_bench.threads import solver_threads

    rng = np.random.default_rng(0)
    d = 64
    X = rng.standard_normal((n, d))
    Z = rng.standard_normal((n, d))
    rows = []
    with solver_threads(threads), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # uncertified answers: timed anyway
        for dtype in dtypes:
            S = KernelSource.from_points(X, Z, "rbf", gamma=float(np.sqrt(2.0 * d)), dtype=dtype)
            for method, options in METHODS.items():
                times = []
                for _ in range(repeats + 1):
                    t0 = time.perf_counter()
                    solvers.svd(S, 20, method=method, random_state=0, **options)
                    times.append(time.perf_counter() - t0)
                rows.append(
                    {"dtype": dtype, "method": method, "seconds": float(np.median(times[1:]))}
                )
    print(json.dumps(rows))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=4000, help="N = M (default: %(default)s)")
    p.add_argument(
        "--threads",
        type=int,
        default=os.cpu_count(),
        help="Numba and BLAS threads (default: all CPUs)",
    )
    p.add_argument("--repeats", type=int, default=5, help="timed solves (default: 5)")
    p.add_argument("--dtypes", default="float32,float64")
    p.add_argument(
        "--settings",
        default="28,20",
        help="OPENBLAS_THREAD_TIMEOUT values to compare (default: 28,20)",
    )
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    dtypes = args.dtypes.split(",")
    if args.child:
        return child(args.n, args.threads, args.repeats, dtypes)
    print(
        f"top-20 solves, RBF source N = M = {args.n}, d = 64, {args.threads} threads; "
        f"median of {args.repeats} (s)"
    )
    print(f"{'OPENBLAS_THREAD_TIMEOUT':>23s} {'dtype':8s} {'method':13s} {'seconds':>8s}")
    for setting in args.settings.split(","):
        env = dict(os.environ, OPENBLAS_THREAD_TIMEOUT=setting)
        out = subprocess.run(
            [
                sys.executable,
                __file__,
                "--child",
                "--n",
                str(args.n),
                "--threads",
                str(args.threads),
                "--repeats",
                str(args.repeats),
                "--dtypes",
                args.dtypes,
            ],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        for row in json.loads(out.strip().splitlines()[-1]):
            print(f"{setting:>23s} {row['dtype']:8s} {row['method']:13s} {row['seconds']:8.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
