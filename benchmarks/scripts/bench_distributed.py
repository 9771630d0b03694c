"""Kernel passes on a Dask cluster against the in-process source and ``svd_compressed``.

Issue 10. Three measurements, each with its baseline in the same run:

1. *Overhead.* SNE, N = M, d = 64, two point sets: a ``LocalCluster`` of ``--workers``
   single-threaded worker processes (``KernelSource.from_points(..., client=...)``) against
   the in-process source on as many Numba threads. Median seconds of the set-up pass and of
   ``matmat`` (k columns), ``rmatmat`` (k) and ``sketch`` (k + k), the ratio cluster /
   in-process (target: at most 1.3 per pass) and the largest difference of the answers
   relative to their largest entry (target: rounding). From these, the per-entry throughput
   of one worker.
2. *Against Dask's own ``svd_compressed``.* The same kernel as a dask array whose tiles are
   evaluated by ``map_blocks`` from the same source (one ``--tile`` x ``--tile`` block of G
   per task), ``svd_compressed(G, r, n_power_iter=q, n_oversamples=10, compute=True)``
   (``compute=True``: recompute G at each use instead of holding all of it) for q = 0 ..
   ``--q-max``, against our solvers on the distributed source on the same cluster:
   ``generalized_nystrom``, ``rsvd`` with the same q and oversampling, ``block_krylov`` at
   depths 1 .. ``--max-depth``. Wall time, passes over G (for ``svd_compressed``: tile
   evaluations, counted on the workers, / tiles in G) and the subspace error (max over U and
   V) against a reference labelled with how it was computed (``block_krylov`` at depth 8).
   Then, for each tolerance, the fastest run of each side that reaches it (the same
   accuracy): target, ours faster in wall time and in passes.
3. *The structured graph source* (``--structured``): its ``matmat`` with k columns in process
   against the bare cost of moving that operand to the workers and the answer back through
   Dask (scatter + gather, no compute), on PubMed and a synthetic directed graph of
   ``--graph-n`` nodes: a lower bound on any distributed pass's cost.

The machine's load average is printed before and after (the cores are shared). Run from
the repository root::

    python benchmarks/scripts/bench_distributed.py                 # N = 40000 (minutes)
    python benchmarks/scripts/bench_distributed.py --n 20000 --out dist20k.json
    python benchmarks/scripts/bench_distributed.py --quick         # N = 3000, seconds
    python benchmarks/scripts/bench_distributed.py --structured --skip-overhead \\
        --skip-compressed
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import time

import numba
import numpy as np
import threadpoolctl

import solvers
from ksvd_bench.kernels import KernelSource, kernel_source
from ksvd_bench.kernels.distributed import kernel_tiles, svd_compressed
from ksvd_bench.metrics import subspace_error

RANK = 20
OVERSAMPLES = 10
REFERENCE_DEPTH = 8
TOLERANCES = (1e-1, 1e-2, 1e-4, 1e-6)


# ----------------------------------------------------------------------- problem
def clustered_points(n, d, n_clusters=RANK, seed=0):
    """Two point sets around the same ``n_clusters`` centres: a spectral gap near ``r``."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=2.0, size=(n_clusters, d))
    X = centres[rng.integers(n_clusters, size=n)] + 0.5 * rng.normal(size=(n, d))
    Z = centres[rng.integers(n_clusters, size=n)] + 0.5 * rng.normal(size=(n, d))
    return X, Z


def bandwidth(d):
    """Distances between points of one cluster are about 2 * 0.25 * d: gamma of that size."""
    return float(np.sqrt(0.5 * d))


def start_cluster(workers):
    import distributed

    cluster = distributed.LocalCluster(
        n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0"
    )
    return cluster, distributed.Client(cluster)


def timed(fn):
    gc.collect()
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def cpu_seconds(pids):
    """User + system CPU seconds of these processes so far (load-independent cost)."""
    import psutil

    return sum(sum(psutil.Process(pid).cpu_times()[:2]) for pid in pids)


def timed_cpu(fn, pids):
    """``(wall seconds, CPU seconds of pids, result)`` of ``fn()``."""
    c0 = cpu_seconds(pids)
    t, out = timed(fn)
    return t, cpu_seconds(pids) - c0, out


def rel_diff(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return float(np.abs(a - b).max() / np.abs(a).max())


# ----------------------------------------------------------------------- 1. overhead
def bench_overhead(client, X, Z, gamma, k, repeats, workers):
    n, m = X.shape[0], Z.shape[0]
    numba.set_num_threads(min(workers, numba.config.NUMBA_NUM_THREADS))
    rng = np.random.default_rng(1)
    Om, Psi = rng.standard_normal((m, k)), rng.standard_normal((n, k))
    setup = {"local": [], "cluster": []}
    for _ in range(max(1, repeats - 1)):  # the first pair also warms up (JIT cache loads)
        t, local = timed(lambda: KernelSource.from_points(X, Z, "sne", gamma=gamma))
        setup["local"].append(t)
        t, dist = timed(lambda: KernelSource.from_points(X, Z, "sne", gamma=gamma, client=client))
        setup["cluster"].append(t)
    fns = {
        "matmat": lambda S: S.matmat(Om),
        "rmatmat": lambda S: S.rmatmat(Psi),
        "sketch": lambda S: S.sketch(Om, Psi),
    }
    times = {f"{name}/{where}": [] for name in fns for where in ("local", "cluster")}
    cpu = {key: [] for key in times}
    cpu_main = {name: [] for name in fns}  # the cluster's client + scheduler share of it
    # this process runs the in-process passes, and the scheduler and client of the cluster
    pids = {"local": [os.getpid()], "cluster": [os.getpid(), *client.run(os.getpid).values()]}
    diffs = {}
    for name, fn in fns.items():  # warm-up: compile or cache-load every pass everywhere
        a, b = fn(local), fn(dist)
        pairs = zip(a, b, strict=True) if name == "sketch" else [(a, b)]
        diffs[name] = max(rel_diff(x, y) for x, y in pairs)
    for _ in range(repeats):  # interleaved, so that background load hits both alike
        for name, fn in fns.items():
            for where, S in (("local", local), ("cluster", dist)):
                c_main = cpu_seconds([os.getpid()])
                t, c, _ = timed_cpu(lambda S=S, fn=fn: fn(S), pids[where])
                times[f"{name}/{where}"].append(t)
                cpu[f"{name}/{where}"].append(c)
                if where == "cluster":
                    cpu_main[name].append(cpu_seconds([os.getpid()]) - c_main)
    med = {key: float(np.median(v)) for key, v in times.items()}
    med_cpu = {key: float(np.median(v)) for key, v in cpu.items()}
    med["setup/local"] = float(np.median(setup["local"]))
    med["setup/cluster"] = float(np.median(setup["cluster"]))
    ratios = {name: med[f"{name}/cluster"] / med[f"{name}/local"] for name in ("setup", *fns)}
    cpu_ratios = {name: med_cpu[f"{name}/cluster"] / med_cpu[f"{name}/local"] for name in fns}
    # entries evaluated per second by one worker in a cluster matmat (the pass's unit cost)
    throughput = n * m / med["matmat/cluster"] / workers
    dist.close()
    return {
        "median_s": med,
        "all_s": {**times, **{f"setup/{w}": v for w, v in setup.items()}},
        "median_cpu_s": med_cpu,
        "cpu_ratio_cluster_over_local": cpu_ratios,
        "median_cpu_client_scheduler_s": {k: float(np.median(v)) for k, v in cpu_main.items()},
        "ratio_cluster_over_local": ratios,
        "max_rel_diff": diffs,
        "entries_per_s_per_worker": throughput,
        "n_blocks": len(dist.block_bounds),
    }


# ----------------------------------------------------------------------- 2. svd_compressed
def solve(src, method, seed, **opts):
    t, res = timed(lambda: solvers.svd(src, RANK, method=method, random_state=seed, **opts))
    return t, res


def error(ref, res):
    return float(max(subspace_error(ref, res, rank=RANK)))


def bench_compressed(client, X, Z, gamma, q_max, tile, max_depth):
    """Every row: svd_compressed and ours at increasing effort, with its error and cost."""
    dist = KernelSource.from_points(X, Z, "sne", gamma=gamma, client=client)
    solve(dist, "rsvd", 1, n_iter=0)  # warm-up of the workers' passes
    # the reference runs on the cluster too: its answers are the in-process source's
    t_ref, ref = solve(dist, "block_krylov", 0, n_iter=REFERENCE_DEPTH)
    G = kernel_tiles(dist, tile)
    n_tiles = len(G.chunks[0]) * len(G.chunks[1])
    G[:tile, :tile].compute()  # warm-up: the workers compile or load the tile code
    rows = []
    for q in range(q_max + 1):
        res = svd_compressed(
            dist, RANK, n_iter=q, n_oversamples=OVERSAMPLES, tile=tile, random_state=0
        )
        rows.append(
            {
                "solver": "svd_compressed",
                "effort": f"q={q}",
                "seconds": res.info["seconds"],
                "passes": res.info["n_passes"],
                "error": error(ref, res),
            }
        )

    def ours(method, effort, **opts):
        t, res = solve(dist, method, 0, **opts)
        rows.append(
            {
                "solver": f"ours {method}",
                "effort": effort,
                "seconds": t,
                "passes": res.info["n_passes"],
                "error": error(ref, res),
            }
        )

    ours("generalized_nystrom", f"p={OVERSAMPLES}", n_oversamples=OVERSAMPLES)
    for q in range(q_max + 1):
        ours("rsvd", f"q={q}", n_iter=q, n_oversamples=OVERSAMPLES)
    for depth in range(1, max_depth + 1):
        ours("block_krylov", f"q={depth}", n_iter=depth)
    dist.close()
    return {
        "reference": f"block_krylov n_iter={REFERENCE_DEPTH} ({t_ref:.1f} s)",
        "tile": tile,
        "n_tiles": n_tiles,
        "rows": rows,
    }


def cheapest(rows, prefix, tol):
    """The fastest row of a solver family whose error is at most ``tol`` (None if none)."""
    good = [r for r in rows if r["solver"].startswith(prefix) and r["error"] <= tol]
    return min(good, key=lambda r: r["seconds"]) if good else None


# ----------------------------------------------------------------------- 3. structured
def bench_structured(client, graph_n, k):
    from ksvd_bench.datasets import load_graph
    from ksvd_bench.datasets.synthetic import make_directed_graph

    out = {}
    graphs = {
        "pubmed": lambda: load_graph("pubmed").adjacency,
        f"synthetic {graph_n}": lambda: make_directed_graph(graph_n, random_state=0).adjacency,
    }
    for name, make in graphs.items():
        S = kernel_source(make(), "sne")
        n = S.shape[0]
        X = np.random.default_rng(0).standard_normal((n, k))
        S.matmat(X)
        t_local = float(np.median([timed(lambda S=S, X=X: S.matmat(X))[0] for _ in range(5)]))

        def move(X=X):  # operand to every worker, an answer as large back: no compute
            fut = client.scatter(X, broadcast=True, hash=False)
            return client.submit(np.copy, fut, pure=False).result()

        move()
        t_move = float(np.median([timed(move)[0] for _ in range(3)]))
        out[name] = {
            "n": n,
            "nnz_T": int(S.nnz),
            "matmat_s": t_local,
            "dask_move_s": t_move,
            "move_over_matmat": t_move / t_local,
        }
    return out


# ----------------------------------------------------------------------- report
def machine():
    return {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "numba": numba.__version__,
        "cpus": os.cpu_count(),
        "load_avg": os.getloadavg(),
        "machine": platform.machine(),
    }


def print_overhead(o, n, d, k, workers):
    print(
        f"\n1. SNE, N = M = {n}, d = {d}: {workers} single-threaded workers against "
        f"{workers} Numba threads in process ({o['n_blocks']} row blocks), median seconds"
    )
    print(
        f"{'':10s} {'in-process':>11s} {'cluster':>9s} {'ratio':>7s} {'CPU ratio':>10s} "
        f"{'max rel diff':>13s}"
    )
    for name in ("setup", "matmat", "rmatmat", "sketch"):
        diff = o["max_rel_diff"].get(name)
        cpu = o["cpu_ratio_cluster_over_local"].get(name)
        print(
            f"{name:10s} {o['median_s'][name + '/local']:11.2f} "
            f"{o['median_s'][name + '/cluster']:9.2f} "
            f"{o['ratio_cluster_over_local'][name]:7.2f} "
            f"{'' if cpu is None else f'{cpu:10.2f}':>10s} "
            f"{'' if diff is None else f'{diff:13.1e}'}"
        )
    worst = max(o["ratio_cluster_over_local"][p] for p in ("matmat", "rmatmat", "sketch"))
    print(
        "CPU seconds of the client and scheduler (this process) per cluster pass: "
        + ", ".join(f"{k} {v:.2f}" for k, v in o["median_cpu_client_scheduler_s"].items())
    )
    print(
        f"target: cluster <= 1.3x per pass: {'met' if worst <= 1.3 else 'MISSED'} "
        f"(worst {worst:.2f}); throughput {o['entries_per_s_per_worker']:.3g} "
        f"entries/s per worker ({k} columns). CPU ratio: CPU seconds of the workers, "
        f"scheduler and client over those of the in-process pass (steadier under load)"
    )


def print_compressed(c, tolerances):
    print(
        f"\n2. top-{RANK}, same cluster, G as {c['tile']} x {c['tile']} map_blocks tiles; "
        f"error = max subspace sine against {c['reference']}"
    )
    print(f"{'':34s} {'seconds':>8s} {'passes':>7s} {'error':>9s}")
    for row in c["rows"]:
        name = f"{row['solver']} ({row['effort']})"
        print(f"{name:34s} {row['seconds']:8.2f} {row['passes']:7.2f} {row['error']:9.2e}")
    print("\nat the same accuracy (fastest run of each side with error <= tol):")
    c["at_tolerance"] = {}
    for tol in tolerances:
        theirs, mine = cheapest(c["rows"], "svd_compressed", tol), cheapest(c["rows"], "ours", tol)
        c["at_tolerance"][tol] = {"svd_compressed": theirs, "ours": mine}
        if theirs is None or mine is None:
            print(
                f"  tol {tol:.0e}: svd_compressed {'-' if theirs is None else 'ok'}, ours "
                f"{'-' if mine is None else 'ok'} (not reached within the efforts tried)"
            )
            continue
        ok = mine["seconds"] < theirs["seconds"] and mine["passes"] < theirs["passes"]
        print(
            f"  tol {tol:.0e}: svd_compressed {theirs['effort']} {theirs['seconds']:.2f} s, "
            f"{theirs['passes']:.0f} passes; ours {mine['solver'][5:]} {mine['effort']} "
            f"{mine['seconds']:.2f} s, {mine['passes']:.0f} passes: "
            f"{theirs['seconds'] / mine['seconds']:.2f}x faster, "
            f"{'met' if ok else 'MISSED'}"
        )


def print_structured(s, k):
    print(
        f"\n3. structured graph source, matmat with {k} columns in process against moving "
        "the operand to the workers and the answer back (no compute)"
    )
    for name, row in s.items():
        print(
            f"{name:20s} N = {row['n']:8d}: matmat {row['matmat_s']:.3f} s, Dask moves "
            f"{row['dask_move_s']:.3f} s ({row['move_over_matmat']:.1f}x)"
        )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=40000, help="N = M")
    parser.add_argument("--d", type=int, default=64)
    parser.add_argument("--k", type=int, default=40, help="columns of each operand")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--q-max", type=int, default=3, help="power iterations of both RSVDs: 0 .. this"
    )
    parser.add_argument("--tile", type=int, default=4000, help="svd_compressed tile side")
    parser.add_argument("--max-depth", type=int, default=4, help="block Krylov depths 1 .. this")
    parser.add_argument("--graph-n", type=int, default=1_000_000)
    parser.add_argument("--quick", action="store_true", help="N = 3000, tiles of 1000")
    parser.add_argument("--skip-overhead", action="store_true")
    parser.add_argument("--skip-compressed", action="store_true")
    parser.add_argument("--structured", action="store_true", help="run measurement 3")
    parser.add_argument("--out", default=None, help="write the results as JSON here")
    args = parser.parse_args(argv)
    for name in ("n", "d", "k", "workers", "repeats", "tile", "max_depth", "graph_n"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.q_max < 0:
        parser.error("--q-max must be >= 0")
    if args.quick:
        args.n, args.tile, args.graph_n = min(args.n, 3000), min(args.tile, 1000), 20000

    result = {"machine": machine(), "args": vars(args)}
    print(
        f"python {result['machine']['python']}, numba {result['machine']['numba']}, "
        f"cpus {result['machine']['cpus']}, load average {result['machine']['load_avg']}"
    )
    cluster, client = start_cluster(args.workers)
    # one BLAS thread for the solvers' small dense algebra in this process, as in the
    # workers (the nanny sets OPENBLAS_NUM_THREADS=1): svd_compressed's runs there. (Two
    # BLAS threads beside Numba's spinning threads were measured 7x slower on 2 loaded cores.)
    blas = threadpoolctl.threadpool_limits(1, user_api="blas")
    try:
        X, Z = clustered_points(args.n, args.d)
        gamma = bandwidth(args.d)
        if not args.skip_overhead:
            result["overhead"] = bench_overhead(
                client, X, Z, gamma, args.k, args.repeats, args.workers
            )
            print_overhead(result["overhead"], args.n, args.d, args.k, args.workers)
        if not args.skip_compressed:
            result["compressed"] = bench_compressed(
                client, X, Z, gamma, args.q_max, args.tile, args.max_depth
            )
            print_compressed(result["compressed"], TOLERANCES)
        if args.structured:
            result["structured"] = bench_structured(client, args.graph_n, args.k)
            print_structured(result["structured"], args.k)
    finally:
        blas.restore_original_limits()
        client.close()
        cluster.close()
    result["load_avg_after"] = os.getloadavg()
    print(f"\nload average after: {result['load_avg_after']}")
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(result, fh, indent=2, default=float)
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
