"""Node-classification F1 as a function of the Nystrom sample size m (the paper's figures).

KSVD (RBF kernel, centred, paper bandwidth) solved by the asymmetric Nystrom method with m
sampled rows and columns, features ``[U, V]`` (r singular triplets, 2r features); against KPCA
(RBF, same bandwidth) by the symmetric Nystrom method (``sklearn.kernel_approximation.Nystroem``
with m landmarks followed by ``PCA``, i.e. the eigenvectors of the Nystrom approximation of the
centred kernel) with 2r components. Both get the same number of features, 2r, with
``r = min(n_components, m // 2)``: m landmarks give KPCA at most m components, so r is capped at
m // 2 rather than m (at m = 10 both get 10 features, not KSVD 20 and KPCA 10). The paper states
no other protocol for this figure. Classifier, metrics and splits as in
:mod:`ksvd_bench.paper.node_classification`; each row is marked "chance level" when its mean
micro-F1 does not beat always predicting the majority class by 2 standard errors
(:func:`ksvd_bench.paper.node_classification.majority_baseline`).
"""

from __future__ import annotations

import time

import numpy as np
from sklearn.decomposition import PCA
from sklearn.kernel_approximation import Nystroem
from sklearn.pipeline import make_pipeline

from ksvd_bench.estimators import KSVD
from ksvd_bench.kernels.params import paper_gamma
from ksvd_bench.paper._result import ExperimentResult
from ksvd_bench.paper._setup import RunSetup, check_count, draw_seed
from ksvd_bench.paper.node_classification import (
    chance_note,
    evaluate_features,
    load_labelled_graphs,
    majority_baseline,
    make_splits,
)

M_GRID = (50, 100, 200, 500, 1000)
NYSTROM_METHODS = ("ksvd-asym-nystrom", "kpca-sym-nystrom")


def feature_rank(m, n_components):
    """r, the number of KSVD triplets (half the KPCA components) at sample size m.

    ``min(n_components, m // 2)``: both methods then give 2r <= m features.
    """
    return min(check_count(n_components, "n_components"), check_count(m, "m", minimum=2) // 2)


def nystrom_features(A, method, m, n_components, *, bandwidth_factor=1.0, random_state=None):
    """Features of all nodes from a Nystrom-approximated KSVD or KPCA.

    Parameters
    ----------
    A : sparse matrix (N, N)
    method : {"ksvd-asym-nystrom", "kpca-sym-nystrom"}
    m : int
        Number of Nystrom samples, 2 <= m <= N.
    n_components : int
        r, singular triplets (KSVD, features [U, V]) or half the KPCA components; capped at
        m // 2 (:func:`feature_rank`), so both methods give the same number of features.
    bandwidth_factor : float, default=1.0
    random_state : None, int or Generator

    Returns
    -------
    features : ndarray of shape (N, 2 r)
    seconds : float
        Wall time of the fit.
    """
    if method not in NYSTROM_METHODS:
        raise ValueError(f"method must be one of {NYSTROM_METHODS}, got {method!r}")
    r = feature_rank(m, n_components)
    if m > A.shape[0]:
        raise ValueError(f"m must be <= the number of nodes {A.shape[0]}, got {m}")
    rng = np.random.default_rng(random_state)
    gamma = paper_gamma(A, bandwidth_factor)
    t0 = time.perf_counter()
    if method == "ksvd-asym-nystrom":
        est = KSVD(
            r,
            kernel="rbf",
            gamma=gamma,
            compat=None,
            solver="asym_nystrom",
            solver_options={"n_samples": m, "core": "paper", "check_passes": 0},
            random_state=rng,
        ).fit(A)  # the paper's own formula, unchecked
        F = np.hstack([est.left_features_, est.right_features_])
    else:
        pipe = make_pipeline(
            Nystroem(
                kernel="rbf", gamma=1.0 / gamma**2, n_components=m, random_state=draw_seed(rng)
            ),
            PCA(n_components=2 * r, svd_solver="full"),
        )
        F = pipe.fit_transform(A)
    return F, time.perf_counter() - t0


def sample_sizes(m_grid, n_nodes):
    """The sample sizes run on a graph of ``n_nodes`` nodes, each with the m's it stands for.

    A requested m above ``n_nodes`` runs at ``n_nodes`` (every node sampled) instead of being
    dropped; requests that land on the same size share one run.

    Returns
    -------
    dict
        run m -> list of requested m.
    """
    out = {}
    for m in m_grid:
        out.setdefault(min(m, n_nodes), []).append(m)
    return out


def _check_m_grid(m_grid):
    if isinstance(m_grid, str) or len(m_grid) == 0:
        raise ValueError(f"m_grid must be a non-empty sequence of ints, got {m_grid!r}")
    return tuple(check_count(m, "every m of m_grid", minimum=2) for m in m_grid)


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
        Sample sizes, each >= 2. One above a graph's node count runs at the node count, with a
        note in its row.
    n_components : int, default=50
        r, capped at m // 2 (:func:`feature_rank`); each method gets 2r features.
    n_runs : int, default=10
        Splits; each split also redraws nothing: the Nystrom samples are drawn once per
        (dataset, method, m), seeded.
    test_size : float, default=0.1
    bandwidth_factor : float, default=1.0
    standardize : bool, default=False
    subsample : int, optional
        Keep the first ``subsample`` nodes; checked up front like
        :func:`ksvd_bench.paper.node_classification.load_labelled_graphs`.
    graph_loader : callable, optional
    progress : bool, default=True
    random_state : int, default=0

    Returns
    -------
    ExperimentResult
        A dict: ``rows`` (dataset x method x m with micro/macro F1 mean/std, fit seconds and a
        ``note``: "chance level", or the requested m's that ran at the node count),
        ``chance`` (dataset -> majority-class baseline) and ``protocol``.
    """
    m_grid = _check_m_grid(m_grid)
    run = RunSetup(random_state, progress=progress, n_runs=n_runs, n_components=n_components)
    n_runs = run.counts["n_runs"]
    graphs = load_labelled_graphs(
        datasets, subsample=subsample, graph_loader=graph_loader, test_size=test_size
    )
    rows, chance = [], {}
    for name, A, labels in graphs:
        splits = make_splits(labels, n_runs, test_size=test_size, random_state=run.seed())
        chance[name] = majority_baseline(labels, splits)
        sizes = sample_sizes(m_grid, A.shape[0])
        jobs = [(method, m) for method in NYSTROM_METHODS for m in sizes]
        for method, m in run.bar(jobs, f"nystrom F1 {name}"):
            F, secs = nystrom_features(
                A,
                method,
                m,
                n_components,
                bandwidth_factor=bandwidth_factor,
                random_state=run.seed(),
            )
            res = evaluate_features({None: F}, labels, splits, standardize=standardize)
            micro = np.array([x["micro"] for x in res])
            macro = np.array([x["macro"] for x in res])
            clipped = [x for x in sizes[m] if x != m]
            notes = [chance_note(micro.mean(), chance[name])]
            if clipped:
                notes.append(f"m={','.join(map(str, clipped))} > N: ran at m = N")
            rows.append(
                dict(
                    dataset=name,
                    method=method,
                    m=m,
                    n_features=F.shape[1],
                    micro=micro.mean(),
                    micro_std=micro.std(),
                    macro=macro.mean(),
                    macro_std=macro.std(),
                    seconds=secs,
                    note="; ".join(x for x in notes if x),
                )
            )
    protocol = dict(
        split=f"stratified random {1 - test_size:.0%}/{test_size:.0%}, {n_runs} runs",
        classifier="RidgeClassifier(alpha=1)",
        kernel="rbf, paper bandwidth rule",
        bandwidth_factor=bandwidth_factor,
        n_components=n_components,
        features="2r for both methods, r = min(n_components, m // 2)",
        standardize=standardize,
        subsample=subsample,
        chance_level="majority class of each training part; 'chance level' marks a mean "
        "micro-F1 within 2 binomial standard errors of it",
        random_state=random_state,
    )
    return ExperimentResult("nystrom_f1", rows=rows, chance=chance, protocol=protocol)


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
    # matplotlib: loaded only when a figure is drawn (start-up)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # after use("Agg"): no display needed

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
                ax.errorbar(
                    ms,
                    [r[metric] for r in sel],
                    yerr=[r[f"{metric}_std"] for r in sel],
                    marker="o",
                    capsize=3,
                    label=method,
                )
            ax.set_xscale("log")
            ax.set_xlabel("m (Nystrom samples)")
            ax.set_ylabel(f"{metric} F1")
            ax.set_title(name)
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
