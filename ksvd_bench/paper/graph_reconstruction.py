"""Graph reconstruction from node embeddings (the paper's Table 2).

For every node v with out-degree k_v the k_v nodes nearest to v in feature space (v itself
excluded) are predicted as its out-neighbours. For the asymmetric embeddings (SVD, KSVD) the
distance runs from v's source (left) embedding to the candidates' target (right) embeddings;
for PCA and KPCA both are the same scores. The reconstructed adjacency ``A_hat`` is compared with
the true ``A`` by

* ``l1``: the induced matrix 1-norm ``max_j sum_i |A - A_hat|_ij`` (largest column sum),
* ``l2``: the spectral norm ``||A - A_hat||_2``,
* entrywise counts: missing edges, spurious edges, and the number of differing entries.

The paper's l1/l2 pairs (e.g. Cora KSVD 57.0/18.4) cannot both be entrywise norms of a 0/1
difference (that would force l1 = l2^2), so we read them as the two induced norms above.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import svds
from sklearn.neighbors import NearestNeighbors

from ksvd_bench.paper import paper_numbers
from ksvd_bench.paper._result import ExperimentResult
from ksvd_bench.paper._setup import RunSetup, check_count
from ksvd_bench.paper.node_classification import (
    METHODS,
    check_has_edges,
    node_embeddings,
)

EMBEDDING_SCALES = ("u", "us", "sqrt")


def reconstruct_adjacency(source, target, out_degree):
    """Predict each node's out-neighbours as its nearest targets.

    Parameters
    ----------
    source : ndarray of shape (N, d)
        Source (left) embeddings, the queries.
    target : ndarray of shape (N, d)
        Target (right) embeddings, the candidates.
    out_degree : array-like of int, shape (N,)
        Number of neighbours k_v to predict for each node.

    Returns
    -------
    A_hat : scipy.sparse.csr_matrix of shape (N, N)
        ``A_hat[v, j] = 1`` for the k_v targets j != v nearest to ``source[v]`` (ties broken by
        index order).
    """
    source = np.asarray(source, dtype=np.float64)
    target = np.asarray(target, dtype=np.float64)
    k = np.asarray(out_degree, dtype=np.int64)
    n = source.shape[0]
    if target.shape != source.shape:
        raise ValueError(
            f"source and target must have the same shape, got {source.shape} and {target.shape}"
        )
    if k.shape != (n,):
        raise ValueError(f"out_degree must have shape ({n},), got {k.shape}")
    if np.any(k < 0) or np.any(k > n - 1):
        raise ValueError(f"out_degree must lie in [0, {n - 1}]")
    active = np.flatnonzero(k > 0)
    if active.size == 0:
        return sp.csr_matrix((n, n))
    kmax = int(k.max())
    nn = NearestNeighbors(n_neighbors=min(kmax + 1, n), algorithm="brute").fit(target)
    dist, idx = nn.kneighbors(source[active])
    rows, cols = [], []
    for row, v in enumerate(active):
        # stable order: distance, then index, so ties do not depend on the NN backend
        order = np.lexsort((idx[row], dist[row]))
        cand = idx[row][order]
        cand = cand[cand != v][: k[v]]
        rows.append(np.full(cand.size, v))
        cols.append(cand)
    rows = np.concatenate(rows)
    cols = np.concatenate(cols)
    return sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(n, n))


def reconstruction_errors(A, A_hat):
    """Induced 1-norm, spectral norm and entrywise counts of ``A - A_hat``.

    Parameters
    ----------
    A, A_hat : sparse or dense matrices of shape (N, N) with 0/1 entries

    Returns
    -------
    dict
        ``l1`` (max column sum of |A - A_hat|), ``l2`` (largest singular value),
        ``missing`` (edges of A not in A_hat), ``spurious`` (edges of A_hat not in A),
        ``n_diff`` (entries that differ) and ``frobenius``.
    """
    A = sp.csr_matrix(A, dtype=np.float64)
    A_hat = sp.csr_matrix(A_hat, dtype=np.float64)
    if A.shape != A_hat.shape:
        raise ValueError(f"A and A_hat must have the same shape, got {A.shape} and {A_hat.shape}")
    D = (A - A_hat).tocsr()
    D.eliminate_zeros()
    absD = abs(D)
    l1 = float(absD.sum(axis=0).max()) if D.nnz else 0.0
    if D.nnz == 0:
        l2 = 0.0
    elif min(D.shape) <= 500:
        l2 = float(np.linalg.norm(D.toarray(), 2))
    else:
        # not the all-ones vector: every row of D sums to 0 when each node predicts exactly its
        # out-degree, so D @ 1 = 0 and ARPACK would start from the zero vector
        v0 = np.random.default_rng(0).standard_normal(min(D.shape))
        l2 = float(svds(D, k=1, v0=v0, return_singular_vectors=False)[0])
    return dict(
        l1=l1,
        l2=l2,
        missing=int((D > 0).sum()),
        spurious=int((D < 0).sum()),
        n_diff=int(D.nnz),
        frobenius=float(np.sqrt((D.multiply(D)).sum())),
    )


def _scaled(emb, scale):
    left, right, s = emb["left"], emb["right"], emb["s"]
    if scale == "u":
        return left, right
    if scale == "us":
        return left * s, right * s
    return left * np.sqrt(s), right * np.sqrt(s)


def run_graph_reconstruction(
    datasets=("cora", "citeseer", "pubmed"),
    *,
    methods=METHODS,
    n_components=64,
    scale="u",
    bandwidth_factor=1.0,
    kernel="sne",
    subsample=None,
    graph_loader=None,
    progress=True,
    random_state=0,
):
    """Run the graph-reconstruction table.

    Parameters
    ----------
    datasets : sequence of str
    methods : sequence of str
    n_components : int, default=64
        Embedding dimension (the paper does not state it).
    scale : {"u", "us", "sqrt"}, default="u"
        Scaling of the SVD/KSVD embeddings by the singular values: none, ``s`` or ``sqrt(s)``.
    bandwidth_factor : float, default=1.0
        Factor of the paper's bandwidth rule (no labels here, so no CV).
    kernel : str, default="sne"
    subsample : int, optional
        Keep the first ``subsample`` nodes (induced subgraph) for quick runs; at least 4.
    graph_loader : callable, optional
    progress : bool, default=True
    random_state : int, default=0

    Returns
    -------
    ExperimentResult
        A dict: ``rows``, one per dataset x method with our l1/l2 and counts and the paper's l1/l2;
        ``protocol``.
    """
    if scale not in EMBEDDING_SCALES:
        raise ValueError(f"scale must be one of {EMBEDDING_SCALES}, got {scale!r}")
    run = RunSetup(
        random_state,
        progress=progress,
        loader=graph_loader,
        kind="graph",
        n_components=n_components,
    )
    if subsample is not None:
        # the embeddings need r = N // 2 - 1 >= 1 component
        check_count(subsample, "subsample", minimum=4)
    rows = []
    for name in datasets:
        graph = run.loader(name)
        A = sp.csr_matrix(graph.adjacency, dtype=np.float64, copy=True)
        if subsample is not None and subsample < A.shape[0]:
            A = A[:subsample][:, :subsample].tocsr()
        A.setdiag(0)
        A.eliminate_zeros()
        A.data[:] = 1.0
        try:
            check_has_edges(A)
        except ValueError as exc:
            what = "dataset" if subsample is None else f"subsample={subsample} of"
            raise ValueError(f"{what} {name!r}: {exc}") from None
        out_degree = np.diff(A.indptr)
        r = min(n_components, A.shape[0] // 2 - 1)
        for method in run.bar(methods, f"graph reconstruction {name}"):
            emb = node_embeddings(
                A,
                method,
                r,
                bandwidth_factor=bandwidth_factor,
                kernel=kernel,
                random_state=run.seed(),
            )
            src, tgt = _scaled(emb, scale)
            A_hat = reconstruct_adjacency(src, tgt, out_degree)
            err = reconstruction_errors(A, A_hat)
            paper = paper_numbers.GRAPH_RECONSTRUCTION.get(name, {}).get(method, (None, None))
            rows.append(
                dict(
                    dataset=name,
                    method=method,
                    n_nodes=A.shape[0],
                    n_edges=A.nnz,
                    **err,
                    paper_l1=paper[0],
                    paper_l2=paper[1],
                    note=emb["note"],
                )
            )
    protocol = dict(
        n_components=n_components,
        scale=scale,
        bandwidth_factor=bandwidth_factor,
        kernel=kernel,
        subsample=subsample,
        self_loops="removed before reconstruction (a node never predicts itself)",
        norms="l1 = induced 1-norm (max column sum), l2 = spectral norm of A - A_hat",
        random_state=random_state,
    )
    return ExperimentResult("graph_reconstruction", rows=rows, protocol=protocol)
