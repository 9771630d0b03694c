"""The solver race (the paper's Tables 3 and 4): which solver reaches a tolerance fastest.

For each problem, tolerance ``eps`` and accuracy measure, every raced solver is driven to
``eps`` by :func:`ksvd_bench.driver.solve_to_tolerance` for several seeds. The measures are eta
under one of its three weightings (``"singular_values"`` is the paper's, ``"uniform"`` the
strict one) and ``"lowrank"``, the gap-robust rank-r approximation error relative to the
optimum (:func:`ksvd_bench.metrics.lowrank_error`). One summary row per (problem, eps, measure,
method) gives the time at the found effort (median over seeds), the effort, the passes over G,
the value reached, whether every seed converged, the speedup over RSVD, the kernel
construction time, an end-to-end time and the paper's own numbers (beside the entries that
run the paper's methods: its asym Nystrom is ``asym_nystrom_paper``, the paper's core without
a check pass; ``asym_nystrom`` is the solvers' stable default). Three kinds of extra rows:

* ``"tsvd (structured)"``: the exact answer through the structured kernel operator
  (sparse square data, exp kernels), timed end to end (operator build + ARPACK);
* ``"<method> [stop=residual]"``: the same solver stopped by the reference-free residual
  estimate of eta instead of the true eta, with the eta it actually reached beside the
  estimate;
* ``stop="n/a"``: an entry that does not apply to the problem (``asym_nystrom_rpcholesky``
  on a graph: no joint PSD kernel), with the reason; nothing is run.

Rules of the race (see :func:`run_compare`): the reference SVD is cached and never charged;
JIT compilation is excluded (the kernel builders and every solver are warmed up first); all
solvers run with the same Numba and BLAS thread counts (recorded as used); one dtype (float64)
throughout; an answer converges only as a whole triplet (its measure, its singular values,
``max_i |s~_i - s_i| <= eps s_1``, and its triplet residual within eps, and not marked
unreliable by the solver: :func:`ksvd_bench.race.common.meets`); a solver that misses
``eps`` is reported as not converged with its best value and no time. The rule holds for
every row, the ``[stop=residual]`` and exact rows too: each row's ``status`` is one of
:data:`~ksvd_bench.race.common.STATUSES`, and a reference-free stop that fired on an answer
missing any part of the rule is ``"stopped early, wrong"`` (not converged, with its sv error
and the time the stop took). No warning is silenced: each row counts the warnings of its
answers and keeps their messages. Each row also carries its effort sweep per seed
(``history``, for the report's time-to-accuracy curves; see
:data:`~ksvd_bench.race.compare.files.ROW_FIELDS`).

The package is split by job: :mod:`~ksvd_bench.race.compare.run` orchestrates
(:func:`run_compare`: check the arguments, then per problem load it, compute its reference,
warm the solvers up and race every method, add the exact structured rows and the speedups,
assemble the record and write it), :mod:`~ksvd_bench.race.compare.settings` checks the
arguments, :mod:`~ksvd_bench.race.compare.cells` races one method (the seeds of each cell and
their summary), :mod:`~ksvd_bench.race.compare.files` writes the files (and the record behind
the README's tables), :mod:`~ksvd_bench.race.compare.table` formats the terminal tables,
:mod:`~ksvd_bench.race.compare.cli` wires ``ksvd-bench compare``. What the studies share (the
raced entries, the verdict, the warm-up) is in :mod:`ksvd_bench.race.common`.
"""

from ksvd_bench.race.common import STRUCTURED_NAME, exact_operator, seeds_from
from ksvd_bench.race.compare.files import (
    ROW_FIELDS,
    RUN_FIELDS,
    load_record,
    readme_table,
    write_compare_files,
    write_record,
)
from ksvd_bench.race.compare.run import CompareResult, run_compare
from ksvd_bench.race.compare.settings import DEFAULT_METHODS, VARIANTS
from ksvd_bench.race.compare.table import format_compare

__all__ = [
    "CompareResult",
    "run_compare",
    "format_compare",
    "write_compare_files",
    "write_record",
    "load_record",
    "readme_table",
    "exact_operator",
    "seeds_from",
    "STRUCTURED_NAME",
    "ROW_FIELDS",
    "RUN_FIELDS",
    "DEFAULT_METHODS",
    "VARIANTS",
]
