"""Dataset loading and synthetic graph generation (the timings the unit tests no longer assert).

The unit tests check what these functions return; how fast they do it is measured here:
loading the bundled PubMed graph (19,717 nodes; was asserted < 0.5 s) and generating a
20,000-node planted-community graph (was asserted < 2 s).
"""

from __future__ import annotations


class TimeDatasets:
    """``load_graph("pubmed")`` and ``make_directed_graph(20000)`` (seed 0)."""

    timeout = 120

    def setup(self):
        from ksvd_bench.datasets import load_graph, make_directed_graph

        # first-call costs (imports, any JIT) out of the timings
        load_graph("cora")
        make_directed_graph(200, random_state=0)

    def time_load_graph_pubmed(self):
        from ksvd_bench.datasets import load_graph

        load_graph("pubmed")

    def time_make_directed_graph_20k(self):
        from ksvd_bench.datasets import make_directed_graph

        make_directed_graph(20000, random_state=0)
