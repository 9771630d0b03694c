"""UCI tables (the paper's UCI table): KPCA vs KSVD features for a linear model.

Protocol: random 80/20 train/test split per run (stratified for classification), features
standardised with the training statistics, the first 4 left singular vectors of the kernel
matrix of the training rows as features (test rows by the out-of-sample extension,
:meth:`ksvd_bench.KSVD.transform`; KPCA: ``KernelPCA.transform``), the 4 features standardised
and fed to ``RidgeClassifier(alpha=1)`` (ACC, AUROC from its decision function) or
``Ridge(alpha=1)`` (RMSE). Bandwidth: the paper's rule with factor 1 on the training rows.
"""

from __future__ import annotations

import numpy as np
from sklearn.decomposition import KernelPCA
from sklearn.linear_model import Ridge, RidgeClassifier
from sklearn.metrics import accuracy_score, mean_squared_error, roc_auc_score
from sklearn.model_selection import ShuffleSplit, StratifiedShuffleSplit
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from ksvd_bench.estimators import KSVD
from ksvd_bench.kernels.params import paper_gamma
from ksvd_bench.paper import paper_numbers
from ksvd_bench.paper._result import ExperimentResult
from ksvd_bench.paper._setup import RunSetup

UCI_DATASETS = ("diabetes", "ionosphere", "liver", "cholesterol", "yacht")
KSVD_KERNELS = ("rbf", "sne")
COMPAT_NAMES = ("a0", "a1", "a2")


def uci_methods(kernels=KSVD_KERNELS, compats=COMPAT_NAMES):
    """Method labels: ``"kpca"`` and ``"ksvd-<kernel>-<a0|a1|a2>"``."""
    return ["kpca"] + [f"ksvd-{k}-{a}" for k in kernels for a in compats]


def table_features(
    method, X_train, X_test, *, n_components=4, bandwidth_factor=1.0, degree=2, random_state=None
):
    """Training and test features for one method.

    Parameters
    ----------
    method : str
        ``"kpca"`` or ``"ksvd-<kernel>-<a0|a1|a2>"`` (kernel any of ``ksvd_bench`` kernels).
    X_train, X_test : ndarray
        Standardised data.
    n_components : int, default=4
    bandwidth_factor : float, default=1.0
    degree : int, default=2
        Degree of the ``"poly"`` kernel.
    random_state : None, int or Generator

    Returns
    -------
    F_train, F_test : ndarray
    """
    gamma = paper_gamma(X_train, bandwidth_factor)
    if method == "kpca":
        kpca = KernelPCA(n_components=n_components, kernel="rbf", gamma=1.0 / gamma**2)
        return kpca.fit_transform(X_train), kpca.transform(X_test)
    parts = method.split("-")
    if len(parts) != 3 or parts[0] != "ksvd" or parts[2] not in paper_numbers.COMPAT_LABELS:
        raise ValueError(f"method must be 'kpca' or 'ksvd-<kernel>-<a0|a1|a2>', got {method!r}")
    est = KSVD(
        n_components,
        kernel=parts[1],
        gamma=gamma,
        compat=paper_numbers.COMPAT_LABELS[parts[2]],
        degree=degree,
        random_state=random_state,
    ).fit(X_train)
    return est.left_features_, est.transform(X_test)


def evaluate_linear(task, F_train, y_train, F_test, y_test):
    """Metrics of a linear model (ridge, alpha=1) on standardised features.

    Returns
    -------
    dict
        classification: ``acc`` and ``auroc``; regression: ``rmse``.
    """
    if task == "classification":
        model = make_pipeline(StandardScaler(), RidgeClassifier(alpha=1.0)).fit(F_train, y_train)
        score = model.decision_function(F_test)
        return dict(
            acc=accuracy_score(y_test, model.predict(F_test)),
            auroc=roc_auc_score(y_test, score),
        )
    model = make_pipeline(StandardScaler(), Ridge(alpha=1.0)).fit(F_train, y_train)
    return dict(rmse=float(np.sqrt(mean_squared_error(y_test, model.predict(F_test)))))


def make_table_splits(y, task, n_runs, *, test_size=0.2, random_state=None):
    """Random 80/20 splits (stratified for classification)."""
    cls = StratifiedShuffleSplit if task == "classification" else ShuffleSplit
    splitter = cls(n_splits=n_runs, test_size=test_size, random_state=random_state)
    return list(splitter.split(np.zeros(len(y)), y))


def _summarise(name, task, method, per_run, paper_lookup):
    rows = []
    for metric in paper_numbers.UCI_METRICS.get(
        name, ("acc", "auroc") if task == "classification" else ("rmse",)
    ):
        vals = np.array([x[metric] for x in per_run])
        rows.append(
            dict(
                dataset=name,
                metric=metric,
                method=method,
                value=vals.mean(),
                std=vals.std(),
                paper=paper_lookup(name, metric, method),
            )
        )
    return rows


def run_uci(
    datasets=UCI_DATASETS,
    *,
    methods=None,
    n_components=4,
    n_runs=10,
    bandwidth_factor=1.0,
    table_loader=None,
    progress=True,
    random_state=0,
):
    """Run the UCI table.

    Parameters
    ----------
    datasets : sequence of str
    methods : list of str, optional
        Default :func:`uci_methods` (KPCA and KSVD RBF/SNE with a0, a1, a2).
    n_components : int, default=4
    n_runs : int, default=10
    bandwidth_factor : float, default=1.0
    table_loader : callable, optional
        ``name -> (X, y, task)``; default :func:`ksvd_bench.datasets.load_table`.
    progress : bool, default=True
    random_state : int, default=0

    Returns
    -------
    ExperimentResult
        A dict: ``rows``, dataset x metric x method with mean, std and the paper's value;
        ``protocol``.
    """
    methods = uci_methods() if methods is None else list(methods)
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
        splits = make_table_splits(y, task, n_runs, random_state=run.seed())
        per_method = {m: [] for m in methods}
        for train, test in run.bar(splits, f"uci {name}"):
            scaler = StandardScaler().fit(X[train])
            Xtr, Xte = scaler.transform(X[train]), scaler.transform(X[test])
            seed = run.seed()
            for method in methods:
                Ftr, Fte = table_features(
                    method,
                    Xtr,
                    Xte,
                    n_components=n_components,
                    bandwidth_factor=bandwidth_factor,
                    random_state=seed,
                )
                per_method[method].append(evaluate_linear(task, Ftr, y[train], Fte, y[test]))
        for method in methods:
            rows += _summarise(
                name, task, method, per_method[method], paper_numbers.uci_paper_value
            )
    protocol = dict(
        split=f"random 80/20 (stratified for classification), {n_runs} runs",
        preprocessing="features standardised with training statistics",
        features=f"first {n_components} left singular vectors; test rows by out-of-sample "
        "extension",
        model="RidgeClassifier(alpha=1) / Ridge(alpha=1) on standardised features",
        bandwidth=f"paper rule with factor {bandwidth_factor} on the training rows",
        random_state=random_state,
    )
    return ExperimentResult("uci", rows=rows, protocol=protocol)
