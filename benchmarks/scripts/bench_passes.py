"""Time the fused passes of a lazy ``KernelSource`` against building the dense kernel matrix.

Issue 9, item 2. On the same points (N = M, dense, d = 64, SNE, uncentred) it times

* ``kernel_matrix(X, Z)``: the dense builder (the baseline; writes all N x M entries);
* ``KernelSource.from_points(X, Z)``: the set-up pass (SNE shifts and normalisers);
* ``S.matmat(Omega)`` with 40 columns, ``S.rmatmat(Psi)`` with 40 columns, and
  ``S.sketch(Omega, Psi)`` with 40 + 40 columns (one pass for both products).

Targets: matmat / kernel_matrix <= 1.0 and sketch / kernel_matrix <= 1.3.

The roofline (issue 21): every pass is also timed against this machine's BLAS doing the
pass's products at the same shape, dtype and thread count (:func:`ksvd_bench.roofline.blas_work`:
``X Z^T``, then times ``Omega`` and/or ``Psi``; exp left out), interleaved in the same
rounds, and reported as ns per kernel entry and the ratio pass / BLAS (the median of the
rounds' ratios, wall and CPU time). Targets: float32 matmat, rmatmat and sketch <= 1.2x,
float64 <= 1.1x (``--dtype``, ``--threads``).

Every function is first run once on the full problem (Numba compile or cache load, page
faults); then ``--repeats`` interleaved rounds are timed and the median is reported, so
background load hits all of them alike. ``--large N`` additionally times one set-up, one
matmat and one sketch at N = M = ``N`` (no dense baseline: it would not fit in memory).

Run from the repository root::

    python benchmarks/scripts/bench_passes.py                  # N = 12000, ~1.2 GB for G
    python benchmarks/scripts/bench_passes.py --quick          # N = 2000, seconds
    python benchmarks/scripts/bench_passes.py --large 40000 --out passes.json
    python benchmarks/scripts/bench_passes.py --size 4000 --dtype float32 --threads 1
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import time
from pathlib import Path

import numba
import numpy as np

from ksvd_bench.kernels import KernelSource, kernel_matrix
from ksvd_bench.kernels.backends import cpu as fused
from ksvd_bench.roofline import blas_ns_per_entry, blas_work, entry_rates, pass_operands
from ksvd_bench.threads import solver_threads

#: each timed pass and the BLAS work it is measured against (ksvd_bench.roofline.blas_work)
BLAS_OF = {"setup": "setup", "matmat": "matmat", "rmatmat": "rmatmat", "sketch": "sketch"}
#: roofline targets (pass / BLAS), issue 21
BLAS_TARGETS = {"float32": 1.2, "float64": 1.1}


def points(n, d, seed=0):
    """Two independent Gaussian point sets (asymmetric: no symmetric shortcut)."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, d)), rng.standard_normal((n, d))


def median_times(fns, repeats):
    """Median wall and CPU seconds of each named function over interleaved rounds.

    CPU time (all threads of this process, page faults included) is less sensitive to
    other processes on a shared machine than wall time; both are reported.
    """
    wall = {name: [] for name in fns}
    cpu = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            gc.collect()
            t0, c0 = time.perf_counter(), time.process_time()
            out = fn()
            wall[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
            del out
    med = {name: float(np.median(t)) for name, t in wall.items()}
    med_cpu = {name: float(np.median(t)) for name, t in cpu.items()}
    return med, med_cpu, wall, cpu


def blas_ratios(raw, entries):
    """ns per entry of each pass and of its BLAS work, and the median per-round ratio."""
    out = {}
    for name in BLAS_OF:
        p, b = np.asarray(raw[name]), np.asarray(raw["blas_" + name])
        out[name] = {
            "ns_per_entry": 1e9 * float(np.median(p)) / entries,
            "blas_ns_per_entry": 1e9 * float(np.median(b)) / entries,
            "ratio": float(np.median(p / b)),
        }
    return out


def check_accuracy(S, X, Z, gamma, Omega, Psi, n_rows=64):
    """Max |error| of matmat / sketch rows against the dense kernel on a row sample."""
    rows = np.linspace(0, X.shape[0] - 1, n_rows).astype(int)
    # SNE rows are normalised alone; the reference is float64 whatever the source's dtype
    G_rows = kernel_matrix(X[rows], Z, "sne", gamma=gamma)
    Y, W = S.sketch(Omega, Psi)
    err_y = float(np.abs(Y[rows] - G_rows @ Omega).max())
    err_m = float(np.abs(S.matmat(Omega)[rows] - G_rows @ Omega).max())
    cols = rows[:8]
    err_w = float(np.abs(W[cols] - S.cols(cols).T @ Psi).max())
    return {"matmat_rows": err_m, "sketch_Y_rows": err_y, "sketch_W_cols": err_w}


def bench_main(n, d, k, repeats, dtype="float64"):
    X, Z = points(n, d)
    gamma = float(np.sqrt(2.0 * d))  # distances of order 2d: a non-degenerate SNE
    Omega, Psi, Om_d, Psi_d = pass_operands(n, n, k, dtype, seed=1)
    Xd, Zd = X.astype(dtype), Z.astype(dtype)
    kw = {"gamma": gamma, "dtype": dtype}
    S = KernelSource.from_points(X, Z, "sne", **kw)  # compiles / loads the kernels
    passes = {
        "kernel_matrix": lambda: kernel_matrix(X, Z, "sne", **kw),
        "setup": lambda: KernelSource.from_points(X, Z, "sne", **kw),
        "matmat": lambda: S.matmat(Omega),
        "rmatmat": lambda: S.rmatmat(Psi),
        "sketch": lambda: S.sketch(Omega, Psi),
    }
    fns = {}
    for name, fn in passes.items():  # each pass right after its BLAS work, in every round
        if name in BLAS_OF:
            fns["blas_" + name] = lambda w=BLAS_OF[name]: blas_work(
                w, Xd, Zd, Omega=Om_d, Psi=Psi_d
            )
        fns[name] = fn
    for fn in fns.values():  # warm-up: compile/cache load and first-touch page faults
        fn()
    med, med_cpu, raw, raw_cpu = median_times(fns, repeats)
    return {
        "n": n,
        "d": d,
        "k": k,
        "dtype": dtype,
        "repeats": repeats,
        "median_s": med,
        "all_s": raw,
        "median_cpu_s": med_cpu,
        "ratios": {name: med[name] / med["kernel_matrix"] for name in passes},
        "cpu_ratios": {name: med_cpu[name] / med_cpu["kernel_matrix"] for name in passes},
        "blas": blas_ratios(raw, n * n),
        "blas_cpu": blas_ratios(raw_cpu, n * n),
        "accuracy": check_accuracy(S, X, Z, gamma, Omega, Psi),
        "tiles": [S.chunk_rows, S.chunk_cols],
    }


def bench_large(n, d, k, dtype="float64"):
    """One set-up, matmat and sketch at N = M = n, each with its ns per entry and its ratio
    to BLAS on the same products (timed on a slab of rows: a full BLAS pass would not fit)."""
    X, Z = points(n, d)
    gamma = float(np.sqrt(2.0 * d))
    Omega, Psi = pass_operands(n, n, k, dtype, seed=1)[:2]
    t0 = time.perf_counter()
    S = KernelSource.from_points(X, Z, "sne", gamma=gamma, dtype=dtype)
    t_setup = time.perf_counter() - t0
    t0 = time.perf_counter()
    S.matmat(Omega)
    t_matmat = time.perf_counter() - t0
    t0 = time.perf_counter()
    S.sketch(Omega, Psi)
    t_sketch = time.perf_counter() - t0
    out = {
        "n": n,
        "d": d,
        "k": k,
        "dtype": dtype,
        "setup_s": t_setup,
        "matmat_s": t_matmat,
        "sketch_s": t_sketch,
    }
    for name, t in (("setup", t_setup), ("matmat", t_matmat), ("sketch", t_sketch)):
        out[name] = entry_rates(t, n * n, blas_ns_per_entry(n, n, d, k, dtype, name=name))
    return out


def machine():
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "numba": numba.__version__,
        "numba_threads": numba.get_num_threads(),
        "cpus": os.cpu_count(),
        "load_avg": load,
        "machine": platform.machine(),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=12000, help="N = M of the main case")
    parser.add_argument("--dim", type=int, default=64, help="d")
    parser.add_argument(
        "--cols", type=int, default=40, help="columns of Omega and of Psi (sketch uses both)"
    )
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--dtype",
        choices=("float64", "float32"),
        default="float64",
        help="storage dtype of the source (and of the BLAS baseline)",
    )
    parser.add_argument(
        "--threads", type=int, default=None, help="Numba and BLAS threads (default: Numba's count)"
    )
    parser.add_argument("--quick", action="store_true", help="N = 2000, 3 repeats")
    parser.add_argument(
        "--large",
        type=int,
        default=None,
        metavar="N",
        help="also time one set-up/matmat/sketch at N = M = this",
    )
    parser.add_argument(
        "--tile-rows",
        type=int,
        default=None,
        help="override the tile rows (tuning; default: the library's)",
    )
    parser.add_argument(
        "--tile-cols", type=int, default=None, help="override the largest tile columns (tuning)"
    )
    parser.add_argument("--out", default=None, help="write the results as JSON here")
    args = parser.parse_args(argv)
    for name in ("size", "dim", "cols", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1")
    if args.large is not None and args.large < 1:
        parser.error("--large must be >= 1")
    if args.out is not None:
        out = Path(args.out)
        if not args.out or out.is_dir() or not out.parent.is_dir():
            parser.error(f"--out {args.out!r}: not a file path in an existing directory")
    if args.quick:
        args.size, args.repeats = min(args.size, 2000), 3
    if args.tile_rows:
        fused.TILE_ROWS = args.tile_rows
    if args.tile_cols:
        fused.TILE_COLS = args.tile_cols

    with solver_threads(args.threads) as threads:
        info = machine()
        print(
            f"python {info['python']}, numpy {info['numpy']}, numba {info['numba']}, "
            f"Numba and BLAS threads {threads}, cpus {info['cpus']}, "
            f"load average {info['load_avg']}"
        )
        result = {
            "machine": info,
            "main": bench_main(args.size, args.dim, args.cols, args.repeats, args.dtype),
        }
    main_ = result["main"]
    print(
        f"\nSNE, {args.dtype}, N = M = {args.size}, d = {args.dim}, {args.cols} columns "
        f"(sketch: {args.cols} + {args.cols}), tiles {main_['tiles']}, median of "
        f"{args.repeats} interleaved rounds"
    )
    ratio = "/ kernel_matrix"
    print(
        f"{'':16s} {'wall s':>9s} {ratio:>16s} {'CPU s':>9s} {ratio:>16s} "
        f"{'ns/entry':>9s} {'BLAS ns/entry':>14s} {'/ BLAS':>7s} {'CPU / BLAS':>11s}"
    )
    for name in main_["ratios"]:
        line = (
            f"{name:16s} {main_['median_s'][name]:9.3f} {main_['ratios'][name]:16.2f} "
            f"{main_['median_cpu_s'][name]:9.3f} {main_['cpu_ratios'][name]:16.2f}"
        )
        if name in main_["blas"]:
            b, c = main_["blas"][name], main_["blas_cpu"][name]
            line += (
                f" {b['ns_per_entry']:9.2f} {b['blas_ns_per_entry']:14.2f} "
                f"{b['ratio']:6.2f}x {c['ratio']:10.2f}x"
            )
        print(line)
    print(
        "/ BLAS: median over the rounds of pass / BLAS doing the pass's products (X Z^T, "
        "then times Omega and/or Psi; set-up: X Z^T alone) at the same shape, dtype and "
        "threads"
    )
    print(f"max |error| on sampled rows/cols: {main_['accuracy']}")
    ok_m = main_["ratios"]["matmat"] <= 1.0
    ok_s = main_["ratios"]["sketch"] <= 1.3
    print(
        f"targets (wall): matmat <= 1.0x ({'met' if ok_m else 'MISSED'}), "
        f"sketch <= 1.3x ({'met' if ok_s else 'MISSED'})"
    )
    target = BLAS_TARGETS[args.dtype]
    worst = max(main_["blas"][p]["ratio"] for p in ("matmat", "rmatmat", "sketch"))
    print(
        f"roofline target ({args.dtype}, wall): matmat, rmatmat and sketch <= {target}x "
        f"BLAS ({'met' if worst <= target else 'MISSED'}: worst {worst:.2f}x)"
    )
    if args.large:
        with solver_threads(args.threads):
            large = bench_large(args.large, args.dim, args.cols, args.dtype)
        result["large"] = large
        print(
            f"\nN = M = {args.large}: set-up {large['setup_s']:.2f} s, one matmat "
            f"{large['matmat_s']:.2f} s, one sketch {large['sketch_s']:.2f} s"
        )
        for name in ("setup", "matmat", "sketch"):
            r = large[name]
            print(
                f"  {name:7s} {r['ns_per_entry']:8.2f} ns/entry, BLAS "
                f"{r['blas_ns_per_entry']:8.2f} ns/entry, pass / BLAS {r['blas_ratio']:.2f}x"
            )
    if args.out:
        tmp = Path(args.out).with_suffix(".tmp")
        tmp.write_text(json.dumps(result, indent=2))
        tmp.replace(args.out)  # atomic: no half-written file
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
