"""Node-classification F1 as a function of the Nystrom sample size m (the paper's figures).

KSVD (RBF kernel, centred, paper bandwidth) solved by the asymmetric Nystrom method with m
sampled rows and columns, features ``[U, V]``; against KPCA (RBF, same bandwidth) by the
symmetric Nystrom method (``sklearn.kernel_approximation.Nystroem`` with m landmarks followed by
``PCA``, i.e. the eigenvectors of the Nystrom approximation of the centred kernel), with ``2r``
components so both give the same number of features. Classifier, metrics and splits as in
:mod:`ksvd_bench.paper.node_classification`.
"""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp
from sklearn.decomposition import PCA
from sklearn.kernel_approximation import Nystroem
from sklearn.pipeline import make_pipeline

from ksvd_bench.kernels._params import paper_gamma
from ksvd_bench.paper.node_classification import (
    _rng_seed,
    evaluate_features,
    make_splits,
)

M_GRID = (50, 100, 200, 500, 1000)
NYSTROM_METHODS = ("ksvd-asym-nystrom", "kpca-sym-nystrom")


def nystrom_features(A, method, m, n_components, *, bandwidth_factor=1.0, random_state=None):
    """Features of all nodes from a Nystrom-approximated KSVD or KPCA.

    Parameters
    ----------
    A : sparse matrix (N, N)
    method : {"ksvd-asym-nystrom", "kpca-sym-nystrom"}
    m : int
        Number of Nystrom samples.
    n_components : int
        r, singular triplets (KSVD, features [U, V]) or half the KPCA components.
    bandwidth_factor : float, default=1.0
    random_state : None, int or Generator

    Returns
    -------
    features : ndarray of shape (N, 2 r)
    seconds : float
        Wall time of the fit.
    """
    from ksvd_bench.estimators import KSVD

    if method not in NYSTROM_METHODS:
        raise ValueError(f"method must be one of {NYSTROM_METHODS}, got {method!r}")
    rng = np.random.default_rng(random_state)
    gamma = paper_gamma(A, bandwidth_factor)
    t0 = time.perf_counter()
    if method == "ksvd-asym-nystrom":
        r = min(n_components, m)
        est = KSVD(r, kernel="rbf", gamma=gamma, compat=None, solver="asym_nystrom",
                   solver_options={"n_samples": m}, random_state=rng).fit(A)
        F = np.hstack([est.left_features_, est.right_features_])
    else:
        r = min(2 * n_components, m)
        pipe = make_pipeline(
            Nystroem(kernel="rbf", gamma=1.0 / gamma**2, n_components=m,
                     random_state=_rng_seed(rng)),
            PCA(n_components=r, svd_solver="full"),
        )
        F = pipe.fit_transform(A)
    return F, time.perf_counter() - t0


def run_nystrom_f1(
    datasets=("cora", "citeseer", "pubmed"),
    *,
    m_grid=M_GRID,
    n_components=50,
    n_runs=10,
    test_size=0.1,
    bandwidth_factor=1.0,
    standardize=False,
    subsample=None,
    graph_loader=None,
    progress=True,
    random_state=0,
):
    """F1 against m for the asymmetric-Nystrom KSVD and the symmetric-Nystrom KPCA.

    Parameters
    ----------
    datasets : sequence of str
    m_grid : sequence of int
    n_components : int, default=50
        r (capped by m).
    n_runs : int, default=10
        Splits; each split also redraws nothing: the Nystrom samples are drawn once per
        (dataset, method, m), seeded.
    test_size : float, default=0.1
    bandwidth_factor : float, default=1.0
    standardize : bool, default=False
    subsample : int, optional
    graph_loader : callable, optional
    progress : bool, default=True
    random_state : int, default=0

    Returns
    -------
    dict
        ``rows``: dataset x method x m with micro/macro F1 mean/std and fit seconds;
        ``protocol``.
    """
    from tqdm.auto import tqdm

    if graph_loader is None:
        from ksvd_bench.datasets import load_graph as graph_loader
    rng = np.random.default_rng(random_state)
    rows = []
    for name in datasets:
        graph = graph_loader(name)
        A = sp.csr_matrix(graph.adjacency, dtype=np.float64)
        labels = np.asarray(graph.labels)
        if subsample is not None and subsample < A.shape[0]:
            A = A[:subsample][:, :subsample].tocsr()
            labels = labels[:subsample]
        splits = make_splits(labels, n_runs, test_size=test_size, random_state=_rng_seed(rng))
        grid = [m for m in m_grid if m <= A.shape[0]]
        jobs = [(method, m) for method in NYSTROM_METHODS for m in grid]
        for method, m in tqdm(jobs, desc=f"nystrom F1 {name}", disable=not progress):
            F, secs = nystrom_features(A, method, m, n_components,
                                       bandwidth_factor=bandwidth_factor,
                                       random_state=_rng_seed(rng))
            res = evaluate_features({None: F}, labels, splits, standardize=standardize)
            micro = np.array([x["micro"] for x in res])
            macro = np.array([x["macro"] for x in res])
            rows.append(dict(dataset=name, method=method, m=m, n_features=F.shape[1],
                             micro=micro.mean(), micro_std=micro.std(), macro=macro.mean(),
                             macro_std=macro.std(), seconds=secs))
    protocol = dict(
        split=f"stratified random {1 - test_size:.0%}/{test_size:.0%}, {n_runs} runs",
        classifier="RidgeClassifier(alpha=1)",
        kernel="rbf, paper bandwidth rule",
        bandwidth_factor=bandwidth_factor,
        n_components=n_components,
        standardize=standardize,
        subsample=subsample,
        random_state=random_state,
    )
    return dict(rows=rows, protocol=protocol)


def plot_f1_vs_m(result, path):
    """Save the F1-vs-m figure (micro and macro per dataset) as a PNG.

    Parameters
    ----------
    result : dict
        Output of :func:`run_nystrom_f1`.
    path : str or Path

    Returns
    -------
    path
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["rows"]
    datasets = list(dict.fromkeys(r["dataset"] for r in rows))
    fig, axes = plt.subplots(2, len(datasets), figsize=(4 * len(datasets), 6), squeeze=False)
    for c, name in enumerate(datasets):
        for k, metric in enumerate(("micro", "macro")):
            ax = axes[k, c]
            for method in NYSTROM_METHODS:
                sel = [r for r in rows if r["dataset"] == name and r["method"] == method]
                if not sel:
                    continue
                ms = [r["m"] for r in sel]
                ax.errorbar(ms, [r[metric] for r in sel], yerr=[r[f"{metric}_std"] for r in sel],
                            marker="o", capsize=3, label=method)
            ax.set_xscale("log")
            ax.set_xlabel("m (Nystrom samples)")
            ax.set_ylabel(f"{metric} F1")
            ax.set_title(name)
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
