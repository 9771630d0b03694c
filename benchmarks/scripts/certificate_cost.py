"""What the certificate costs beside the solve (issue 32, section 2).

Default (``--kernel``): ``solvers.rsvd``, ``solvers.block_krylov`` and
``solvers.asym_nystrom`` (200 uniform samples) at rank 20 on a lazy RBF source, N = M =
10,000 points in d = 64 (the kernel is recomputed at every pass), each run with
``check_passes=0`` and at its default certificate, interleaved (off, on, off, on, ...) so
that a shared machine's load hits both alike. Reports, per method, the passes and entries
read exactly from ``info`` (``n_passes``, ``check_passes``, ``entries_read``) and the
certificate's share of the solve's time as the ratio of the medians::

    NUMBA_NUM_THREADS=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \\
        python benchmarks/scripts/certificate_cost.py --n 10000 --repeat 2

``--dense-work`` instead times the certificate's own work outside the passes: rsvd (rank
20, p = 10, q = 0) on a rank-30 ``LinearOperator`` ``U V^T`` whose products cost a few
milliseconds, so the time is the dense work on N x (rank + probes) blocks (deflations,
Gram matrices, singular values): what a GPU source leaves to the CPU.
"""

from __future__ import annotations

import argparse
import importlib
import json
import time
import warnings

import numpy as np
import scipy.sparse.linalg as sla

import solvers

# the module, not the function that ``solvers`` exports under the same name
rsvd_module = importlib.import_module("solvers.rsvd")
krylov_module = importlib.import_module("solvers.krylov")
nystrom_module = importlib.import_module("solvers.nystrom")


def dense_work(n, repeat):
    rng = np.random.default_rng(0)
    U = rng.standard_normal((n, 30))
    V = rng.standard_normal((n, 30))
    op = sla.LinearOperator(
        (n, n),
        matvec=lambda x: U @ (V.T @ x),
        rmatvec=lambda x: V @ (U.T @ x),
        matmat=lambda X: U @ (V.T @ X),
        rmatmat=lambda X: V @ (U.T @ X),
        dtype=np.float64,
    )
    spent = []
    inner = rsvd_module.certify_answer

    def timed(*a, **k):
        t = time.perf_counter()
        out = inner(*a, **k)
        spent.append(time.perf_counter() - t)
        return out

    rsvd_module.certify_answer = timed
    totals = []
    try:
        for _ in range(repeat + 1):
            t = time.perf_counter()
            res = rsvd_module.rsvd(op, 20, n_oversamples=10, n_iter=0, random_state=0)
            totals.append(time.perf_counter() - t)
    finally:
        rsvd_module.certify_answer = inner
    print(
        f"N = {n}: rsvd {np.median(totals[1:]):.2f} s, of which the certificate "
        f"{np.median(spent[1:]):.2f} s (median of {repeat}; reliable = "
        f"{res.info.get('reliable')})"
    )


METHODS = {
    "rsvd": {},
    "block_krylov": {},
    "asym_nystrom": {"n_samples": 200, "sampling": "uniform"},
}


def kernel(n, d, rank, repeat, methods, out):
    from ksvd_bench.kernels import KernelSource

    rng = np.random.default_rng(0)
    X, Z = rng.standard_normal((n, d)), rng.standard_normal((n, d))
    src = KernelSource.from_points(X, Z, "rbf", gamma=float(np.sqrt(2 * d)), setup="lazy")
    small = KernelSource.from_points(X[:300], Z[:300], "rbf", gamma=float(np.sqrt(2 * d)))
    for method in methods:  # warm-up: compiled kernels and imports, outside the timings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            solvers.svd(small, rank, method=method, random_state=0, **METHODS[method])
    # the certificate's own seconds inside each run (its products and dense work; the
    # fused probes' columns in the solve's last pass are the solve's)
    spent = []
    patched = []
    for module, name in (
        (rsvd_module, "certify_answer"),
        (krylov_module, "certify_answer"),
        (nystrom_module, "certify"),
    ):
        inner = getattr(module, name)

        def timed(*a, _inner=inner, **k):
            t = time.perf_counter()
            out = _inner(*a, **k)
            spent.append(time.perf_counter() - t)
            return out

        setattr(module, name, timed)
        patched.append((module, name, inner))
    try:
        return _kernel_runs(src, rank, repeat, methods, out, spent, (n, d))
    finally:
        for module, name, inner in patched:
            setattr(module, name, inner)


def _kernel_runs(src, rank, repeat, methods, out, spent, size):
    n, d = size
    rows = []
    for method in methods:
        times = {0: [], None: []}
        inside = []
        info = {}
        for _ in range(repeat):
            for check in (0, None):  # interleaved: off, then the default
                opts = dict(METHODS[method])
                if check == 0:
                    opts["check_passes"] = 0
                spent.clear()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    res = solvers.svd(src, rank, method=method, random_state=0, **opts)
                times[check].append(float(res.info["seconds"]))
                if check is None:
                    total = float(res.info["seconds"])
                    inside.append(sum(spent) / max(total - sum(spent), 1e-12))
                info[check] = res.info
        off, on = float(np.median(times[0])), float(np.median(times[None]))
        cert = info[None].get("certificate") or {}
        row = {
            "method": method,
            "seconds_off": off,
            "seconds_on": on,
            "share": (on - off) / off,
            "share_in_run": float(np.median(inside)),
            "times_off": times[0],
            "times_on": times[None],
            "n_passes_off": float(info[0]["n_passes"]),
            "n_passes_on": float(info[None]["n_passes"]),
            "check_passes": int(info[None].get("check_passes", 0)),
            "entries_read_off": float(info[0].get("entries_read", np.nan)),
            "entries_read_on": float(info[None].get("entries_read", np.nan)),
            "reliable": info[None].get("reliable"),
            "upper_kind": cert.get("upper_kind"),
        }
        rows.append(row)
        print(
            f"{method}: off {off:.2f} s, default certificate {on:.2f} s (+{row['share']:.0%}; "
            f"in the run: {row['share_in_run']:.0%} of the rest); "
            f"passes {row['n_passes_off']:.3g} -> {row['n_passes_on']:.3g} "
            f"(certificate {row['n_passes_on'] - row['n_passes_off']:.3g}); "
            f"reliable = {row['reliable']}",
            flush=True,
        )
    if out:
        meta = {"n": n, "d": d, "rank": rank, "repeat": repeat, "kernel": "rbf, lazy"}
        with open(out, "w") as fh:
            json.dump({"meta": meta, "rows": rows}, fh, indent=1, default=str)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--rank", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--out", default="", help="write the rows as JSON here")
    ap.add_argument("--dense-work", action="store_true", help="the old low-rank operator run")
    args = ap.parse_args(argv)
    if args.dense_work:
        dense_work(args.n, args.repeat)
        return
    kernel(args.n, args.d, args.rank, args.repeat, args.methods.split(","), args.out)


if __name__ == "__main__":
    main()
