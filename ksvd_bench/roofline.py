"""The pass's roofline: a fused kernel pass timed against this machine's own BLAS (issue 21).

A pass over ``G_ij = k(x_i, z_j)`` does, per kernel entry, the work of two BLAS products:
the cross products ``X @ Z.T`` (``2 d`` flops per entry) and the product of that tile with
the pass's operand (``2 k`` flops per entry and output). BLAS doing that work on the same
points, with ``exp`` left out, is the pass's roofline: the kernel cannot run faster than the
products it is made of. The ratio

    pass seconds / BLAS seconds (same shape, dtype and thread count, timed in the same run)

does not depend on the machine's speed or on its load, so it is what the benchmarks report
and what an asv track records; 1.0 means the kernel values (distances, ``exp``, scaling) and
the tiling cost nothing beyond the products.

:func:`blas_work` is the baseline of each pass (``"matmat"``: ``X Z^T`` then times
``Omega``; ``"rmatmat"``: its transpose times ``Psi``; ``"sketch"``: both, from one ``X Z^T``;
``"setup"``: ``X Z^T`` alone), :func:`time_against_blas` times a pass and its baseline in
interleaved rounds, and :func:`roofline` measures every pass at both dtypes and a list of
thread counts (``ksvd-bench roofline``: :mod:`ksvd_bench.roofline_cli`).
"""

from __future__ import annotations

import gc
import os
import time

import numpy as np

from ksvd_bench.kernels import KernelSource
from ksvd_bench.report import machine_info
from ksvd_bench.threads import check_threads, max_threads, solver_threads

__all__ = [
    "PASSES",
    "blas_work",
    "blas_flops",
    "blas_ns_per_entry",
    "entry_rates",
    "time_against_blas",
    "pass_operands",
    "roofline",
    "format_roofline",
]

#: the passes of a lazy source that the roofline measures, and their BLAS work
PASSES = ("matmat", "rmatmat", "sketch")
#: idle seconds before each call that :func:`time_against_blas` times (see there)
SETTLE_S = 0.02
#: row bands of the BLAS baseline: ``X[band] @ Z.T`` holds at most this many bytes, so the
#: baseline's memory stays bounded at any N (a band of 32 MiB runs GEMM at full speed)
BAND_BYTES = 32 << 20


def blas_work(name, X, Z, Omega=None, Psi=None):
    """Do the BLAS products of the pass ``name`` on the points ``X`` (N, d), ``Z`` (M, d).

    ``"matmat"``: ``(X Z^T) Omega``; ``"rmatmat"``: ``(X Z^T)^T Psi``; ``"sketch"``: both
    from one ``X Z^T``; ``"setup"``: ``X Z^T`` alone. Numpy's BLAS in the dtype of ``X``
    (the operands must have it too), under whatever thread limit is in force, on row bands
    of at most :data:`BAND_BYTES`. Returns the products (None where not asked).
    """
    n, m = X.shape[0], Z.shape[0]
    band = max(1, BAND_BYTES // (m * X.itemsize))
    Zt = Z.T
    Y = np.empty((n, Omega.shape[1]), X.dtype) if name in ("matmat", "sketch") else None
    W = np.zeros((m, Psi.shape[1]), X.dtype) if name in ("rmatmat", "sketch") else None
    for a in range(0, n, band):
        b = min(a + band, n)
        C = X[a:b] @ Zt
        if Y is not None:
            np.matmul(C, Omega, out=Y[a:b])
        if W is not None:
            W += C.T @ Psi[a:b]
    return Y, W


def blas_flops(name, n, m, d, k):
    """Flops of :func:`blas_work` for ``name`` at N = n, M = m, d features, k columns."""
    outputs = {"setup": 0, "matmat": 1, "rmatmat": 1, "sketch": 2}[name]
    return 2.0 * n * m * (d + outputs * k)


def blas_ns_per_entry(
    n, m, d, k, dtype="float64", *, name="matmat", repeats=3, max_entries=1 << 22, seed=0
):
    """ns per kernel entry of BLAS doing the products of the pass ``name`` at this shape.

    Times :func:`blas_work` on Gaussian points, ``d`` features, ``k`` columns, in ``dtype``,
    under whatever thread limit is in force; on a slab of at most ``max_entries`` entries
    (all M columns, ``max_entries // M`` rows, at least one): the rate per entry does not
    depend on N, and a study at N = 1e5 must not pay a full pass for its baseline. The
    median of ``repeats`` timings after one untimed call.
    """
    rows = max(1, min(n, max_entries // m))
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((rows, d)).astype(dtype)
    Z = rng.standard_normal((m, d)).astype(dtype)
    Omega = rng.standard_normal((m, k)).astype(dtype)
    Psi = rng.standard_normal((rows, k)).astype(dtype)
    times = []
    for _ in range(repeats + 1):
        t0 = time.perf_counter()
        blas_work(name, X, Z, Omega=Omega, Psi=Psi)
        times.append(time.perf_counter() - t0)
    return 1e9 * float(np.median(times[1:])) / (rows * m)


def entry_rates(seconds, entries, blas_ns=None):
    """``{"ns_per_entry", "blas_ns_per_entry", "blas_ratio"}`` of a timed run.

    ``seconds`` spent evaluating ``entries`` kernel entries (all its passes), against BLAS's
    ns per entry on the same products (:func:`blas_ns_per_entry`, same shape, dtype and
    threads; None: not measured). A whole solve also does work that is not a pass (small
    QR and SVD factorisations, sampled rows), so its ratio is an upper bound on its passes'.
    Values are None where they cannot be computed (no entries, no baseline).
    """
    ns = 1e9 * seconds / entries if entries else None
    return {
        "ns_per_entry": ns,
        "blas_ns_per_entry": blas_ns,
        "blas_ratio": None if ns is None or not blas_ns else ns / blas_ns,
    }


def pass_operands(n, m, k, dtype, seed=0):
    """Seeded ``Omega`` (m, k) and ``Psi`` (n, k) in float64, and their copies in ``dtype``."""
    rng = np.random.default_rng(seed)
    Omega = rng.standard_normal((m, k))
    Psi = rng.standard_normal((n, k))
    return Omega, Psi, Omega.astype(dtype), Psi.astype(dtype)


def time_against_blas(fns, repeats, settle=SETTLE_S):
    """Median seconds of each ``(pass, blas)`` pair, timed in interleaved rounds.

    ``fns`` maps a name to ``(pass_fn, blas_fn)``. Each round times every pass right after
    its own baseline, so background load hits both alike; the reported ratios are the
    medians of the rounds' ratios, of wall time and of this process's CPU time (all its
    threads). On a shared machine the CPU time is the steadier of the two (other processes
    take wall time, not this process's CPU time); with several threads it also counts the
    time threads spin while they wait. Call every function once before (compile, page
    faults).

    Each timed call starts after ``settle`` idle seconds, so that the idle threads of the call
    before (Numba's OpenMP workers, OpenBLAS's) have stopped spinning and take no cores, or
    CPU time, from it. OpenBLAS's spin lasts ``2**OPENBLAS_THREAD_TIMEOUT`` clock ticks, about
    0.1 s by default: far longer than the pause, so run with a short one
    (:func:`ksvd_bench.threads.quiet_blas_spin`, which ``ksvd-bench`` calls;
    :func:`ksvd_bench.threads.solver_threads` warns).

    Returns
    -------
    dict
        name -> ``{"pass_s", "blas_s", "ratio", "pass_cpu_s", "blas_cpu_s", "cpu_ratio",
        "ratios", "cpu_ratios"}`` (medians; the last two per round).
    """
    wall = {name: ([], []) for name in fns}
    cpu = {name: ([], []) for name in fns}
    for _ in range(repeats):
        for name, (pass_fn, blas_fn) in fns.items():
            for i, fn in ((1, blas_fn), (0, pass_fn)):
                gc.collect()
                time.sleep(settle)
                t0, c0 = time.perf_counter(), time.process_time()
                fn()
                wall[name][i].append(time.perf_counter() - t0)
                cpu[name][i].append(time.process_time() - c0)
    out = {}
    for name in fns:
        row = {}
        for key, (tp, tb) in (("", wall[name]), ("cpu_", cpu[name])):
            ratios = [p / max(b, 1e-9) for p, b in zip(tp, tb, strict=True)]
            row.update(
                {
                    f"pass_{key}s": float(np.median(tp)),
                    f"blas_{key}s": float(np.median(tb)),
                    f"{key}ratio": float(np.median(ratios)),
                    f"{key}ratios": ratios,
                }
            )
        out[name] = row
    return out


def _one_setting(n, m, d, k, dtype, threads, kernel, repeats, seed, settle):
    """Rows of :func:`roofline` for one dtype and thread count."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    Z = rng.standard_normal((m, d))
    Omega, Psi, Om_d, Psi_d = pass_operands(n, m, k, dtype, seed + 1)
    # the stored points (translated and scaled by the source) are what the pass multiplies
    Xd, Zd = X.astype(dtype), Z.astype(dtype)
    gamma = float(np.sqrt(2.0 * d))
    with solver_threads(threads):
        S = KernelSource.from_points(X, Z, kernel, gamma=gamma, dtype=dtype)
        fns = {
            "matmat": (lambda: S.matmat(Omega), lambda: blas_work("matmat", Xd, Zd, Omega=Om_d)),
            "rmatmat": (lambda: S.rmatmat(Psi), lambda: blas_work("rmatmat", Xd, Zd, Psi=Psi_d)),
            "sketch": (
                lambda: S.sketch(Omega, Psi),
                lambda: blas_work("sketch", Xd, Zd, Omega=Om_d, Psi=Psi_d),
            ),
        }
        for pair in fns.values():  # warm-up: compile or cache load, first-touch page faults
            for fn in pair:
                fn()
        timed = time_against_blas(fns, repeats, settle)
    rows = []
    for name, t in timed.items():
        flops = blas_flops(name, n, m, d, k)
        rows.append(
            {
                "dtype": np.dtype(dtype).name,
                "threads": threads,
                "pass": name,
                **t,
                "pass_ns_per_entry": 1e9 * t["pass_s"] / (n * m),
                "blas_ns_per_entry": 1e9 * t["blas_s"] / (n * m),
                "blas_gflops": flops / t["blas_s"] / 1e9,
                "pass_cpu_ns_per_entry": 1e9 * t["pass_cpu_s"] / (n * m),
                "blas_cpu_ns_per_entry": 1e9 * t["blas_cpu_s"] / (n * m),
            }
        )
    return rows


def roofline(
    n=4000,
    m=None,
    d=64,
    k=40,
    *,
    dtypes=("float32", "float64"),
    threads=None,
    kernel="rbf",
    repeats=5,
    seed=0,
    settle=SETTLE_S,
):
    """Measure every pass of :data:`PASSES` against its BLAS work (see the module docstring).

    Parameters
    ----------
    n, m : int
        Rows and columns of G (``m=None``: ``m = n``).
    d : int
        Features of the Gaussian points.
    k : int
        Columns of ``Omega`` and of ``Psi`` (the sketch uses both).
    dtypes : sequence of {"float32", "float64"}
        Storage dtypes of the sources (and of the baseline's BLAS).
    threads : sequence of int, optional
        Numba and BLAS thread counts (default: 1 and Numba's pool, NUMBA_NUM_THREADS).
    kernel : str
        The source's kernel (default "rbf", bandwidth ``sqrt(2 d)``).
    repeats : int
        Interleaved rounds per setting; medians are reported.
    seed : int
        Seed of the points and operands.
    settle : float
        Idle seconds before each timed call (:func:`time_against_blas`).

    Returns
    -------
    dict
        ``"rows"``: one dict per dtype x threads x pass (:func:`time_against_blas`'s medians,
        ns per entry of the pass and of BLAS, BLAS GFLOP/s); ``"shape"``; ``"machine"``:
        :func:`ksvd_bench.report.machine_info` plus the 1-minute load average before and
        after the run.
    """
    m = n if m is None else m
    for name, v in (("n", n), ("m", m), ("d", d), ("k", k), ("repeats", repeats)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    if isinstance(settle, bool) or not isinstance(settle, (int, float)) or not settle >= 0:
        raise ValueError(f"settle must be a number of seconds >= 0, got {settle!r}")
    dtypes = tuple(np.dtype(t).name for t in dtypes)
    bad = [t for t in dtypes if t not in ("float32", "float64")]
    if bad or not dtypes:
        raise ValueError(f"dtypes must be among float32, float64, got {dtypes}")
    threads = (1, max_threads()) if threads is None else tuple(threads)
    threads = tuple(dict.fromkeys(check_threads(t) for t in threads))
    load0 = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    rows = []
    for dtype in dtypes:
        for t in threads:
            rows += _one_setting(n, m, d, k, dtype, t, kernel, repeats, seed, settle)
    machine = machine_info()
    load1 = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    machine["load_1min"] = [None if v is None else round(v, 2) for v in (load0, load1)]
    return {
        "shape": {
            "n": n,
            "m": m,
            "d": d,
            "k": k,
            "kernel": kernel,
            "repeats": repeats,
            "settle_s": settle,
        },
        "rows": rows,
        "machine": machine,
    }


def format_roofline(result):
    """The terminal table of :func:`roofline`: BLAS rates, then each pass's ratio."""
    sh = result["shape"]
    mc = result["machine"]
    lines = [
        f"roofline: {sh['kernel']} kernel, N = {sh['n']}, M = {sh['m']}, d = {sh['d']}, "
        f"{sh['k']} columns (sketch: {sh['k']} + {sh['k']}), median of {sh['repeats']} "
        f"interleaved rounds, {sh.get('settle_s', 0)} s idle before each timed call",
        f"machine: {mc.get('processor')}, {mc.get('cpu_count')} CPUs, numpy "
        f"{mc.get('numpy')}, numba {mc.get('numba')}, BLAS "
        + ", ".join(
            f"{b.get('internal_api')} {b.get('version')} ({b.get('architecture')})"
            for b in mc.get("blas", [])
        )
        + f"; OPENBLAS_THREAD_TIMEOUT {mc.get('openblas_thread_timeout') or 'unset (28)'}"
        + f"; 1-minute load {mc['load_1min'][0]} before, {mc['load_1min'][1]} after",
        "",
        "wall: elapsed time; CPU: this process's CPU time, all threads (steadier on "
        "a shared machine); ratio: median over the rounds of pass / BLAS",
        f"{'dtype':8s} {'threads':>7s} {'pass':8s} {'pass ns/entry':>14s} "
        f"{'BLAS ns/entry':>14s} {'BLAS GFLOP/s':>13s} {'wall ratio':>11s} "
        f"{'CPU ratio':>10s}",
    ]
    for r in result["rows"]:
        lines.append(
            f"{r['dtype']:8s} {r['threads']:7d} {r['pass']:8s} "
            f"{r['pass_ns_per_entry']:14.2f} {r['blas_ns_per_entry']:14.2f} "
            f"{r['blas_gflops']:13.1f} {r['ratio']:10.2f}x {r['cpu_ratio']:9.2f}x"
        )
    return "\n".join(lines)
