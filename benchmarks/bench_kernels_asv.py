"""Kernel builders: dense SNE/RBF kernel matrices from dense and sparse inputs, two sizes,
plus the exact structured operator (build time and memory)."""

from __future__ import annotations

import numpy as np

from .common import warm_up_structured


class KernelBuild:
    """``ksvd_kernel`` on Cora's adjacency (square, no compatibility map), centred."""

    params = (["sne", "rbf"], ["dense", "sparse"], [1000, 2708])
    param_names = ["kernel", "input", "n"]
    timeout = 300

    def setup(self, kernel, layout, n):
        from ksvd_bench.kernels import ksvd_kernel, paper_gamma
        from ksvd_bench.race.problems import problem_data

        A = problem_data("cora")[:n, :n].tocsr()
        self.gamma = paper_gamma(A, 1.0)
        self.A = A.toarray() if layout == "dense" else A
        # Same dtype and layout as the timed input, so the timed call never compiles.
        small = self.A[:40, :40]
        ksvd_kernel(small, kernel, gamma=self.gamma, compat=None, center=True)

    def _build(self, kernel):
        from ksvd_bench.kernels import ksvd_kernel

        return ksvd_kernel(self.A, kernel, gamma=self.gamma, compat=None, center=True)

    def time_ksvd_kernel(self, kernel, layout, n):
        self._build(kernel)

    def peakmem_ksvd_kernel(self, kernel, layout, n):
        self._build(kernel)


class StructuredBuild:
    """Build of the exact structured SNE operator from the adjacency matrix (issue 6)."""

    params = [["cora", "pubmed"]]
    param_names = ["dataset"]
    timeout = 300

    def setup(self, dataset):
        from ksvd_bench.kernels import paper_gamma
        from ksvd_bench.race.paper_runtime import BANDWIDTH_FACTORS
        from ksvd_bench.race.problems import problem_data

        warm_up_structured()
        self.A = problem_data(dataset)
        self.gamma = paper_gamma(self.A, BANDWIDTH_FACTORS[dataset])

    def _build(self):
        from ksvd_bench.kernels import StructuredKernelSource

        return StructuredKernelSource(self.A, "sne", gamma=self.gamma, center=True)

    def time_structured_build(self, dataset):
        self._build()

    def peakmem_structured_build(self, dataset):
        self._build()

    def track_structured_nnz(self, dataset):
        return float(np.asarray(getattr(self._build(), "nnz", np.nan)))

    track_structured_nnz.unit = "entries"
