"""Node classification on directed citation graphs (the paper's Table 1).

Protocol (stated, identical for every method):

* features are unsupervised and transductive: computed once from the whole adjacency matrix
  ``A`` (``A[i, j] = 1`` iff paper i cites paper j), no labels used;
* PCA: ``sklearn.decomposition.PCA`` scores of the rows of A; KPCA: ``KernelPCA(kernel="rbf")``
  scores (for graphs too large for a dense N x N kernel, PubMed: the same exact KPCA through a
  sparse-plus-rank-one operator, :func:`structured_rbf_kpca`); SVD: left and right singular
  vectors of A (``scipy.sparse.linalg.svds``); KSVD: left
  and right singular vectors of the centred SNE kernel matrix (:class:`ksvd_bench.KSVD`). For
  SVD/KSVD a node's feature vector is ``[u_i, v_i]`` (its source and target embeddings);
* classifier: ``RidgeClassifier(alpha=1)`` (the LS-SVM one-vs-rest classifier with
  regularisation 1), micro and macro F1 on the test nodes;
* split: stratified random 90/10 train/test split of the labelled nodes, one per run, the same
  splits for every method (``StratifiedShuffleSplit`` seeded by ``random_state``);
* bandwidth: chosen per run by 10-fold stratified CV (micro F1) on the training nodes over the
  same grid of factors of the paper's rule ``gamma = f * sqrt(N var(A))`` for KPCA and KSVD.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator, eigsh, svds
from sklearn.decomposition import PCA, KernelPCA
from sklearn.linear_model import RidgeClassifier
from sklearn.metrics import f1_score
from sklearn.model_selection import StratifiedKFold, StratifiedShuffleSplit, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from ksvd_bench.estimators import KSVD
from ksvd_bench.kernels.params import paper_gamma
from ksvd_bench.paper import paper_numbers
from ksvd_bench.paper._result import ExperimentResult
from ksvd_bench.paper._setup import RunSetup, check_count, default_loader, draw_seed

METHODS = ("pca", "kpca", "svd", "ksvd")
#: bandwidth factors searched by CV, the same grid for every method that has a bandwidth; it
#: reaches 16 because on Cora the KSVD-SNE optimum lies at factors 4-8 (a narrower grid made
#: CV pick its upper edge), while KPCA peaks near 1 and falls off beyond 4
BANDWIDTH_GRID = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
#: how the source (u) and target (v) embeddings of a node make its feature vector
FEATURE_MODES = ("u", "us", "uv", "usvs")
#: a dense N x N kernel above this many entries is never built (KPCA uses the structured
#: exact operator instead)
DENSE_KERNEL_LIMIT = 6000 * 6000
_BANDWIDTH_METHODS = ("kpca", "ksvd")


def _check_choice(value, name, allowed):
    if value not in allowed:
        raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
    return value


def check_labels_splittable(labels, *, test_size=0.1, cv_folds=None):
    """Check that stratified train/test splits (and CV folds) of the labelled nodes exist.

    Mirrors the conditions of ``StratifiedShuffleSplit`` and ``StratifiedKFold`` so that an
    impossible configuration (typically too small a ``subsample``) fails up front with a
    message that says which condition and which classes, not from inside scikit-learn.

    Parameters
    ----------
    labels : ndarray of shape (N,)
        Class of each node, negative for unlabelled nodes.
    test_size : float, default=0.1
    cv_folds : int, optional
        Folds of the bandwidth cross-validation on the training nodes, when there is one.

    Raises
    ------
    ValueError
        If a class has fewer than 2 labelled nodes, if the test or training part cannot hold
        one node of every class, or if no class has ``cv_folds`` training nodes.
    """
    y = np.asarray(labels)
    y = y[y >= 0]
    classes, counts = np.unique(y, return_counts=True)
    if classes.size < 2:
        raise ValueError(
            f"{y.size} labelled nodes in {classes.size} class(es); a classifier "
            "needs labelled nodes of at least 2 classes"
        )
    rare = classes[counts < 2]
    if rare.size:
        raise ValueError(
            f"classes {rare.tolist()} have fewer than 2 labelled nodes; a "
            "stratified split needs 2 of every class"
        )
    n_test = int(np.ceil(test_size * y.size))
    n_train = y.size - n_test
    if min(n_test, n_train) < classes.size:
        raise ValueError(
            f"{y.size} labelled nodes give a {n_train}/{n_test} train/test split, "
            f"too small to hold one node of each of the {classes.size} classes"
        )
    if cv_folds is not None and np.floor(counts.max() * (1 - test_size)) < cv_folds:
        raise ValueError(
            f"no class has {cv_folds} training nodes, as {cv_folds}-fold "
            "cross-validation of the bandwidth needs"
        )


def check_has_edges(A):
    """Raise ValueError when the graph ``A`` has no edge between two different nodes.

    An empty (induced sub)graph has nothing to embed: every method's features would be
    constant, and the solvers' start vectors vanish.
    """
    A = sp.csr_matrix(A)
    off_diagonal = A.nnz - np.count_nonzero(A.diagonal())
    if off_diagonal == 0:
        raise ValueError(f"the {A.shape[0]} nodes have no edge between two different nodes")


def majority_baseline(labels, splits):
    """Micro and macro F1 of always predicting each training part's majority class.

    This is the chance level of a classification table: a classifier that learned nothing
    from its features (or shrank them to nothing) scores it.

    Parameters
    ----------
    labels : ndarray of shape (N,)
    splits : list of (train_idx, test_idx)

    Returns
    -------
    dict
        ``micro`` and ``macro`` (means over the splits), ``n_test`` (mean test size),
        ``n_runs`` and ``threshold``: the micro-F1 a method's mean must exceed to count as
        above chance, ``micro + 2 sqrt(micro (1 - micro) / (n_test n_runs))``, two binomial
        standard errors of a mean over ``n_runs`` test sets at the majority rate.
    """
    micro, macro, sizes = [], [], []
    for train, test in splits:
        classes, counts = np.unique(labels[train], return_counts=True)
        pred = np.full(test.size, classes[counts.argmax()])
        micro.append(f1_score(labels[test], pred, average="micro"))
        macro.append(f1_score(labels[test], pred, average="macro", zero_division=0.0))
        sizes.append(test.size)
    p, n_test = float(np.mean(micro)), float(np.mean(sizes))
    se = np.sqrt(p * (1.0 - p) / (n_test * len(splits)))
    return dict(
        micro=p,
        macro=float(np.mean(macro)),
        n_test=n_test,
        n_runs=len(splits),
        threshold=float(p + 2.0 * se),
    )


def chance_note(micro, baseline):
    """``"chance level"`` when a mean micro-F1 does not exceed ``baseline["threshold"]``."""
    return "chance level" if micro <= baseline["threshold"] else ""


def format_chance_levels(result):
    """Lines that state each dataset's chance level and how many rows are at it.

    Parameters
    ----------
    result : dict
        A result with ``rows`` (each with ``dataset`` and ``note``) and ``chance`` (dataset ->
        :func:`majority_baseline`).

    Returns
    -------
    list of str
    """
    lines = []
    for name, base in result.get("chance", {}).items():
        flagged = sum(
            1
            for r in result["rows"]
            if r["dataset"] == name and "chance level" in r.get("note", "")
        )
        lines.append(
            f"chance level, {name}: always predicting the majority class gives micro-F1 "
            f"{base['micro']:.3f}, macro-F1 {base['macro']:.3f}; {flagged} row(s) marked "
            f"'chance level' have mean micro-F1 <= {base['threshold']:.3f} (2 standard errors)"
        )
    return lines


def node_embeddings(
    A,
    method,
    n_components,
    *,
    bandwidth_factor=1.0,
    kernel="sne",
    center=True,
    solver="tsvd",
    solver_options=None,
    random_state=None,
):
    """Source and target embeddings of every node of a directed graph.

    Parameters
    ----------
    A : sparse matrix of shape (N, N)
        Adjacency matrix, ``A[i, j] = 1`` iff i cites j.
    method : {"pca", "kpca", "svd", "ksvd"}
    n_components : int
        Embedding dimension per side.
    bandwidth_factor : float, default=1.0
        Factor of the paper's bandwidth rule (KPCA and KSVD).
    kernel : str, default="sne"
        KSVD kernel.
    center : bool, default=True
        Centre the KSVD kernel matrix.
    solver, solver_options : str, dict
        KSVD solver (any :data:`solvers.METHODS`) and its options.
    random_state : None, int or numpy.random.Generator

    Returns
    -------
    dict
        ``left`` (N, r), ``right`` (N, r) (the same array for the symmetric methods),
        ``s`` (r,) scale of each component (singular values; PCA/KPCA: ones, their scores are
        already scaled), ``gamma`` (float or None) and ``note`` (str).
    """
    _check_choice(method, "method", METHODS)
    rng = np.random.default_rng(random_state)
    A = sp.csr_matrix(A, dtype=np.float64)
    n = A.shape[0]
    r = int(n_components)
    note = ""
    if method == "pca":
        # exact either way: ARPACK on the sparse rows (never densifies A) for few components,
        # one eigh of the M x M covariance for many (hundreds of ARPACK vectors cost more)
        dense_ok = A.shape[1] ** 2 <= DENSE_KERNEL_LIMIT and r > 100
        solver = "covariance_eigh" if dense_ok else "arpack"
        pca = PCA(n_components=r, svd_solver=solver, random_state=draw_seed(rng))
        scores = pca.fit_transform(A)
        return dict(left=scores, right=scores, s=np.ones(r), gamma=None, note=note)
    if method == "kpca":
        gamma = paper_gamma(A, bandwidth_factor)
        if n * n <= DENSE_KERNEL_LIMIT:
            kpca = KernelPCA(
                n_components=r,
                kernel="rbf",
                gamma=1.0 / gamma**2,
                eigen_solver="arpack" if r <= 100 else "dense",
                random_state=draw_seed(rng),
            )
            scores = kpca.fit_transform(A)
        else:
            note = "exact KPCA via the structured RBF operator (no N x N kernel)"
            scores = structured_rbf_kpca(A, gamma, r, random_state=draw_seed(rng))
        return dict(left=scores, right=scores, s=np.ones(scores.shape[1]), gamma=gamma, note=note)
    if method == "svd":
        v0 = rng.standard_normal(min(A.shape))
        U, s, Vt = svds(A, k=r, v0=v0)
        order = np.argsort(s)[::-1]
        U, s, V = U[:, order], s[order], Vt[order].T
        flip = np.sign(U[np.abs(U).argmax(axis=0), np.arange(r)])
        flip[flip == 0] = 1.0
        return dict(left=U * flip, right=V * flip, s=s, gamma=None, note=note)
    est = KSVD(
        r,
        kernel=kernel,
        bandwidth_factor=bandwidth_factor,
        compat=None,
        center=center,
        solver=solver,
        solver_options=solver_options,
        random_state=rng,
    ).fit(A)
    return dict(
        left=est.left_features_,
        right=est.right_features_,
        s=est.singular_values_,
        gamma=est.gamma_,
        note=note,
    )


def structured_rbf_kpca(A, gamma, n_components, *, random_state=None):
    """Exact RBF kernel PCA scores of the rows of a sparse matrix, without the N x N kernel.

    With ``r_i = |a_i|^2`` and ``P = A A^T`` (sparse), ``K_ij = exp(-(r_i + r_j - 2 P_ij) /
    gamma^2)`` equals ``d_i d_j`` (``d = exp(-r / gamma^2)``) off the pattern of P, so
    ``K = d d^T + E`` with E sparse on that pattern, every entry in [-1, 1] (no overflow for
    small gamma). The centred ``H K H`` is applied as an operator and its top eigenpairs found
    by ARPACK; scores are ``eigvec * sqrt(eigval)``, the convention of
    ``sklearn.decomposition.KernelPCA`` (which it matches up to signs on small graphs).

    Parameters
    ----------
    A : sparse matrix of shape (N, d)
    gamma : float
        Bandwidth, kernel ``exp(-|x - y|^2 / gamma^2)``.
    n_components : int
    random_state : None, int or Generator
        Seeds the ARPACK start vector.

    Returns
    -------
    ndarray of shape (N, n_components)
    """
    A = sp.csr_matrix(A, dtype=np.float64)
    n = A.shape[0]
    sq = np.asarray(A.multiply(A).sum(axis=1)).ravel()
    d = np.exp(-sq / gamma**2)
    P = (A @ A.T).tocoo()
    vals = np.exp(-(sq[P.row] + sq[P.col] - 2.0 * P.data) / gamma**2) - d[P.row] * d[P.col]
    E = sp.csr_matrix((vals, (P.row, P.col)), shape=(n, n))

    def matvec(x):
        x = np.asarray(x, dtype=np.float64).reshape(n, -1)
        xc = x - x.mean(axis=0)
        y = np.outer(d, d @ xc) + E @ xc
        return y - y.mean(axis=0)

    op = LinearOperator((n, n), matvec=matvec, matmat=matvec, dtype=np.float64)
    rng = np.random.default_rng(random_state)
    w, V = eigsh(op, k=n_components, which="LA", v0=rng.standard_normal(n))
    order = np.argsort(w)[::-1]
    w, V = np.maximum(w[order], 0.0), V[:, order]
    flip = np.sign(V[np.abs(V).argmax(axis=0), np.arange(V.shape[1])])
    flip[flip == 0] = 1.0
    return V * flip * np.sqrt(w)


def combine_features(emb, mode="uv"):
    """Feature vectors of the nodes from their embeddings.

    Parameters
    ----------
    emb : dict
        Output of :func:`node_embeddings`.
    mode : {"u", "us", "uv", "usvs"}
        ``u``: source embedding; ``us``: source scaled by the singular values; ``uv``:
        ``[u, v]``; ``usvs``: ``[u s, v s]``. The symmetric methods (left is right) always use
        their scores once.

    Returns
    -------
    ndarray of shape (N, r) or (N, 2r)
    """
    _check_choice(mode, "mode", FEATURE_MODES)
    left, right, s = emb["left"], emb["right"], emb["s"]
    if left is right:
        return left
    if mode == "u":
        return left
    if mode == "us":
        return left * s
    if mode == "uv":
        return np.hstack([left, right])
    return np.hstack([left * s, right * s])


def _classifier(standardize):
    clf = RidgeClassifier(alpha=1.0)
    return make_pipeline(StandardScaler(), clf) if standardize else clf


def evaluate_features(
    features_by_factor, labels, splits, *, standardize=False, cv_folds=10, random_state=None
):
    """Micro/macro F1 per split, with the feature set chosen by CV on the training part.

    Parameters
    ----------
    features_by_factor : dict
        bandwidth factor (or None) -> feature matrix for all nodes.
    labels : ndarray of shape (N,)
    splits : list of (train_idx, test_idx)
    standardize : bool, default=False
        Standardise the features (fitted on the training nodes) before the classifier.
    cv_folds : int, default=10
    random_state : None, int or Generator
        Seeds the CV folds.

    Returns
    -------
    list of dict
        One dict per split: ``micro``, ``macro``, ``factor`` (the selected key).
    """
    rng = np.random.default_rng(random_state)
    out = []
    keys = list(features_by_factor)
    for train, test in splits:
        best = keys[0]
        if len(keys) > 1:
            folds = StratifiedKFold(cv_folds, shuffle=True, random_state=draw_seed(rng))
            cv = {
                k: cross_val_score(
                    _classifier(standardize),
                    features_by_factor[k][train],
                    labels[train],
                    cv=folds,
                    scoring="f1_micro",
                ).mean()
                for k in keys
            }
            best = max(keys, key=lambda k: cv[k])
        F = features_by_factor[best]
        clf = _classifier(standardize).fit(F[train], labels[train])
        pred = clf.predict(F[test])
        out.append(
            dict(
                micro=f1_score(labels[test], pred, average="micro"),
                macro=f1_score(labels[test], pred, average="macro"),
                factor=best,
            )
        )
    return out


def make_splits(labels, n_runs, *, test_size=0.1, random_state=None):
    """Stratified random train/test splits of the labelled nodes (labels >= 0)."""
    labelled = np.flatnonzero(labels >= 0)
    sss = StratifiedShuffleSplit(n_splits=n_runs, test_size=test_size, random_state=random_state)
    return [(labelled[tr], labelled[te]) for tr, te in sss.split(labelled, labels[labelled])]


def run_node_classification(
    datasets=("cora", "citeseer", "pubmed"),
    *,
    methods=METHODS,
    n_components=256,
    n_components_large=16,
    large_n=10000,
    n_runs=10,
    test_size=0.1,
    bandwidth_grid=BANDWIDTH_GRID,
    feature_mode="uv",
    standardize=False,
    kernel="sne",
    center=True,
    cv_folds=10,
    subsample=None,
    graph_loader=None,
    progress=True,
    random_state=0,
):
    """Run the node-classification table.

    Parameters
    ----------
    datasets : sequence of str
        Graph names for :func:`ksvd_bench.datasets.load_graph` (or ``graph_loader``).
    methods : sequence of str
        Subset of :data:`METHODS`.
    n_components : int, default=256
        Embedding dimension per side (SVD/KSVD give ``2 n_components`` features with mode
        "uv"; PCA/KPCA get ``2 n_components`` components so every method has the same number of
        features). The paper goes up to 1000 features; 512 keeps the whole reproduction near the
        30-minute budget on 2 cores (dense KPCA eigendecompositions per bandwidth dominate).
    n_components_large : int, default=16
        Dimension used instead for graphs with more than ``large_n`` nodes (PubMed): with 64
        per side (128 KPCA eigenvectors) ARPACK on the structured KPCA operator needed more than
        5 minutes for the single bandwidth factor 16, which breaks the time budget.
    n_runs : int, default=10
    test_size : float, default=0.1
    bandwidth_grid : sequence of float
    feature_mode : str, default="uv"
    standardize : bool, default=False
    kernel : str, default="sne"
    center : bool, default=True
    cv_folds : int, default=10
    subsample : int, optional
        Keep only the first ``subsample`` nodes (induced subgraph) for quick runs; at least 4,
        and enough for a stratified split (checked up front, :func:`load_labelled_graphs`).
    graph_loader : callable, optional
        ``name -> Graph``; default :func:`ksvd_bench.datasets.load_graph`.
    progress : bool, default=True
    random_state : int, default=0

    Returns
    -------
    ExperimentResult
        A dict: ``rows`` (one per dataset x method with mean/std F1, the paper's values, the
        selected bandwidth factors and a ``note``, "chance level" where the mean micro-F1 is
        within 2 standard errors of the majority-class rate), ``runs`` (per split), ``chance``
        (dataset -> :func:`majority_baseline`) and ``protocol`` (the settings).
    """
    for m in methods:
        _check_choice(m, "methods", METHODS)
    run = RunSetup(
        random_state,
        progress=progress,
        n_runs=n_runs,
        n_components=n_components,
        n_components_large=n_components_large,
    )
    n_runs = run.counts["n_runs"]
    grid_cv = cv_folds if len(tuple(bandwidth_grid)) > 1 else None
    graphs = load_labelled_graphs(
        datasets,
        subsample=subsample,
        graph_loader=graph_loader,
        test_size=test_size,
        cv_folds=grid_cv,
    )
    rows, runs, chance = [], [], {}
    for name, A, labels in graphs:
        n = A.shape[0]
        r = n_components if n <= large_n else n_components_large
        r = min(r, n // 2 - 1)
        splits = make_splits(labels, n_runs, test_size=test_size, random_state=run.seed())
        chance[name] = majority_baseline(labels, splits)
        bar = run.bar(methods, f"node classification {name}")
        for method in bar:
            grid = tuple(bandwidth_grid) if method in _BANDWIDTH_METHODS else (None,)
            feats, gammas, note = {}, {}, ""
            for f in grid:
                bar.set_postfix(method=method, factor=f)
                r_m = 2 * r if method in ("pca", "kpca") and feature_mode in ("uv", "usvs") else r
                emb = node_embeddings(
                    A,
                    method,
                    r_m,
                    bandwidth_factor=1.0 if f is None else f,
                    kernel=kernel,
                    center=center,
                    random_state=run.seed(),
                )
                feats[f] = combine_features(emb, feature_mode)
                gammas[f] = emb["gamma"]
                note = emb["note"] or note
            res = evaluate_features(
                feats,
                labels,
                splits,
                standardize=standardize,
                cv_folds=cv_folds,
                random_state=run.seed(),
            )
            micro = np.array([x["micro"] for x in res])
            macro = np.array([x["macro"] for x in res])
            paper = paper_numbers.NODE_CLASSIFICATION.get(name, {}).get(method, (None, None))
            factors = [x["factor"] for x in res]
            note = "; ".join(x for x in (chance_note(micro.mean(), chance[name]), note) if x)
            rows.append(
                dict(
                    dataset=name,
                    method=method,
                    n_features=next(iter(feats.values())).shape[1],
                    micro=micro.mean(),
                    micro_std=micro.std(),
                    macro=macro.mean(),
                    macro_std=macro.std(),
                    paper_micro=paper[0],
                    paper_macro=paper[1],
                    factors=",".join(sorted({str(f) for f in factors})),
                    note=note,
                )
            )
            for k, x in enumerate(res):
                runs.append(
                    dict(dataset=name, method=method, run=k, gamma=gammas[x["factor"]], **x)
                )
    protocol = dict(
        split=f"stratified random {1 - test_size:.0%}/{test_size:.0%} train/test, {n_runs} runs",
        classifier="RidgeClassifier(alpha=1)",
        n_components=n_components,
        n_components_large=n_components_large,
        bandwidth_grid=list(bandwidth_grid),
        cv_folds=cv_folds,
        feature_mode=feature_mode,
        standardize=standardize,
        kernel=kernel,
        center=center,
        subsample=subsample,
        chance_level="majority class of each training part (majority_baseline); 'chance "
        "level' marks a mean micro-F1 within 2 binomial standard errors of it",
        random_state=random_state,
    )
    return ExperimentResult(
        "node_classification", rows=rows, runs=runs, chance=chance, protocol=protocol
    )


def load_labelled_graphs(
    datasets, *, subsample=None, graph_loader=None, test_size=0.1, cv_folds=None
):
    """Load each graph (its first ``subsample`` nodes) and check that its labels can be split.

    Every graph is loaded and checked before any experiment starts, so that a bad setting
    fails at once and not after the first dataset's work.

    Parameters
    ----------
    datasets : sequence of str
    subsample : int, optional
        Keep the first ``subsample`` nodes (induced subgraph); at least 4.
    graph_loader : callable, optional
        ``name -> Graph``; default :func:`ksvd_bench.datasets.load_graph`.
    test_size : float, default=0.1
    cv_folds : int, optional
        See :func:`check_labels_splittable`.

    Returns
    -------
    list of (name, A, labels)
        ``A`` a CSR float64 adjacency matrix, ``labels`` an int array.

    Raises
    ------
    ValueError
        Naming ``datasets`` when it is empty and ``subsample`` when the kept nodes are too few
        to split, or have no edge to embed.
    """
    graph_loader = default_loader(graph_loader, "graph")
    if isinstance(datasets, str) or len(datasets) == 0:
        raise ValueError(f"datasets must be a non-empty sequence of names, got {datasets!r}")
    if subsample is not None:
        # the embeddings need r = N // 2 - 1 >= 1 component
        check_count(subsample, "subsample", minimum=4)
    out = []
    for name in datasets:
        graph = graph_loader(name)
        A = sp.csr_matrix(graph.adjacency, dtype=np.float64)
        labels = np.asarray(graph.labels)
        if subsample is not None and subsample < A.shape[0]:
            A = A[:subsample][:, :subsample].tocsr()
            labels = labels[:subsample]
        try:
            check_has_edges(A)
            check_labels_splittable(labels, test_size=test_size, cv_folds=cv_folds)
        except ValueError as exc:
            if subsample is None:
                raise ValueError(f"dataset {name!r}: {exc}") from None
            raise ValueError(f"subsample={subsample} is too small for {name!r}: {exc}") from None
        out.append((name, A, labels))
    return out


def protocol_probe(
    graph,
    *,
    variants,
    n_runs=5,
    test_size=0.1,
    progress=True,
    random_state=0,
):
    """Compare feature protocols on one graph (no CV: each variant is evaluated as given).

    Parameters
    ----------
    graph : Graph
    variants : list of dict
        Each: ``method``, ``n_components``, ``mode``, ``standardize`` and optional
        ``bandwidth_factor``, ``kernel``, ``center``, ``self_loops`` (add I to A).
    n_runs, test_size, progress, random_state
        As in :func:`run_node_classification`.

    Returns
    -------
    list of dict
        One row per variant with mean/std micro and macro F1.
    """
    run = RunSetup(random_state, progress=progress)
    A0 = sp.csr_matrix(graph.adjacency, dtype=np.float64)
    labels = np.asarray(graph.labels)
    splits = make_splits(labels, n_runs, test_size=test_size, random_state=run.seed())
    cache = {}
    rows = []
    for var in run.bar(variants, "protocol probe"):
        var = dict(var)
        A = A0 + sp.eye(A0.shape[0], format="csr") if var.get("self_loops") else A0
        key = (
            var["method"],
            var["n_components"],
            var.get("bandwidth_factor", 1.0),
            var.get("kernel", "sne"),
            var.get("center", True),
            bool(var.get("self_loops")),
        )
        if key not in cache:
            cache[key] = node_embeddings(
                A,
                var["method"],
                var["n_components"],
                bandwidth_factor=var.get("bandwidth_factor", 1.0),
                kernel=var.get("kernel", "sne"),
                center=var.get("center", True),
                random_state=run.seed(),
            )
        F = combine_features(cache[key], var["mode"])
        res = evaluate_features({None: F}, labels, splits, standardize=var["standardize"])
        micro = np.array([x["micro"] for x in res])
        macro = np.array([x["macro"] for x in res])
        rows.append(
            dict(
                var,
                n_features=F.shape[1],
                micro=micro.mean(),
                micro_std=micro.std(),
                macro=macro.mean(),
                macro_std=macro.std(),
            )
        )
    return rows
