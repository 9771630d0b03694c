"""Exact top-r KSVD of the citation graphs: structured operator vs scipy vs dense G + ARPACK.

For each graph this times, end to end from the adjacency matrix (operator build + solve):

* ``structured``: :class:`StructuredKernelSource` + :func:`structured_svd` (exact compression,
  ARPACK on the compressed core);
* ``solvers.svd tsvd``: the same source solved by the public path
  ``solvers.svd(method="tsvd", tol=0)``, which takes the source's exact path
  (``StructuredKernelSource.exact_svd``: the same computation as ``structured``);
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

Two more sections (issue 11 item 2 and issue 9 target (a)), each run alone when asked for:

* ``--exact-path``: the public path ``solvers.svd(kernel_source(A, "sne", gamma=g,
  center=False), 20, method="tsvd")`` on PubMed (the paper's gamma, factor 0.5), which takes
  the source's exact path (``StructuredKernelSource.exact_svd``), against the plain scipy
  baseline: a ``LinearOperator`` over the same structured form plus ``svds`` (tol=0). Both
  solve from an already built source/operator; BLAS at 1 thread; ``--repeats`` (default 5)
  runs interleaved in one process; medians of wall and CPU seconds (CPU time is what a
  loaded machine distorts least). Target: the public path >= 2x faster. Prints the ratio.
* ``--scale N [N ...]``: exact top-20 of the SNE kernel (paper gamma, centred unless
  ``--no-center``) of ``make_directed_graph(N, random_state=0)`` through the public path,
  with its residuals ``max_i ||G v_i - s_i u_i|| / s_1`` and ``||G^T u_i - s_i v_i|| / s_1``
  computed by two extra products. ``--baseline`` also times ARPACK through a plain
  ``LinearOperator`` over the same source (``solvers`` cannot see the exact path there).
  Target (issue 9): N = 1e6 in <= 30 s on 2 cores.

Usage::

    python benchmarks/scripts/bench_structured.py --exact-path
    python benchmarks/scripts/bench_structured.py --scale 2e5 --baseline
    python benchmarks/scripts/bench_structured.py --scale 1e6
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
from ksvd_bench.datasets import load_graph, make_directed_graph
from ksvd_bench.kernels import kernel_source, ksvd_kernel, paper_gamma
from ksvd_bench.kernels.structured import StructuredKernelSource, structured_svd
from ksvd_bench.report import format_table, machine_info, write_json

#: the paper's bandwidth factors
FACTORS = {"cora": 1.0, "citeseer": 1.0, "pubmed": 0.5}
DENSE_AUTO_MAX_N = 5000


def _scipy_sne_factors(A, gamma):
    """``(a, b, Sb, Sb_t)`` of the uncentred SNE kernel ``G = D_a (1 b^T + Sb)`` of ``A``.

    For a square sparse ``A``: ``P = A @ A``, ``b_j = exp(-c_j / gamma^2)`` with ``c_j`` the
    squared column norms, ``Sb = expm1(2 P / gamma^2) D_b`` on the pattern of ``P`` (CSR, and
    its transpose ``Sb_t``), ``a`` the row normalisers. Plain scipy, not stabilised.
    """
    A = sp.csr_matrix(A, dtype=np.float64)
    m = A.shape[1]
    t = 1.0 / gamma**2
    P = (A @ A).tocsr()
    c = np.asarray(A.multiply(A).sum(axis=0)).ravel()
    b = np.exp(-t * c)
    S = P.copy()
    S.data = np.expm1(2.0 * t * P.data)
    Sb = sp.csr_matrix(S.multiply(b[None, :]))
    a = 1.0 / (b.sum() + Sb @ np.ones(m))
    return a, b, Sb, Sb.T.tocsr()


def scipy_structured_svds(A, gamma, rank, *, seed=0):
    """The same structure in plain scipy: centred SNE of a square sparse ``A`` as an operator.

    G = D_rho^-1 (1 b^T + S D_b) with S = expm1(2 P / gamma^2) on the pattern of P = A @ A,
    b_j = exp(-c_j / gamma^2); centring subtracts column means, row means and adds the grand
    mean. Not stabilised for small gamma (this is the straightforward version).
    """
    a, b, Sb, Sb_t = _scipy_sne_factors(A, gamma)
    n, m = Sb.shape
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
        return (
            np.outer(b, ay.sum(axis=0))
            + Sb_t @ ay
            - np.outer(mu_c, y.sum(axis=0))
            - (shift @ y)[None, :]
        )

    op = LinearOperator((n, m), matvec=mv, rmatvec=rmv, matmat=mv, rmatmat=rmv, dtype=float)
    U, s, Vt = svds(op, k=rank, tol=0, random_state=np.random.default_rng(seed))
    order = np.argsort(-s)
    return U[:, order], s[order], Vt[order].T


def scipy_sne_operator(A, gamma):
    """The uncentred SNE kernel of a square sparse ``A`` as a plain scipy ``LinearOperator``.

    ``G = D_a (1 b^T + S D_b)`` with ``S = expm1(2 P / gamma^2)`` on the pattern of
    ``P = A @ A``, ``b_j = exp(-c_j / gamma^2)``, ``a`` the row normalisers: the structured
    form, with scipy's sparse products (the straightforward version, not stabilised).
    """
    a, b, Sb, Sb_t = _scipy_sne_factors(A, gamma)
    n, m = Sb.shape

    def mv(x):
        x = np.asarray(x).reshape(m, -1)
        return a[:, None] * (b @ x + Sb @ x)

    def rmv(y):
        ay = a[:, None] * np.asarray(y).reshape(n, -1)
        return np.outer(b, ay.sum(axis=0)) + Sb_t @ ay

    return LinearOperator((n, m), matvec=mv, rmatvec=rmv, matmat=mv, rmatmat=rmv, dtype=float)


def _timed_pair(fn):
    """``(wall seconds, CPU seconds of this process, result)`` of one call."""
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - t0, time.process_time() - c0, out


def bench_exact_path(rank=20, repeats=5, seed=0):
    """Issue 11 item 2: the public tsvd path on PubMed (uncentred SNE) vs scipy + svds."""
    A = load_graph("pubmed").adjacency
    gamma = paper_gamma(A, FACTORS["pubmed"])
    source = kernel_source(A, "sne", gamma=gamma, center=False)
    op = scipy_sne_operator(A, gamma)

    def public():
        return solvers.svd(source, rank, method="tsvd", random_state=seed)

    def baseline():
        U, s, Vt = svds(op, k=rank, tol=0, rng=np.random.default_rng(seed))
        order = np.argsort(-s)
        return U[:, order], s[order], Vt[order].T

    public(), baseline()  # JIT and first-touch costs out of the timing
    runs = {"public": [], "scipy": []}
    for _ in range(repeats):  # interleaved: both see the same machine load
        runs["public"].append(_timed_pair(public))
        runs["scipy"].append(_timed_pair(baseline))
    res, ref = runs["public"][-1][2], runs["scipy"][-1][2]
    val, vec = _agreement(res.U, res.s, res.V, ref)
    rows = []
    for name, label in (
        ("public", 'solvers.svd(source, method="tsvd")'),
        ("scipy", "scipy LinearOperator + svds"),
    ):
        wall = statistics.median(r[0] for r in runs[name])
        cpu = statistics.median(r[1] for r in runs[name])
        rows.append({"method": label, "seconds": wall, "cpu_seconds": cpu})
    for row in rows:
        row["speedup_vs_scipy"] = rows[1]["seconds"] / row["seconds"]
        row["cpu_speedup_vs_scipy"] = rows[1]["cpu_seconds"] / row["cpu_seconds"]
    info = res.info
    rows[0].update(
        val_err=val,
        vec_err=vec,
        exact_path=info.get("exact_path"),
        n_passes=info.get("n_passes"),
        core="x".join(map(str, info.get("source_info", {}).get("core_shape", ()))),
    )
    return rows, gamma


def _warm_up_kernels(center):
    """Compile (or load from Numba's disk cache) the kernels of a large solve, untimed.

    A solve on a small graph runs the set-up and the serial compiles; ``compile_kernels``
    adds the parallel ones, which only large operators use.
    """
    A = make_directed_graph(2000, random_state=1).adjacency
    src = kernel_source(A, "sne", center=center)
    solvers.svd(src, 5, method="tsvd", random_state=0)
    src.compile_kernels()


def bench_scale(n, rank=20, center=True, baseline=False, seed=0):
    """Issue 9 target (a): exact top-``rank`` of a synthetic graph's SNE kernel at size ``n``."""
    _warm_up_kernels(center)
    row = {"N": n, "center": center}
    t0 = time.perf_counter()
    A = make_directed_graph(n, random_state=seed).adjacency
    row["graph_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    source = kernel_source(A, "sne", center=center)
    row["build_s"] = time.perf_counter() - t0
    row["nnz"] = int(getattr(source, "nnz", 0))
    wall, cpu, res = _timed_pair(
        lambda: solvers.svd(source, rank, method="tsvd", random_state=seed)
    )
    row.update(
        seconds=wall,
        cpu_seconds=cpu,
        exact_path=res.info.get("exact_path"),
        n_passes=res.info.get("n_passes"),
        compressed=res.info.get("source_info", {}).get("compressed"),
    )
    U, s, V = res
    row["res_Gv"] = float(np.linalg.norm(source.matmat(V) - U * s, axis=0).max() / s[0])
    row["res_GTu"] = float(np.linalg.norm(source.rmatmat(U) - V * s, axis=0).max() / s[0])
    row["s1"], row["s_r"] = float(s[0]), float(s[-1])
    if baseline:
        op = source.aslinearoperator()
        wall, cpu, ref = _timed_pair(
            lambda: solvers.svd(op, rank, method="tsvd", random_state=seed)
        )
        row.update(
            baseline_s=wall,
            baseline_cpu_s=cpu,
            speedup=wall / row["seconds"],
            baseline_passes=ref.info.get("n_passes"),
            val_err=float(np.max(np.abs(ref.s - s)) / s[0]),
        )
    return row


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
    vec = float(
        max(np.max(1 - np.abs(np.sum(U * Ur, axis=0))), np.max(1 - np.abs(np.sum(V * Vr, axis=0))))
    )
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
        out = {
            "dataset": name,
            "N": n,
            "method": method,
            "seconds": seconds,
            "speedup_vs_scipy": t_scipy / seconds,
            "val_err": val,
            "vec_err": vec,
            "vs": ref_name,
        }
        if run_dense:
            out["speedup_vs_dense"] = (t_dense_build + t_dense_solve) / seconds
        out.update(extra)
        return out

    rows.append(
        row(
            "structured",
            total,
            res.U,
            res.s,
            res.V,
            build=build,
            solve=solve,
            core=f"{res.info['core_shape'][0]}x{res.info['core_shape'][1]}",
            jit_first_call=warm,
        )
    )
    rows.append(row("solvers.svd tsvd", t_arp, res_arp.U, res_arp.s, res_arp.V))
    rows.append(row("scipy LinearOperator+svds", t_scipy, *ref_scipy))
    if run_dense:
        rows.append(
            row(
                "dense G + svds",
                t_dense_build + t_dense_solve,
                *ref,
                build=t_dense_build,
                solve=t_dense_solve,
            )
        )
    return rows, gamma


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--datasets", nargs="+", default=["cora", "citeseer", "pubmed"], choices=sorted(FACTORS)
    )
    parser.add_argument("--rank", type=int, default=20)
    parser.add_argument(
        "--repeats", type=int, default=None, help="timed runs (default 3; 5 for --exact-path)"
    )
    parser.add_argument(
        "--dense",
        choices=["auto", "always", "never"],
        default="auto",
        help=f"dense G + ARPACK baseline: auto = only when N <= "
        f"{DENSE_AUTO_MAX_N}; always includes PubMed (3.1 GB, ~15 s)",
    )
    parser.add_argument(
        "--blas-threads",
        type=int,
        default=None,
        help="limit BLAS threads for every method (threadpoolctl); on a "
        "loaded machine 1 keeps ARPACK's BLAS from fighting for cores",
    )
    parser.add_argument("--json", default=None, help="write the rows and machine info here")
    parser.add_argument(
        "--exact-path",
        action="store_true",
        help="only the public tsvd path on PubMed vs scipy (issue 11 item 2); "
        "BLAS at 1 thread, --repeats defaults to 5",
    )
    parser.add_argument(
        "--scale",
        nargs="+",
        type=float,
        default=None,
        metavar="N",
        help="only the exact top-r of synthetic graphs of these sizes "
        "(issue 9 target (a)), e.g. --scale 2e5 1e6",
    )
    parser.add_argument(
        "--baseline",
        action="store_true",
        help="with --scale: also ARPACK through a plain LinearOperator",
    )
    parser.add_argument(
        "--no-center",
        dest="center",
        action="store_false",
        help="with --scale: uncentred SNE (default centred)",
    )
    args = parser.parse_args(argv)
    if args.rank < 1:
        parser.error("--rank must be >= 1")
    if args.repeats is not None and args.repeats < 1:
        parser.error("--repeats must be >= 1")
    if args.scale is not None and any(n < 100 or n != int(n) for n in args.scale):
        parser.error("--scale sizes must be integers >= 100")
    if args.exact_path or args.scale is not None:
        return _run_sections(args)
    if args.blas_threads is not None:
        if args.blas_threads < 1:
            parser.error("--blas-threads must be >= 1")
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=args.blas_threads, user_api="blas"):
            return _run(args)
    return _run(args)


def _run_sections(args):
    from threadpoolctl import threadpool_limits

    out = {"machine": machine_info(), "rank": args.rank}
    if args.exact_path:
        repeats = args.repeats or 5
        with threadpool_limits(limits=1, user_api="blas"):
            rows, gamma = bench_exact_path(args.rank, repeats)
        print(
            format_table(
                rows,
                [
                    "method",
                    "seconds",
                    "cpu_seconds",
                    "speedup_vs_scipy",
                    "cpu_speedup_vs_scipy",
                    "val_err",
                    "vec_err",
                    "n_passes",
                    "core",
                ],
                precision=4,
                title=f"pubmed: SNE uncentred, gamma={gamma:.4g}, rank {args.rank}, BLAS 1 thread, "
                f"median of {repeats} interleaved runs (solve only; source/operator built)",
            )
        )
        print(
            f"ratio scipy / public: {rows[0]['speedup_vs_scipy']:.2f}x wall, "
            f"{rows[0]['cpu_speedup_vs_scipy']:.2f}x CPU (target >= 2)"
        )
        out["exact_path"] = rows
    if args.scale is not None:
        rows = []
        for n in args.scale:
            rows.append(bench_scale(int(n), args.rank, args.center, args.baseline))
            print(
                format_table(
                    rows[-1:],
                    [
                        "N",
                        "nnz",
                        "build_s",
                        "seconds",
                        "cpu_seconds",
                        "n_passes",
                        "res_Gv",
                        "res_GTu",
                        "baseline_s",
                        "speedup",
                        "val_err",
                    ],
                    precision=4,
                    title=f"synthetic graph, SNE {'centred' if args.center else 'uncentred'}, "
                    f"exact top-{args.rank} by the public tsvd path",
                )
            )
            sys.stdout.flush()
        out["scale"] = rows
    print(f"numba threads: {numba.get_num_threads()}, python {platform.python_version()}")
    if args.json:
        write_json(args.json, out)


def _run(args):
    args.repeats = args.repeats or 3

    all_rows = []
    for name in args.datasets:
        rows, gamma = bench_graph(name, args.rank, args.repeats, args.dense)
        all_rows += rows
        print(
            format_table(
                rows,
                [
                    "method",
                    "seconds",
                    "build",
                    "solve",
                    "speedup_vs_scipy",
                    "speedup_vs_dense",
                    "val_err",
                    "vec_err",
                    "vs",
                    "core",
                ],
                precision=4,
                title=f"{name}: N={rows[0]['N']}, SNE centred, gamma={gamma:.4g} "
                f"(factor {FACTORS[name]}), rank {args.rank}",
            )
        )
        print()
        sys.stdout.flush()
    print(
        f"numba threads: {numba.get_num_threads()}, BLAS threads limit: {args.blas_threads}, "
        f"python {platform.python_version()}"
    )
    if args.json:
        write_json(
            args.json,
            {
                "rows": all_rows,
                "machine": machine_info(),
                "rank": args.rank,
                "repeats": args.repeats,
                "blas_threads": args.blas_threads,
            },
        )


if __name__ == "__main__":
    main()
