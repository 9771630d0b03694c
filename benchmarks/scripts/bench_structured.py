"""Exact top-r KSVD of the citation graphs: structured operator vs scipy vs dense G + ARPACK.

For each graph this times, end to end from the adjacency matrix (operator build + solve):

* ``structured``: :class:`StructuredKernelSource` + :func:`structured_svd` (exact compression,
  ARPACK on the compressed core);
* ``structured+arpack``: the same source solved by ``solvers.svd(method="tsvd", tol=0)``
  (ARPACK on the full operator);
* ``scipy``: a straightforward scipy implementation of the same structure (``A @ A`` and the
  diagonal scalings with scipy.sparse, products inside a ``LinearOperator``, ``svds`` on it);
* ``dense``: the dense kernel matrix (``ksvd_kernel``) + ``scipy.sparse.linalg.svds``
  (ARPACK, tol=0) on it. Needs N^2 doubles (3.1 GB for PubMed), so by default it runs only
  for graphs with N <= 5000 (Cora, Citeseer); ``--dense always`` adds PubMed.

and checks that the answers agree: the largest relative singular-value difference and the
largest vector misalignment ``1 - |u . u~|`` against the dense path (or, where it did not run,
against the scipy implementation). Targets (issue 6): PubMed (SNE, paper bandwidth factor 0.5,
rank 20) end to end in <= 0.2 s, no slower than scipy, >= 50x faster than dense + ARPACK;
values within 1e-10 and vectors within 1e-8 of the dense path on Cora and Citeseer.

Usage::

    python benchmarks/scripts/bench_structured.py                     # all three, dense on small
    python benchmarks/scripts/bench_structured.py --datasets pubmed --dense always  # 3 GB, ~15 s
    python benchmarks/scripts/bench_structured.py --json results/structured.json

Timings are medians over ``--repeats`` runs after one untimed warm-up (Numba JIT).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time

import numba
import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator, svds

import solvers
from ksvd_bench.datasets import load_graph
from ksvd_bench.kernels import ksvd_kernel, paper_gamma
from ksvd_bench.kernels.structured import StructuredKernelSource, structured_svd
from ksvd_bench.report import format_table, machine_info, write_json

#: the paper's bandwidth factors
FACTORS = {"cora": 1.0, "citeseer": 1.0, "pubmed": 0.5}
DENSE_AUTO_MAX_N = 5000


def scipy_structured_svds(A, gamma, rank, *, seed=0):
    """The same structure in plain scipy: centred SNE of a square sparse ``A`` as an operator.

    G = D_rho^-1 (1 b^T + S D_b) with S = expm1(2 P / gamma^2) on the pattern of P = A @ A,
    b_j = exp(-c_j / gamma^2); centring subtracts column means, row means and adds the grand
    mean. Not stabilised for small gamma (this is the straightforward version).
    """
    A = sp.csr_matrix(A, dtype=np.float64)
    n, m = A.shape
    t = 1.0 / gamma**2
    P = (A @ A).tocsr()
    c = np.asarray(A.multiply(A).sum(axis=0)).ravel()
    b = np.exp(-t * c)
    S = P.copy()
    S.data = np.expm1(2.0 * t * P.data)
    Sb = sp.csr_matrix(S.multiply(b[None, :]))
    a = 1.0 / (b.sum() + Sb @ np.ones(m))
    Sb_t = Sb.T.tocsr()
    mu_r = a * (b.sum() + Sb @ np.ones(m)) / m  # row means of G
    mu_c = (a.sum() * b + Sb_t @ a) / n  # column means of G
    shift = mu_r - mu_r.mean()

    def mv(x):
        x = np.asarray(x).reshape(m, -1)
        y = a[:, None] * (b @ x + Sb @ x)
        return y - (mu_c @ x) - np.outer(shift, x.sum(axis=0))

    def rmv(y):
        y = np.asarray(y).reshape(n, -1)
        ay = a[:, None] * y
        return np.outer(b, ay.sum(axis=0)) + Sb_t @ ay - np.outer(mu_c, y.sum(axis=0)) \
            - (shift @ y)[None, :]

    op = LinearOperator((n, m), matvec=mv, rmatvec=rmv, matmat=mv, rmatmat=rmv, dtype=float)
    U, s, Vt = svds(op, k=rank, tol=0, random_state=np.random.default_rng(seed))
    order = np.argsort(-s)
    return U[:, order], s[order], Vt[order].T


def dense_svds(A, gamma, rank, *, seed=0):
    t0 = time.perf_counter()
    G = ksvd_kernel(A, "sne", gamma=gamma, compat=None, center=True)
    t1 = time.perf_counter()
    U, s, Vt = svds(G, k=rank, tol=0, random_state=np.random.default_rng(seed))
    t2 = time.perf_counter()
    order = np.argsort(-s)
    return (U[:, order], s[order], Vt[order].T), t1 - t0, t2 - t1


def _timed(fn, repeats):
    """Median wall time of ``fn()`` over ``repeats`` runs, and the last result."""
    times = []
    out = None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def _agreement(U, s, V, ref):
    Ur, sr, Vr = ref
    val = float(np.max(np.abs(s - sr) / sr))
    vec = float(max(np.max(1 - np.abs(np.sum(U * Ur, axis=0))),
                    np.max(1 - np.abs(np.sum(V * Vr, axis=0)))))
    return val, vec


def bench_graph(name, rank, repeats, dense_mode, seed=0):
    A = load_graph(name).adjacency
    n = A.shape[0]
    gamma = paper_gamma(A, FACTORS[name])

    def structured():
        t0 = time.perf_counter()
        src = StructuredKernelSource(A, "sne", gamma=gamma, center=True)
        t1 = time.perf_counter()
        res = structured_svd(src, rank, random_state=seed)
        return t1 - t0, time.perf_counter() - t1, res

    def structured_arpack():
        src = StructuredKernelSource(A, "sne", gamma=gamma, center=True)
        return solvers.svd(src, rank, method="tsvd", random_state=seed, tol=0.0)

    t0 = time.perf_counter()
    structured()  # JIT warm-up (cached on disk after the first run ever)
    warm = time.perf_counter() - t0
    structured_arpack()

    runs = [structured() for _ in range(repeats)]
    build = statistics.median(r[0] for r in runs)
    solve = statistics.median(r[1] for r in runs)
    total = statistics.median(r[0] + r[1] for r in runs)
    res = runs[-1][2]
    t_arp, res_arp = _timed(structured_arpack, repeats)
    t_scipy, ref_scipy = _timed(lambda: scipy_structured_svds(A, gamma, rank, seed=seed), repeats)

    run_dense = dense_mode == "always" or (dense_mode == "auto" and n <= DENSE_AUTO_MAX_N)
    rows = []
    ref, ref_name, t_dense_build, t_dense_solve = ref_scipy, "scipy", None, None
    if run_dense:
        ref, t_dense_build, t_dense_solve = dense_svds(A, gamma, rank, seed=seed)
        ref_name = "dense"

    def row(method, seconds, U, s, V, **extra):
        val, vec = _agreement(U, s, V, ref)
        out = {"dataset": name, "N": n, "method": method, "seconds": seconds,
               "speedup_vs_scipy": t_scipy / seconds, "val_err": val, "vec_err": vec,
               "vs": ref_name}
        if run_dense:
            out["speedup_vs_dense"] = (t_dense_build + t_dense_solve) / seconds
        out.update(extra)
        return out

    rows.append(row("structured", total, res.U, res.s, res.V, build=build, solve=solve,
                    core=f"{res.info['core_shape'][0]}x{res.info['core_shape'][1]}",
                    jit_first_call=warm))
    rows.append(row("structured+arpack", t_arp, res_arp.U, res_arp.s, res_arp.V))
    rows.append(row("scipy LinearOperator+svds", t_scipy, *ref_scipy))
    if run_dense:
        rows.append(row("dense G + svds", t_dense_build + t_dense_solve, *ref,
                        build=t_dense_build, solve=t_dense_solve))
    return rows, gamma


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", default=["cora", "citeseer", "pubmed"],
                        choices=sorted(FACTORS))
    parser.add_argument("--rank", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dense", choices=["auto", "always", "never"], default="auto",
                        help=f"dense G + ARPACK baseline: auto = only when N <= "
                             f"{DENSE_AUTO_MAX_N}; always includes PubMed (3.1 GB, ~15 s)")
    parser.add_argument("--blas-threads", type=int, default=None,
                        help="limit BLAS threads for every method (threadpoolctl); on a "
                             "loaded machine 1 keeps ARPACK's BLAS from fighting for cores")
    parser.add_argument("--json", default=None, help="write the rows and machine info here")
    args = parser.parse_args(argv)
    if args.rank < 1:
        parser.error("--rank must be >= 1")
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    if args.blas_threads is not None:
        if args.blas_threads < 1:
            parser.error("--blas-threads must be >= 1")
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=args.blas_threads, user_api="blas"):
            return _run(args)
    return _run(args)


def _run(args):

    all_rows = []
    for name in args.datasets:
        rows, gamma = bench_graph(name, args.rank, args.repeats, args.dense)
        all_rows += rows
        print(format_table(
            rows,
            ["method", "seconds", "build", "solve", "speedup_vs_scipy", "speedup_vs_dense",
             "val_err", "vec_err", "vs", "core"],
            precision=4,
            title=f"{name}: N={rows[0]['N']}, SNE centred, gamma={gamma:.4g} "
                  f"(factor {FACTORS[name]}), rank {args.rank}",
        ))
        print()
        sys.stdout.flush()
    print(f"numba threads: {numba.get_num_threads()}, BLAS threads limit: {args.blas_threads}, "
          f"python {platform.python_version()}")
    if args.json:
        write_json(args.json, {"rows": all_rows, "machine": machine_info(),
                               "rank": args.rank, "repeats": args.repeats,
                               "blas_threads": args.blas_threads})


if __name__ == "__main__":
    main()
