"""Pass-efficient solvers: accuracy per pass over G, and the RSVD LU normaliser's speed.

Usage::

    .venv/bin/python benchmarks/scripts/bench_pass_efficient.py [--quick]

1. Accuracy against passes over G on a slowly decaying spectrum (s_i = i^-0.5, N x M random
   singular vectors, rank r, block r + 10): ``rsvd`` (``2 q + 2`` passes),
   ``block_krylov`` (``2 q + 2``) and ``generalized_nystrom`` (one pass through
   ``sketch``). Errors: spectral ``||G - U U^T G||_2 / s_{r+1} - 1`` (Musco & Musco's
   criterion), Frobenius ``||G - U U^T G||_F / ||G - G_r||_F - 1`` and per-vector
   ``max_i |s_i - sigma_i| / sigma_i``.
2. The power-iteration LU normaliser of ``rsvd`` on a 1e6 x 40 block: the new
   ``permuted_lu_factor`` against ``scipy.linalg.lu(permute_l=True)`` (the old code) and
   ``scipy.linalg.lu_factor`` (the issue's reference), interleaved, median of 5.

BLAS threads are pinned to 1 (threadpoolctl): on a shared, overloaded machine OpenBLAS's
threads spin and small LAPACK calls get 30x slower, which would swamp every comparison.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from scipy import linalg
from threadpoolctl import threadpool_limits

import solvers
from solvers.rsvd import permuted_lu_factor


def slow_decay_matrix(N, M, alpha, seed):
    rng = np.random.default_rng(seed)
    k = min(N, M)
    U = np.linalg.qr(rng.standard_normal((N, k)))[0]
    V = np.linalg.qr(rng.standard_normal((M, k)))[0]
    s = (1.0 + np.arange(k)) ** -alpha
    return (U * s) @ V.T, s


def errors(G, s, res, r):
    R = G - res.U @ (res.U.T @ G)
    spectral = np.linalg.norm(R, 2) / s[r] - 1
    frobenius = np.linalg.norm(R) / np.linalg.norm(s[r:]) - 1
    per_vector = np.max(np.abs(res.s - s[:r]) / s[:r])
    return spectral, frobenius, per_vector


def accuracy_per_pass(N, M, r, q_max):
    G, s = slow_decay_matrix(N, M, 0.5, seed=0)
    print(f"## accuracy per pass: {N} x {M}, s_i = i^-0.5, rank {r}, block {r} + 10, seed 1")
    print(f"{'method':22s} {'passes':>6s} {'spectral':>9s} {'frobenius':>9s} {'per-vec':>9s}")
    rows = [("generalized_nystrom", {"n_oversamples": 10})]
    for q in range(q_max + 1):
        rows += [
            ("rsvd", {"n_oversamples": 10, "n_iter": q}),
            ("block_krylov", {"n_oversamples": 10, "n_iter": q}),
        ]
    for method, opts in rows:
        res = solvers.svd(G, r, method=method, random_state=1, **opts)
        e = errors(G, s, res, r)
        label = method + (f" q={opts['n_iter']}" if "n_iter" in opts else "")
        print(f"{label:22s} {res.info['n_passes']:6.0f} {e[0]:9.2e} {e[1]:9.2e} {e[2]:9.2e}")


def lu_normaliser(n, k, repeats):
    print(f"\n## LU normaliser on a {n} x {k} block (median of {repeats}, interleaved)")
    rng = np.random.default_rng(0)
    for dtype in (np.float64, np.float32):
        Y = rng.standard_normal((n, k)).astype(dtype)
        same = np.array_equal(permuted_lu_factor(Y), linalg.lu(Y, permute_l=True)[0])
        funcs = {
            "lu(permute_l=True) [old]": lambda A: linalg.lu(A, permute_l=True, check_finite=False),
            "lu_factor [reference]": lambda A: linalg.lu_factor(A, check_finite=False),
            "permuted_lu_factor [new]": permuted_lu_factor,
        }
        times = {name: [] for name in funcs}
        for _ in range(repeats):
            for name, f in funcs.items():
                t0 = time.perf_counter()
                f(Y)
                times[name].append(time.perf_counter() - t0)
        old = np.median(times["lu(permute_l=True) [old]"])
        print(f"{np.dtype(dtype).name}: identical to lu(permute_l=True): {same}")
        for name, ts in times.items():
            med = np.median(ts)
            print(f"  {name:28s} {med:7.3f} s   old / this = {old / med:4.2f}x")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    args = ap.parse_args()
    print(f"load average {os.getloadavg()}, BLAS threads pinned to 1")
    with threadpool_limits(1):
        if args.quick:
            accuracy_per_pass(600, 400, 10, 3)
            lu_normaliser(100_000, 40, 3)
        else:
            accuracy_per_pass(3000, 2000, 20, 5)
            lu_normaliser(1_000_000, 40, 5)


if __name__ == "__main__":
    main()
