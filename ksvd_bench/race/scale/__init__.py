"""The scale study: cost against size, one command (``ksvd-bench scale``).

Three families of problems, each at a ladder of sizes, each solved for its top-r singular
triplets by a list of methods:

* part ``"a"``: synthetic directed graphs (:func:`~ksvd_bench.datasets.make_directed_graph`),
  N = 2e4 to 1e6 nodes, centred SNE kernel of the adjacency matrix through
  ``kernel_source(A, "sne")`` (the exact structured operator, on the CPU);
* part ``"b"``: two point sets from shared clusters
  (:func:`~ksvd_bench.datasets.make_clustered_points`, d = 64, K = r clusters, so G has a
  spectral gap at r), N = M = 5e3 to 1e5, uncentred SNE kernel through the lazy
  ``KernelSource.from_points`` (G is never formed: 80 GB at N = M = 1e5), on the CPU or, with
  ``device="cuda"``, on one GPU;
* part ``"c"``: the rare-cluster family of issue 15
  (:func:`~ksvd_bench.datasets.make_rare_clusters`, d = 64, r clusters of which 30% are rare,
  weight 0.02), N = M = 6e3 to 1e5, the same lazy uncentred SNE source with the family's gamma:
  where uniform sampling misses structure. Its default methods add the asym Nystrom sampling
  entries (ARP, RPCholesky, ACA; :data:`SAMPLING_METHODS`). ``parts="both"`` (the default)
  runs a and b; ``"all"`` adds c.

Every cell (part, size, method) runs in a fresh process with a wall-clock and a memory limit
(:mod:`ksvd_bench.race.scale.cells`): its seconds (set-up of the source plus the solve; CPU
seconds beside them), passes over G and set-up passes, entries of G evaluated, peak resident
memory, the warnings of its solve (counted, never silenced) and whether the solver trusted
its answer, and its subspace and singular-value errors against a reference top-r (exact
where the structured operator or a dense LAPACK SVD can give it, else a high-effort block
Krylov answer, labelled, with its Wedin estimate). References are cached under
``<out>/reference_cache`` by problem (part, size, rank, seed, dtype).

Growth exponents are fitted only where the cells support them
(:mod:`ksvd_bench.race.scale.fit`); :func:`best_cells` names the fastest cell whose
subspace and singular-value errors are within :data:`ACCURACY_TARGET` and whose answer was
not marked unreliable. The methods are :class:`MethodRunner` objects in :data:`RUNNERS`, each
with its fixed efforts per part (:func:`register_runner` adds one); a Dask ``client`` or
``scheduler`` address is passed through to the sources and the runners.

The package is split by job: ``run`` orchestrates (:func:`run_scale`), ``problems`` defines
the problems, ``runners`` the methods, ``cells`` runs and isolates one cell, ``fit`` draws the
conclusions, ``files`` writes (and merges) the files, ``table`` formats the terminal text
(:func:`format_scale`), ``cli`` wires ``ksvd-bench scale``.
"""

from ksvd_bench.race.scale.cells import compute_reference, run_cell, run_isolated
from ksvd_bench.race.scale.files import plot_scale, write_scale
from ksvd_bench.race.scale.fit import best_cells, fit_exponent
from ksvd_bench.race.scale.problems import (
    ACCURACY_TARGET,
    DEFAULT_METHODS,
    DEFAULT_PARTS,
    DEFAULT_RANK,
    DEFAULT_SIZES,
    DEFAULT_TIME_LIMIT,
    DENSE_REFERENCE_MAX_ENTRIES,
    DEVICES,
    PART_TITLES,
    PARTS,
    POINT_PARTS,
    POINTS_DIM,
    QUICK_DENSE_REFERENCE_MAX_ENTRIES,
    QUICK_SIZES,
    QUICK_TIME_LIMIT,
    REFERENCE_KRYLOV,
    REFERENCE_TARGET_ERROR,
    ROW_FIELDS,
    SAMPLING_METHODS,
    ProblemSpec,
    ScaleProblem,
    effort_label,
    make_data,
    make_source,
    setup_passes,
)
from ksvd_bench.race.scale.run import ScaleResult, run_scale
from ksvd_bench.race.scale.runners import (
    DASK_METHODS,
    RUNNERS,
    MethodRunner,
    SolverCall,
    register_runner,
)
from ksvd_bench.race.scale.table import format_scale

__all__ = [
    "PARTS",
    "DEFAULT_PARTS",
    "POINT_PARTS",
    "SAMPLING_METHODS",
    "DEVICES",
    "DEFAULT_SIZES",
    "QUICK_SIZES",
    "DEFAULT_METHODS",
    "RUNNERS",
    "DASK_METHODS",
    "MethodRunner",
    "SolverCall",
    "ProblemSpec",
    "ScaleProblem",
    "ScaleResult",
    "register_runner",
    "run_scale",
    "run_cell",
    "compute_reference",
    "run_isolated",
    "make_data",
    "make_source",
    "fit_exponent",
    "best_cells",
    "format_scale",
    "plot_scale",
    "write_scale",
    # constants the command line and the benchmarks read
    "ACCURACY_TARGET",
    "DEFAULT_RANK",
    "DEFAULT_TIME_LIMIT",
    "DENSE_REFERENCE_MAX_ENTRIES",
    "PART_TITLES",
    "POINTS_DIM",
    "QUICK_DENSE_REFERENCE_MAX_ENTRIES",
    "QUICK_TIME_LIMIT",
    "REFERENCE_KRYLOV",
    "REFERENCE_TARGET_ERROR",
    "ROW_FIELDS",
    "effort_label",
    "setup_passes",
]
