"""Datasets: the bundled real graphs and UCI tables, and seeded synthetic generators.

Bundled files live in ``ksvd_bench/datasets/data``; their formats and provenance (sources,
commits, checks, citations) are documented in ``data/PROVENANCE.md``, readable with
``importlib.resources.files("ksvd_bench.datasets") / "data" / "PROVENANCE.md"``.
Loading never unpickles; a missing or damaged file raises :class:`DatasetError`.
"""

from ._files import DATA_DIR, DatasetError, read_user_matrix
from .graphs import FEATURE_GRAPHS, GRAPHS, Graph, load_features, load_graph
from .synthetic import (
    DECAYS,
    AttentionPoints,
    ClusteredPoints,
    KernelProblem,
    make_attention_points,
    make_clustered_points,
    make_directed_graph,
    make_kernel_problem,
    make_rare_clusters,
    measure_coherence,
)
from .tables import TABLE_ALIASES, TABLES, load_table

__all__ = [
    "DATA_DIR",
    "DECAYS",
    "FEATURE_GRAPHS",
    "GRAPHS",
    "TABLES",
    "TABLE_ALIASES",
    "AttentionPoints",
    "ClusteredPoints",
    "DatasetError",
    "Graph",
    "KernelProblem",
    "list_datasets",
    "load_features",
    "load_graph",
    "load_table",
    "make_attention_points",
    "make_clustered_points",
    "make_directed_graph",
    "make_kernel_problem",
    "read_user_matrix",
    "make_rare_clusters",
    "measure_coherence",
]


def list_datasets():
    """Names of the bundled datasets.

    Returns
    -------
    dict
        ``{"graphs": ("cora", "citeseer", "pubmed"), "tables": ("diabetes", "ionosphere",
        "liver", "cholesterol", "yacht")}``. :func:`load_table` also accepts the file-style
        aliases in ``TABLE_ALIASES``; :func:`load_features` covers ``FEATURE_GRAPHS``.
    """
    return {"graphs": GRAPHS, "tables": TABLES}
