"""Asymmetric Nystrom on a sparse-graph SNE kernel against its exact top singular values.

The README's sparse-graph table ("Library use"): ``s_1 / exact``, ``info["reliable"]`` and the
passes of ``core="paper"`` and ``core="stable"`` at ``m`` uniform samples, rank 10::

    python benchmarks/archive/graph_guard.py 20000 400
    python benchmarks/archive/graph_guard.py 300000 400
"""

import argparse
import time
import warnings

import numpy as np

import solvers
from ksvd_bench.datasets import make_directed_graph
from ksvd_bench.kernels import kernel_source


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("n_nodes", type=int)
    ap.add_argument("n_samples", type=int)
    ap.add_argument("--rank", type=int, default=10)
    args = ap.parse_args()
    t = time.perf_counter()
    src = kernel_source(make_directed_graph(args.n_nodes, random_state=0).adjacency, "sne")
    print(f"source {type(src).__name__}: {time.perf_counter() - t:.1f} s", flush=True)
    ex = solvers.svd(src, args.rank, method="tsvd", random_state=0)
    print(f"exact s[:3] = {ex.s[:3]}", flush=True)
    for core in ("paper", "stable"):
        t = time.perf_counter()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            r = solvers.svd(
                src,
                args.rank,
                method="asym_nystrom",
                n_samples=args.n_samples,
                core=core,
                random_state=0,
            )
        print(
            f"{core}: s_1/exact {r.s[0] / ex.s[0]:.3g}, s/exact "
            f"{np.round(r.s[:5] / ex.s[:5], 3)}, reliable {r.info['reliable']}, passes "
            f"{r.info['n_passes']:.3f}, {time.perf_counter() - t:.1f} s, warnings "
            f"{[str(x.message)[:90] for x in w]}",
            flush=True,
        )


if __name__ == "__main__":
    main()
