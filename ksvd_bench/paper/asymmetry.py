"""Asymmetry measure of a data matrix: KL divergence between row data and column data.

For a table A (N x M, standardised) the rows x_i live in R^M and the columns z_j in R^N; the a1
(PCA) compatibility map projects the columns into R^M (:func:`ksvd_bench.kernels.compat_data`).
Two Gaussian kernel density estimates (``sklearn.neighbors.KernelDensity``, Scott's bandwidth),
p on the rows and q on the projected columns, give Monte Carlo estimates

* ``kl_rows = mean_i [log p(x_i) - log q(x_i)]``  (KL(p || q), samples from the rows),
* ``kl_cols = mean_j [log q(z_j) - log p(z_j)]``  (KL(q || p), samples from the columns),

and the same sums (``*_sum``). The paper does not state its estimator; its values (both signs)
cannot be a plug-in KL of two densities evaluated at the samples of the first (which is >= 0 in
expectation), so we report these variants and say which, if any, tracks the paper.

The paper's values are therefore **not comparable** with ours: different (unknown) estimator,
different sign convention or range. They are printed beside ours for reference only, under a
header that says so (:data:`PAPER_COLUMN`), and :data:`NOT_COMPARABLE` explains why.
"""

from __future__ import annotations

import numpy as np
from sklearn.neighbors import KernelDensity
from sklearn.preprocessing import StandardScaler

from ksvd_bench.kernels import compat_data
from ksvd_bench.paper import paper_numbers
from ksvd_bench.paper._result import ExperimentResult
from ksvd_bench.paper._setup import RunSetup
from ksvd_bench.paper.uci import UCI_DATASETS

#: table header of the paper's values: they are not the same quantity as ours
PAPER_COLUMN = "paper (not comparable)"
#: why the paper's "KL" and our estimates cannot be compared number to number
NOT_COMPARABLE = (
    "the paper's 'KL' values come from an unstated estimator and take both signs; ours are "
    "Monte Carlo KL estimates between two KDEs, >= 0 in expectation: the two columns are not "
    "the same quantity and are not comparable number to number"
)


def kde_kl(P, Q, *, bandwidth="scott"):
    """Monte Carlo KL estimates between Gaussian KDEs of the samples ``P`` and ``Q``.

    Parameters
    ----------
    P : ndarray of shape (n_p, d)
    Q : ndarray of shape (n_q, d)
    bandwidth : float or {"scott", "silverman"}, default="scott"

    Returns
    -------
    dict
        ``kl_pq`` = mean over P of log p - log q, ``kl_qp`` = mean over Q of log q - log p, and
        their sums ``kl_pq_sum``, ``kl_qp_sum``.
    """
    P = np.asarray(P, dtype=np.float64)
    Q = np.asarray(Q, dtype=np.float64)
    if P.ndim != 2 or Q.ndim != 2 or P.shape[1] != Q.shape[1]:
        raise ValueError(f"P and Q must be 2-D with the same columns, got {P.shape}, {Q.shape}")
    kp = KernelDensity(bandwidth=bandwidth).fit(P)
    kq = KernelDensity(bandwidth=bandwidth).fit(Q)
    d_p = kp.score_samples(P) - kq.score_samples(P)
    d_q = kq.score_samples(Q) - kp.score_samples(Q)
    return dict(
        kl_pq=float(d_p.mean()),
        kl_qp=float(d_q.mean()),
        kl_pq_sum=float(d_p.sum()),
        kl_qp_sum=float(d_q.sum()),
    )


def run_asymmetry(
    datasets=UCI_DATASETS, *, bandwidth="scott", table_loader=None, progress=True, random_state=0
):
    """KL asymmetry of each UCI table between its rows and its a1-projected columns.

    Returns
    -------
    ExperimentResult
        A dict: ``rows``, one per dataset with the KL estimates and the paper's value (not
        comparable, :data:`NOT_COMPARABLE`); ``protocol``.
    """
    # the a1 map takes random_state itself: this run draws no seeds from the generator
    run = RunSetup(random_state, progress=progress, loader=table_loader, kind="table")
    rows = []
    for name in run.bar(datasets, "asymmetry"):
        X, _, _ = run.loader(name)
        A = StandardScaler().fit_transform(X)
        # a constant column (Ionosphere a02) has no spread: drop it so the KDEs are proper
        A = A[:, np.std(X, axis=0) > 0]
        rows_data, cols_data = compat_data(A, "pca", random_state=random_state)
        rows_data = np.asarray(rows_data)
        cols_data = np.asarray(cols_data)
        kl = kde_kl(rows_data, cols_data, bandwidth=bandwidth)
        rows.append(
            dict(
                dataset=name,
                n_rows=A.shape[0],
                n_cols=A.shape[1],
                kl_rows=kl["kl_pq"],
                kl_cols=kl["kl_qp"],
                kl_rows_sum=kl["kl_pq_sum"],
                kl_cols_sum=kl["kl_qp_sum"],
                paper=paper_numbers.ASYMMETRY_KL.get(name),
            )
        )
    protocol = dict(
        data="standardised table, constant columns dropped",
        columns="a1 (PCA) compatibility map: columns projected into the row dimension",
        kde=f"KernelDensity(kernel='gaussian', bandwidth={bandwidth!r})",
        paper_values=NOT_COMPARABLE,
        random_state=random_state,
    )
    return ExperimentResult("asymmetry", rows=rows, protocol=protocol)
