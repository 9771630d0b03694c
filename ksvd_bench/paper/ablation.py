"""Ablation: explicit degree-2 polynomial features + SVD vs KSVD with the degree-2 poly kernel.

Same datasets, splits, preprocessing and linear models as :mod:`ksvd_bench.paper.uci`.
"Poly + SVD": ``sklearn.preprocessing.PolynomialFeatures(degree=2)`` of the standardised rows,
then the SVD ``P_train = U S V^T`` (scipy, uncentred); the first 4 columns of U are the training
features and test rows get ``P_test V S^-1`` (the linear out-of-sample extension). "KSVD poly":
:class:`ksvd_bench.KSVD` with ``kernel="poly", degree=2`` and the a1 (PCA) compatibility map
(the paper does not say which map; a1 is the estimator's default for non-square data).
"""

from __future__ import annotations

import numpy as np
import scipy.linalg
from sklearn.preprocessing import PolynomialFeatures, StandardScaler

from ksvd_bench.paper import paper_numbers
from ksvd_bench.paper._result import ExperimentResult
from ksvd_bench.paper._setup import RunSetup
from ksvd_bench.paper.uci import (
    UCI_DATASETS,
    evaluate_linear,
    make_table_splits,
    table_features,
)

ABLATION_METHODS = ("poly+svd", "ksvd-poly")


def poly_svd_features(X_train, X_test, *, n_components=4, degree=2):
    """Explicit polynomial features followed by a truncated SVD (test rows projected).

    Returns
    -------
    F_train, F_test : ndarray of shape (n, n_components)
    """
    poly = PolynomialFeatures(degree=degree).fit(X_train)
    P_train, P_test = poly.transform(X_train), poly.transform(X_test)
    U, s, Vt = scipy.linalg.svd(P_train, full_matrices=False)
    U, s, V = U[:, :n_components], s[:n_components], Vt[:n_components].T
    return U, P_test @ (V / s)


def run_ablation(
    datasets=UCI_DATASETS,
    *,
    n_components=4,
    n_runs=10,
    compat="a1",
    table_loader=None,
    progress=True,
    random_state=0,
):
    """Run the degree-2 polynomial ablation.

    Parameters
    ----------
    datasets : sequence of str
    n_components : int, default=4
    n_runs : int, default=10
    compat : {"a0", "a1", "a2"}, default="a1"
        Compatibility map of the KSVD poly kernel.
    table_loader : callable, optional
    progress : bool, default=True
    random_state : int, default=0

    Returns
    -------
    ExperimentResult
        A dict: ``rows``, dataset x method with the paper's metric (AUROC or RMSE) mean/std and the
        paper's value; ``protocol``.
    """
    if compat not in paper_numbers.COMPAT_LABELS:
        raise ValueError(
            f"compat must be one of {tuple(paper_numbers.COMPAT_LABELS)}, got {compat!r}"
        )
    run = RunSetup(
        random_state,
        progress=progress,
        loader=table_loader,
        kind="table",
        n_runs=n_runs,
        n_components=n_components,
    )
    n_runs = run.counts["n_runs"]
    rows = []
    for name in datasets:
        X, y, task = run.loader(name)
        metric = "auroc" if task == "classification" else "rmse"
        splits = make_table_splits(y, task, n_runs, random_state=run.seed())
        scores = {m: [] for m in ABLATION_METHODS}
        for train, test in run.bar(splits, f"ablation {name}"):
            scaler = StandardScaler().fit(X[train])
            Xtr, Xte = scaler.transform(X[train]), scaler.transform(X[test])
            Ftr, Fte = poly_svd_features(Xtr, Xte, n_components=n_components)
            scores["poly+svd"].append(evaluate_linear(task, Ftr, y[train], Fte, y[test])[metric])
            Ftr, Fte = table_features(
                f"ksvd-poly-{compat}", Xtr, Xte, n_components=n_components, random_state=run.seed()
            )
            scores["ksvd-poly"].append(evaluate_linear(task, Ftr, y[train], Fte, y[test])[metric])
        paper = paper_numbers.ABLATION.get(name)
        for k, method in enumerate(ABLATION_METHODS):
            vals = np.array(scores[method])
            rows.append(
                dict(
                    dataset=name,
                    metric=metric,
                    method=method,
                    value=vals.mean(),
                    std=vals.std(),
                    paper=None if paper is None else paper[1 + k],
                )
            )
    protocol = dict(
        split=f"random 80/20 (stratified for classification), {n_runs} runs",
        poly_svd="PolynomialFeatures(2) of standardised rows, uncentred SVD, test by P V S^-1",
        ksvd=f"KSVD(kernel='poly', degree=2, coef0=1, compat={compat}, centred)",
        model="RidgeClassifier(alpha=1) / Ridge(alpha=1) on standardised features",
        n_components=n_components,
        random_state=random_state,
    )
    return ExperimentResult("ablation", rows=rows, protocol=protocol)
