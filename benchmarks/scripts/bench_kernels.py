"""Time ``kernel_matrix`` (SNE) against a plain numpy reference and against writing G.

Cases (issue 2, "Benchmark"):

(a) dense data, N x N output from two sets of N points in d dimensions (default N = 8000,
    d = 64): ``kernel_matrix(X, Z, "sne")`` vs the numpy reference (GEMM distances, ``np.exp``,
    row normalisation). Target: at least 3x faster than numpy.
(b) the PubMed citation graph (N = 19717, sparse adjacency): ``kernel_matrix(A, A.T, "sne")``
    (rows x_i = A[i, :], columns z_j = A[:, j], no compat map) vs the time to merely
    allocate and fill an N x N float64 array. Target: within 1.5x of that.

Run from the repository root::

    python benchmarks/scripts/bench_kernels.py            # full size (needs ~7 GB of RAM)
    python benchmarks/scripts/bench_kernels.py --quick    # small sizes, seconds

Numba compiles (and caches) the kernels in a warm-up call first; each time is the median
of ``--repeats`` runs. The machine should be otherwise idle: numbers from a loaded machine
are not comparable.
"""

from __future__ import annotations

import argparse
import gc
import importlib.metadata
import os
import platform
import time
from pathlib import Path

import numba
import numpy as np
import scipy.sparse as sp

from ksvd_bench.kernels import kernel_matrix, paper_gamma

PUBMED = Path(__file__).resolve().parents[2] / "ksvd_bench" / "datasets" / "data" / "pubmed.npz"


def numpy_sne(X, Z, gamma):
    """Plain numpy SNE reference: GEMM distances, ``np.exp``, row normalisation.

    Written as one would in numpy (whole-array expressions with temporaries), with the same
    log-sum-exp shift as ``kernel_matrix`` so that both are stable and comparable.
    """
    if sp.issparse(X):
        C = (X @ Z.T).toarray()
        xx = np.asarray(X.multiply(X).sum(axis=1)).ravel()
        zz = np.asarray(Z.multiply(Z).sum(axis=1)).ravel()
    else:
        C = X @ Z.T
        xx = np.einsum("ij,ij->i", X, X)
        zz = np.einsum("ij,ij->i", Z, Z)
    D = np.maximum(xx[:, None] + zz[None, :] - 2.0 * C, 0.0)
    K = np.exp(-(D - D.min(axis=1, keepdims=True)) / gamma**2)
    K /= K.sum(axis=1, keepdims=True)
    return K


def write_array(n, m):
    """Allocate an n x m float64 array and write every entry once."""
    G = np.empty((n, m))
    G.fill(1.0)
    return G


def timed(fns, repeats):
    """Median wall time of each function over ``repeats`` interleaved rounds.

    Interleaving spreads any background load evenly over the compared functions. Only the
    first function's last result is kept (returned); the others are freed at once, so at
    most two large results are alive. Every run allocates its output afresh.
    """
    times = [[] for _ in fns]
    first = None
    for _ in range(repeats):
        for k, fn in enumerate(fns):
            if k == 0:
                first = None
            gc.collect()
            t0 = time.perf_counter()
            out = fn()
            times[k].append(time.perf_counter() - t0)
            if k == 0:
                first = out
            del out
    return [float(np.median(t)) for t in times], first


def load_pubmed(n_nodes=None):
    """PubMed adjacency, A[i, j] = 1 iff paper i cites paper j (optionally the first n nodes)."""
    with np.load(PUBMED, allow_pickle=False) as d:
        n = len(d["node_ids"])
        cited, citing = d["edges"].T.astype(np.int64)
    A = sp.csr_matrix((np.ones(len(cited)), (citing, cited)), shape=(n, n))
    A.sum_duplicates()
    if n_nodes is not None and n_nodes < n:
        A = A[:n_nodes][:, :n_nodes].tocsr()
    return A


def svml_status():
    """(SVML in use by Numba, llvmlite built with SVML support, intel-cmplr-lib-rt version)."""
    try:
        version = importlib.metadata.version("intel-cmplr-lib-rt")
    except importlib.metadata.PackageNotFoundError:
        version = None
    try:
        import llvmlite.binding as llvm

        llvm_svml = bool(llvm.targets.has_svml())
    except (ImportError, AttributeError):
        llvm_svml = False
    return bool(numba.config.USING_SVML), llvm_svml, version


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=8000, help="N of the dense case (a)")
    parser.add_argument("--dim", type=int, default=64, help="d of the dense case (a)")
    parser.add_argument(
        "--pubmed-nodes",
        type=int,
        default=None,
        help="use only the first n PubMed nodes in case (b) (default: all)",
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="small sizes (N=1500, PubMed restricted to 3000 nodes), 3 repeats",
    )
    parser.add_argument("--skip-dense", action="store_true")
    parser.add_argument("--skip-pubmed", action="store_true")
    parser.add_argument(
        "--pubmed-numpy",
        action="store_true",
        help="also time the numpy reference on (b) (needs ~4 N^2 * 8 bytes); "
        "without it, 64 sampled rows are checked against the reference",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.size = min(args.size, 1500)
        args.pubmed_nodes = args.pubmed_nodes or 3000
    using_svml, llvm_svml, svml_version = svml_status()
    print(
        f"python {platform.python_version()}, numpy {np.__version__}, numba {numba.__version__}"
        f", threading layer threads={numba.get_num_threads()}, cpus={os.cpu_count()}"
    )
    print(
        f"SVML active (numba.config.USING_SVML): {using_svml}; llvmlite built with SVML: "
        f"{llvm_svml}; intel-cmplr-lib-rt: {svml_version or 'not installed'}"
    )
    print("(kernel_matrix does not rely on SVML: its exp is a vectorisable polynomial kernel)")

    rng = np.random.default_rng(0)
    # warm-up: compile (or load from cache) the kernels for both input layouts
    Xw = rng.standard_normal((300, 8))
    kernel_matrix(Xw, Xw, "sne", gamma=1.0)
    Aw = sp.random(300, 300, density=0.02, random_state=rng, format="csr")
    kernel_matrix(Aw, Aw.T.tocsr(), "sne", gamma=1.0)

    rows = []
    if not args.skip_dense:
        n, d = args.size, args.dim
        X = rng.standard_normal((n, d))
        Z = rng.standard_normal((n, d))  # asymmetric: no symmetric (SYRK) shortcut
        gamma = float(np.sqrt(2.0 * d))  # distances of order 2d: a non-degenerate SNE
        (t_nb, t_np, t_w), G = timed(
            [
                lambda: kernel_matrix(X, Z, "sne", gamma=gamma),
                lambda: numpy_sne(X, Z, gamma),
                lambda: write_array(n, n),
            ],
            args.repeats,
        )
        err = float(np.abs(G - numpy_sne(X, Z, gamma)).max())
        del G
        rows.append((f"(a) dense {n}x{n}, d={d}", t_nb, t_np, t_w, err))

    if not args.skip_pubmed:
        A = load_pubmed(args.pubmed_nodes)
        Z = A.T.tocsr()
        n = A.shape[0]
        gamma = paper_gamma(A)
        fns = [lambda: kernel_matrix(A, Z, "sne", gamma=gamma), lambda: write_array(n, n)]
        with_numpy = args.pubmed_numpy or n <= 5000
        if with_numpy:
            fns.append(lambda: numpy_sne(A, Z, gamma))
        times, G = timed(fns, args.repeats)
        t_nb, t_w = times[:2]
        if with_numpy:
            t_np = times[2]
            err = float(np.abs(G - numpy_sne(A, Z, gamma)).max())
        else:
            # SNE rows are normalised one by one: a row subset of the reference is exact
            t_np = float("nan")
            sample = np.random.default_rng(1).choice(n, size=64, replace=False)
            err = float(np.abs(G[sample] - numpy_sne(A[sample], Z, gamma)).max())
        del G
        rows.append((f"(b) PubMed {n}x{n}, nnz={A.nnz}", t_nb, t_np, t_w, err))

    header = (
        f"{'case':34s} {'kernel_matrix s':>15s} {'numpy s':>9s} {'write NxN s':>11s} "
        f"{'numpy/kernel':>12s} {'kernel/write':>12s} {'max|diff|':>9s}"
    )
    print()
    print(f"SNE kernel_matrix, median of {args.repeats}")
    print(header)
    print("-" * len(header))
    for name, t_nb, t_np, t_w, err in rows:
        print(
            f"{name:34s} {t_nb:15.3f} {t_np:9.3f} {t_w:11.3f} {t_np / t_nb:12.2f} "
            f"{t_nb / t_w:12.2f} {err:9.1e}"
        )
    print("\ntargets: (a) numpy/kernel >= 3; (b) kernel/write <= 1.5")


if __name__ == "__main__":
    main()
