"""The exp sweep inside a pass's tile loop: called (as shipped) against inlined by LLVM.

``exp_nonpos`` marks itself ``noinline`` (``never_inline``). This script compiles a copy
of it without the mark, which LLVM inlines into its caller, and times both in the loop of
a CPU pass (per tile: BLAS product, the sweep over the tile's rows, BLAS product against 40
columns; tiles of 256 x 1024, float64, d + 2 = 66, one BLAS thread), and the sweep over a
tile's rows alone, in interleaved rounds of one process. The sweep's share of the tile loop
is the paired difference with the loop without a sweep. Medians in ns per kernel entry.

Recorded: ``benchmarks/recorded/passes/README.md`` (seventh session).
"""

import argparse
import time
import types

import numba
import numpy as np
from numba.core import types as nbtypes
from numba.extending import intrinsic
from threadpoolctl import threadpool_limits

from ksvd_bench.kernels import leaves

FASTMATH = {"nnan", "ninf", "nsz", "contract", "arcp"}


@intrinsic
def _no_mark(typingctx):
    """Stands in for ``never_inline``: emits nothing and marks nothing."""
    return nbtypes.none(), lambda context, builder, signature, args: context.get_dummy_value()


def _inlinable_copy(func):
    """``func`` compiled again with ``never_inline`` replaced by a no-op."""
    py = func.py_func
    env = dict(py.__globals__, never_inline=_no_mark)
    copy = types.FunctionType(py.__code__, env, py.__name__, py.__defaults__)
    return numba.njit(fastmath=FASTMATH)(copy)


def _tile_loop(sweep):
    @numba.njit
    def run(Xa, Za, Om, tr, tc, shifts, g, with_gemms, with_sweep, reps):
        n, m = Xa.shape[0], Za.shape[0]
        kbuf = np.empty(tr * tc)
        Y = np.zeros((tr, Om.shape[1]))
        for _ in range(reps):
            for i0 in range(0, n, tr):
                for j0 in range(0, m, tc):
                    K = kbuf.reshape((tr, tc))
                    if with_gemms:
                        np.dot(Xa[i0 : i0 + tr], Za[j0 : j0 + tc].T, K)
                    if with_sweep:
                        for i in range(tr):
                            sweep(K[i], shifts[i], g)
                    if with_gemms:
                        np.dot(K, Om[j0 : j0 + tc], Y)

    return run


def main(n=2048, rounds=15, reps=2, tr=256, tc=1024):
    rng = np.random.default_rng(0)
    Xa = -rng.random((n, 66))
    Za = rng.random((n, 66))
    Om = rng.random((n, 40))
    shifts = rng.random(tr)
    loops = {
        "called (shipped)": _tile_loop(leaves.exp_nonpos),
        "inlined": _tile_loop(_inlinable_copy(leaves.exp_nonpos)),
    }
    times = {}

    def timed(key, f, *args):
        t0 = time.perf_counter()
        f(*args)
        times.setdefault(key, []).append((time.perf_counter() - t0) / reps / n / n * 1e9)

    shipped = loops["called (shipped)"]
    with threadpool_limits(1):
        shipped(Xa, Za, Om, tr, tc, shifts, 0.01, True, False, 1)
        for f in loops.values():
            for with_gemms in (True, False):
                f(Xa, Za, Om, tr, tc, shifts, 0.01, with_gemms, True, 1)
        for _ in range(rounds):
            timed("gemms", shipped, Xa, Za, Om, tr, tc, shifts, 0.01, True, False, reps)
            for name, f in loops.items():
                for with_gemms in (True, False):
                    timed(
                        (name, with_gemms),
                        f,
                        Xa,
                        Za,
                        Om,
                        tr,
                        tc,
                        shifts,
                        0.01,
                        with_gemms,
                        True,
                        reps,
                    )
    gemms = np.array(times["gemms"])
    print(
        f"tile loop without a sweep: {np.median(gemms):.2f} ns/entry "
        f"({tr} x {tc} tiles, N = M = {n}, {rounds} rounds)"
    )
    for name in loops:
        loop = np.array(times[(name, True)])
        alone = np.array(times[(name, False)])
        print(
            f"{name:17s} tile loop {np.median(loop):.2f}, the sweep's share "
            f"{np.median(loop - gemms):.2f}; the sweep alone {np.median(alone):.2f} ns/entry"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2048, help="N = M (default: 2048)")
    parser.add_argument("--rounds", type=int, default=15, help="interleaved rounds (default: 15)")
    args = parser.parse_args()
    main(n=args.n, rounds=args.rounds)
