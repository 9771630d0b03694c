"""Time the fused passes of a lazy ``KernelSource`` against building the dense kernel matrix.

Issue 9, item 2. On the same points (N = M, dense, d = 64, SNE, uncentred) it times

* ``kernel_matrix(X, Z)``: the dense builder (the baseline; writes all N x M entries);
* ``KernelSource.from_points(X, Z)``: the set-up pass (SNE shifts and normalisers);
* ``S.matmat(Omega)`` with 40 columns, ``S.rmatmat(Psi)`` with 40 columns, and
  ``S.sketch(Omega, Psi)`` with 40 + 40 columns (one pass for both products).

Targets: matmat / kernel_matrix <= 1.0 and sketch / kernel_matrix <= 1.3.

Every function is first run once on the full problem (Numba compile or cache load, page
faults); then ``--repeats`` interleaved rounds are timed and the median is reported, so
background load hits all of them alike. ``--large N`` additionally times one set-up, one
matmat and one sketch at N = M = ``N`` (no dense baseline: it would not fit in memory).

Run from the repository root::

    python benchmarks/scripts/bench_passes.py                  # N = 12000, ~1.2 GB for G
    python benchmarks/scripts/bench_passes.py --quick          # N = 2000, seconds
    python benchmarks/scripts/bench_passes.py --large 40000 --out passes.json
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
    return med, med_cpu, wall


def check_accuracy(S, X, Z, gamma, Omega, Psi, n_rows=64):
    """Max |error| of matmat / sketch rows against the dense kernel on a row sample."""
    rows = np.linspace(0, X.shape[0] - 1, n_rows).astype(int)
    G_rows = kernel_matrix(X[rows], Z, "sne", gamma=gamma)  # SNE rows are normalised alone
    Y, W = S.sketch(Omega, Psi)
    err_y = float(np.abs(Y[rows] - G_rows @ Omega).max())
    err_m = float(np.abs(S.matmat(Omega)[rows] - G_rows @ Omega).max())
    cols = rows[:8]
    err_w = float(np.abs(W[cols] - S.cols(cols).T @ Psi).max())
    return {"matmat_rows": err_m, "sketch_Y_rows": err_y, "sketch_W_cols": err_w}


def bench_main(n, d, k, repeats):
    X, Z = points(n, d)
    gamma = float(np.sqrt(2.0 * d))  # distances of order 2d: a non-degenerate SNE
    rng = np.random.default_rng(1)
    Omega = rng.standard_normal((n, k))
    Psi = rng.standard_normal((n, k))
    S = KernelSource.from_points(X, Z, "sne", gamma=gamma)  # compiles / loads the kernels
    fns = {
        "kernel_matrix": lambda: kernel_matrix(X, Z, "sne", gamma=gamma),
        "setup": lambda: KernelSource.from_points(X, Z, "sne", gamma=gamma),
        "matmat": lambda: S.matmat(Omega),
        "rmatmat": lambda: S.rmatmat(Psi),
        "sketch": lambda: S.sketch(Omega, Psi),
    }
    for fn in fns.values():  # warm-up: compile/cache load and first-touch page faults
        fn()
    med, med_cpu, raw = median_times(fns, repeats)
    return {
        "n": n, "d": d, "k": k, "repeats": repeats, "median_s": med, "all_s": raw,
        "median_cpu_s": med_cpu,
        "ratios": {name: med[name] / med["kernel_matrix"] for name in med},
        "cpu_ratios": {name: med_cpu[name] / med_cpu["kernel_matrix"] for name in med_cpu},
        "accuracy": check_accuracy(S, X, Z, gamma, Omega, Psi),
        "tiles": [S.chunk_rows, S.chunk_cols],
    }


def bench_large(n, d, k):
    X, Z = points(n, d)
    gamma = float(np.sqrt(2.0 * d))
    rng = np.random.default_rng(1)
    Omega = rng.standard_normal((n, k))
    Psi = rng.standard_normal((n, k))
    t0 = time.perf_counter()
    S = KernelSource.from_points(X, Z, "sne", gamma=gamma)
    t_setup = time.perf_counter() - t0
    t0 = time.perf_counter()
    S.matmat(Omega)
    t_matmat = time.perf_counter() - t0
    t0 = time.perf_counter()
    S.sketch(Omega, Psi)
    t_sketch = time.perf_counter() - t0
    return {"n": n, "d": d, "k": k, "setup_s": t_setup, "matmat_s": t_matmat,
            "sketch_s": t_sketch}


def machine():
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {"python": platform.python_version(), "numpy": np.__version__,
            "numba": numba.__version__, "numba_threads": numba.get_num_threads(),
            "cpus": os.cpu_count(), "load_avg": load, "machine": platform.machine()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=12000, help="N = M of the main case")
    parser.add_argument("--dim", type=int, default=64, help="d")
    parser.add_argument("--cols", type=int, default=40,
                        help="columns of Omega and of Psi (sketch uses both)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="N = 2000, 3 repeats")
    parser.add_argument("--large", type=int, default=None, metavar="N",
                        help="also time one set-up/matmat/sketch at N = M = this")
    parser.add_argument("--tile-rows", type=int, default=None,
                        help="override the tile rows (tuning; default: the library's)")
    parser.add_argument("--tile-cols", type=int, default=None,
                        help="override the largest tile columns (tuning)")
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

    info = machine()
    print(f"python {info['python']}, numpy {info['numpy']}, numba {info['numba']}, "
          f"Numba threads {info['numba_threads']}, cpus {info['cpus']}, "
          f"load average {info['load_avg']}")
    result = {"machine": info, "main": bench_main(args.size, args.dim, args.cols,
                                                  args.repeats)}
    main_ = result["main"]
    print(f"\nSNE, N = M = {args.size}, d = {args.dim}, {args.cols} columns (sketch: "
          f"{args.cols} + {args.cols}), tiles {main_['tiles']}, median of {args.repeats}")
    ratio = "/ kernel_matrix"
    print(f"{'':16s} {'wall s':>9s} {ratio:>16s} {'CPU s':>9s} {ratio:>16s}")
    for name, t in main_["median_s"].items():
        print(f"{name:16s} {t:9.3f} {main_['ratios'][name]:16.2f} "
              f"{main_['median_cpu_s'][name]:9.3f} {main_['cpu_ratios'][name]:16.2f}")
    print(f"max |error| on sampled rows/cols: {main_['accuracy']}")
    ok_m = main_["ratios"]["matmat"] <= 1.0
    ok_s = main_["ratios"]["sketch"] <= 1.3
    print(f"targets (wall): matmat <= 1.0x ({'met' if ok_m else 'MISSED'}), "
          f"sketch <= 1.3x ({'met' if ok_s else 'MISSED'})")
    if args.large:
        large = bench_large(args.large, args.dim, args.cols)
        result["large"] = large
        print(f"\nN = M = {args.large}: set-up {large['setup_s']:.2f} s, one matmat "
              f"{large['matmat_s']:.2f} s, one sketch {large['sketch_s']:.2f} s")
    if args.out:
        tmp = Path(args.out).with_suffix(".tmp")
        tmp.write_text(json.dumps(result, indent=2))
        tmp.replace(args.out)  # atomic: no half-written file
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
