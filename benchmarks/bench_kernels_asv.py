"""Kernel builders: dense SNE/RBF kernel matrices from dense and sparse inputs, plus the exact
structured operator (build time and memory) and the fused passes of a lazy point source.

Default grid: Cora's full size (n = 2708) for the builders and n = 2000 for the passes;
``KSVD_BENCH_ASV_FULL=1`` adds n = 1000 and n = 6000.
"""

from __future__ import annotations

import numpy as np

from .common import SlowTiming, grid, warm_up_structured


class KernelBuild(SlowTiming):
    """``ksvd_kernel`` on Cora's adjacency (square, no compatibility map), centred."""

    params = (["sne", "rbf"], ["dense", "sparse"], grid([2708], [1000, 2708]))
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


class StructuredBuild(SlowTiming):
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


class FusedPasses(SlowTiming):
    """Fused passes of a lazy two-point-set SNE kernel (issue 9): set-up, matmat, sketch.

    ``KernelSource.from_points`` on two Gaussian point sets (d = 64), 40 columns (sketch:
    40 + 40); the dense ``kernel_matrix`` of the same points is the baseline the benchmark
    script ``benchmarks/scripts/bench_passes.py`` compares against (issue target: matmat at
    most 1.0x, sketch at most 1.3x).
    """

    params = [grid([2000], [2000, 6000])]
    param_names = ["n"]
    timeout = 300

    def setup(self, n):
        from ksvd_bench.kernels import KernelSource

        rng = np.random.default_rng(0)
        d = 64
        self.X = rng.standard_normal((n, d))
        self.Z = rng.standard_normal((n, d))
        self.gamma = float(np.sqrt(2.0 * d))
        self.Omega = rng.standard_normal((n, 40))
        self.Psi = rng.standard_normal((n, 40))
        # warm up every pass on a small input of the same dtype and layout (JIT or cache)
        small = KernelSource.from_points(self.X[:50], self.Z[:60], "sne", gamma=self.gamma)
        small.sketch(self.Omega[:60], self.Psi[:50])
        small.matmat(self.Omega[:60])
        self.S = KernelSource.from_points(self.X, self.Z, "sne", gamma=self.gamma)

    def time_setup(self, n):
        from ksvd_bench.kernels import KernelSource

        KernelSource.from_points(self.X, self.Z, "sne", gamma=self.gamma)

    def time_matmat(self, n):
        self.S.matmat(self.Omega)

    def time_sketch(self, n):
        self.S.sketch(self.Omega, self.Psi)

    def time_kernel_matrix(self, n):
        from ksvd_bench.kernels import kernel_matrix

        kernel_matrix(self.X, self.Z, "sne", gamma=self.gamma)


class PassRoofline:
    """Each fused pass timed against this machine's BLAS doing its products (issue 21).

    ``track_blas_ratio`` records pass / BLAS (:func:`ksvd_bench.roofline.time_against_blas`:
    ``X Z^T`` then times ``Omega`` and/or ``Psi`` at the same shape and dtype, exp left
    out), on one thread, as the median over interleaved rounds of this process's CPU-time
    ratio: a number that does not depend on the machine's speed or its load, so a
    regression in the kernel code shows as a ratio that grows. RBF, d = 64, 40 columns.
    """

    params = (["float32", "float64"], ["matmat", "rmatmat", "sketch"], grid([2000], [4000]))
    param_names = ["dtype", "pass", "n"]
    timeout = 300

    def setup(self, dtype, name, n):
        from ksvd_bench.kernels import KernelSource
        from ksvd_bench.roofline import blas_work, pass_operands

        rng = np.random.default_rng(0)
        d = 64
        X = rng.standard_normal((n, d))
        Z = rng.standard_normal((n, d))
        Omega, Psi, Om_d, Psi_d = pass_operands(n, n, 40, dtype, seed=1)
        S = KernelSource.from_points(X, Z, "rbf", gamma=float(np.sqrt(2.0 * d)), dtype=dtype)
        Xd, Zd = X.astype(dtype), Z.astype(dtype)
        run = {
            "matmat": lambda: S.matmat(Omega),
            "rmatmat": lambda: S.rmatmat(Psi),
            "sketch": lambda: S.sketch(Omega, Psi),
        }[name]
        self.pair = (run, lambda: blas_work(name, Xd, Zd, Omega=Om_d, Psi=Psi_d))
        for fn in self.pair:  # compile or cache load, first-touch page faults
            fn()

    def track_blas_ratio(self, dtype, name, n):
        from ksvd_bench.roofline import time_against_blas
        from ksvd_bench.threads import solver_threads

        with solver_threads(1):
            return time_against_blas({name: self.pair}, repeats=5)[name]["cpu_ratio"]

    track_blas_ratio.unit = "pass / BLAS"
