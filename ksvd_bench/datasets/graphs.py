"""The bundled directed citation graphs (Cora, CiteSeer, PubMed) and their bag-of-words features.

The files, their layout and their provenance are described in ``data/PROVENANCE.md``; the facts
used here are:

* ``edges[:, 0]`` is the *cited* paper and ``edges[:, 1]`` the *citing* paper, so the arrow
  "i cites j" is ``edges[:, 1] -> edges[:, 0]`` and ``A[citing, cited] = 1``;
* every line of the original ``.cites`` file is kept, including self-loops (CiteSeer 124,
  PubMed 3), and no file has a duplicated directed line;
* CiteSeer lists 3327 ids, of which 3312 have content (a ``.content`` row and a label); the
  other 15 are cited-only ids with label ``-1``. ``content_only=True`` keeps the 3312.

References
----------
P. Sen, G. Namata, M. Bilgic, L. Getoor, B. Gallagher, T. Eliassi-Rad. Collective
Classification in Network Data. AI Magazine 29(3):93-106, 2008.

G. Namata, B. London, L. Getoor, B. Huang. Query-driven Active Surveying for Collective
Classification. MLG Workshop, 2012.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ._files import DatasetError, data_path, read_npz, read_sparse_npz

__all__ = ["GRAPHS", "FEATURE_GRAPHS", "Graph", "load_graph", "load_features"]

#: names of the bundled graphs
GRAPHS = ("cora", "citeseer", "pubmed")
#: graphs that come with a bag-of-words feature matrix (PubMed's features were not available)
FEATURE_GRAPHS = ("cora", "citeseer")

_GRAPH_SPEC = {
    "edges": ("int", 2),
    "edge_columns": ("str", 1),
    "node_ids": ("str", 1),
    "labels": ("int", 1),
    "class_names": ("str", 1),
    "has_content": ("bool", 1),
}


@dataclass(frozen=True, eq=False)
class Graph:
    """A directed graph with node labels.

    Attributes
    ----------
    name : str
        Dataset name (``"cora"``, ``"citeseer"``, ``"pubmed"`` or ``"synthetic"``).
    adjacency : scipy.sparse.csr_matrix
        float64 ``n_nodes x n_nodes`` matrix with ``A[i, j] = 1`` iff node ``i`` cites (points
        to) node ``j``; sorted indices, no explicit zeros. Self-loops are kept where the source
        file has them.
    labels : numpy.ndarray
        int64 class index per node into ``class_names``, ``-1`` when unknown.
    class_names : tuple of str
        Class names.
    node_ids : numpy.ndarray
        Original identifier of each node (paper ids as strings for the real graphs, integers
        for synthetic ones).
    """

    name: str
    adjacency: sp.csr_matrix
    labels: np.ndarray
    class_names: tuple
    node_ids: np.ndarray

    @property
    def n_nodes(self):
        """Number of nodes."""
        return self.adjacency.shape[0]

    @property
    def n_edges(self):
        """Number of directed edges (stored entries of ``adjacency``, self-loops included)."""
        return int(self.adjacency.nnz)

    def __repr__(self):
        return (
            f"Graph(name={self.name!r}, n_nodes={self.n_nodes}, n_edges={self.n_edges}, "
            f"n_classes={len(self.class_names)})"
        )


def _check_name(name, valid, what="name"):
    if not isinstance(name, str):
        raise TypeError(f"{what} must be a str, one of {valid}; got {type(name).__name__}")
    key = name.strip().lower()
    if key not in valid:
        raise ValueError(f"unknown dataset {what} {name!r}; valid names are {valid}")
    return key


def _read_graph_file(name, data_home):
    """Read and check ``<name>.npz``; return the validated arrays."""
    path = data_path(f"{name}.npz", data_home)
    arrays = read_npz(path, _GRAPH_SPEC)
    edges, node_ids = arrays["edges"], arrays["node_ids"]
    labels, class_names = arrays["labels"], arrays["class_names"]
    has_content = arrays["has_content"]
    n = node_ids.shape[0]
    problems = []
    if tuple(arrays["edge_columns"].tolist()) != ("cited", "citing"):
        problems.append(
            f"edge_columns is {arrays['edge_columns'].tolist()}, expected ['cited', 'citing'] "
            "(the edge direction would be ambiguous)"
        )
    if edges.shape[1:] != (2,):
        problems.append(f"edges has shape {edges.shape}, expected (E, 2)")
    elif edges.size and (edges.min() < 0 or edges.max() >= n):
        problems.append(f"edges hold node indices outside [0, {n})")
    if labels.shape != (n,) or has_content.shape != (n,):
        problems.append(
            f"labels {labels.shape} and has_content {has_content.shape} must both have "
            f"shape ({n},) like node_ids"
        )
    elif labels.size and (labels.min() < -1 or labels.max() >= class_names.size):
        problems.append(f"labels outside [-1, {class_names.size})")
    elif np.any(labels[has_content] < 0):
        problems.append("some nodes with content have no label")
    if n and np.unique(node_ids).size != n:
        problems.append("node_ids are not unique")
    if problems:
        raise DatasetError(f"dataset file {str(path)!r}: {'; '.join(problems)}")
    return arrays


def load_graph(name, *, content_only=False, data_home=None):
    """Load a bundled directed citation graph.

    Parameters
    ----------
    name : {"cora", "citeseer", "pubmed"}
        Which graph.
    content_only : bool, default=False
        Keep only the nodes that have a content row (and a label) in the original LINQS data.
        For CiteSeer this drops the 15 cited-only ids (3327 -> 3312 nodes, 4732 -> 4715 edges);
        for Cora and PubMed every node has content, so it changes nothing.
    data_home : str or os.PathLike, optional
        Directory holding ``<name>.npz`` instead of the bundled copy.

    Returns
    -------
    Graph
        ``adjacency[i, j] = 1`` iff paper ``i`` cites paper ``j``. Self-loops present in the
        source file are kept (CiteSeer has 124, PubMed 3); drop them with
        ``A.setdiag(0); A.eliminate_zeros()`` if unwanted.

    Raises
    ------
    ValueError
        Unknown ``name`` (the message lists the valid names).
    DatasetError
        The file is missing, corrupt or malformed.

    Examples
    --------
    >>> g = load_graph("cora")
    >>> g.n_nodes, g.n_edges
    (2708, 5429)
    """
    key = _check_name(name, GRAPHS)
    if not isinstance(content_only, (bool, np.bool_)):
        raise TypeError(f"content_only must be a bool, got {type(content_only).__name__}")
    arrays = _read_graph_file(key, data_home)
    n = arrays["node_ids"].shape[0]
    cited = arrays["edges"][:, 0]
    citing = arrays["edges"][:, 1]
    adjacency = sp.csr_matrix(
        (np.ones(cited.size, dtype=np.float64), (citing, cited)), shape=(n, n)
    )
    # the coo -> csr conversion sums repeated lines; the files have none, but a repeated
    # citation is still one citation
    adjacency.sum_duplicates()
    adjacency.data[:] = 1.0
    adjacency.sort_indices()
    labels = arrays["labels"].astype(np.int64)
    node_ids = arrays["node_ids"]
    if content_only:
        keep = np.flatnonzero(arrays["has_content"])
        if keep.size != n:
            adjacency = adjacency[keep][:, keep].tocsr()
            adjacency.sort_indices()
            labels = labels[keep]
            node_ids = node_ids[keep]
    return Graph(
        name=key,
        adjacency=adjacency,
        labels=labels,
        class_names=tuple(str(c) for c in arrays["class_names"].tolist()),
        node_ids=node_ids,
    )


def load_features(name, *, content_only=False, data_home=None):
    """Load the binary bag-of-words features of a bundled graph.

    Parameters
    ----------
    name : {"cora", "citeseer"}
        Which graph. PubMed has no bundled features (see ``PROVENANCE.md``).
    content_only : bool, default=False
        Keep the rows of the content nodes only, aligned with
        ``load_graph(name, content_only=True)``. Without it CiteSeer has 3327 rows, the last 15
        (cited-only ids) all zero.
    data_home : str or os.PathLike, optional
        Directory holding ``<name>_features.npz`` and ``<name>.npz`` instead of the bundled
        copies.

    Returns
    -------
    scipy.sparse.csr_matrix
        float64 ``n_nodes x n_words`` 0/1 matrix whose rows are aligned with
        ``load_graph(name, content_only=content_only).node_ids``.

    Raises
    ------
    ValueError
        Unknown ``name`` (the message lists the names that have features).
    DatasetError
        A file is missing, corrupt or malformed, or the row count does not match the graph.
    """
    key = _check_name(name, FEATURE_GRAPHS)
    if not isinstance(content_only, (bool, np.bool_)):
        raise TypeError(f"content_only must be a bool, got {type(content_only).__name__}")
    path = data_path(f"{key}_features.npz", data_home)
    features = read_sparse_npz(path)
    has_content = read_npz(data_path(f"{key}.npz", data_home), {"has_content": ("bool", 1)})[
        "has_content"
    ]
    if features.shape[0] != has_content.size:
        raise DatasetError(
            f"dataset file {str(path)!r}: {features.shape[0]} rows, but the graph "
            f"{key!r} has {has_content.size} nodes"
        )
    if content_only and not has_content.all():
        features = features[np.flatnonzero(has_content)]
    return features
