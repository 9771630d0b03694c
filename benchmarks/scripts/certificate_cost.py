"""The certificate's own work outside the passes: rsvd on a cheap low-rank operator.

``solvers.rsvd`` (rank 20, p = 10, q = 0, ``check_passes=2``) on a rank-30
``LinearOperator`` ``U V^T`` of size N x N, whose products cost a few milliseconds, so the
time is the solver's and its certificate's dense work on N x 45 blocks (deflations,
orthonormal bases, singular values): what a GPU source leaves to the CPU. Prints the total
and the certificate's seconds (median of ``--repeat`` runs after a warm-up)::

    python benchmarks/scripts/certificate_cost.py --n 100000
"""

from __future__ import annotations

import argparse
import importlib
import time

import numpy as np
import scipy.sparse.linalg as sla

# the module, not the function that ``solvers`` exports under the same name
rsvd_module = importlib.import_module("solvers.rsvd")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    U = rng.standard_normal((args.n, 30))
    V = rng.standard_normal((args.n, 30))
    op = sla.LinearOperator(
        (args.n, args.n),
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
        for _ in range(args.repeat + 1):
            t = time.perf_counter()
            res = rsvd_module.rsvd(op, 20, n_oversamples=10, n_iter=0, random_state=0)
            totals.append(time.perf_counter() - t)
    finally:
        rsvd_module.certify_answer = inner
    print(
        f"N = {args.n}: rsvd {np.median(totals[1:]):.2f} s, of which the certificate "
        f"{np.median(spent[1:]):.2f} s (median of {args.repeat}; reliable = "
        f"{res.info.get('reliable')})"
    )


if __name__ == "__main__":
    main()
