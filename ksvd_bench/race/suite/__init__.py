"""``ksvd-bench suite``: race a fixed, versioned problem collection; performance and data profiles.

:func:`run_suite` races every problem of a :class:`~ksvd_bench.race.suite.collection.Collection`
through ``compare``'s engine (:func:`ksvd_bench.race.compare.run_compare`, one problem and
entry at a time), then records, per (problem, solver,
measure, tolerance), the time to solve, the passes over G and entries of G read at the solve,
and the verdict; the report package draws the Dolan-More performance profiles [1]_ and the
Moré-Wild data profiles [2]_ from them (:mod:`ksvd_bench.report.profiles`).

What ``suite.json`` holds
-------------------------
``collection``
    ``{"name", "version", "quick", "description", "problems": [...], "skipped_in_quick"}``;
    each problem ``{"name", "description", "shape", "kernel", "gamma", "lazy", "source",
    "points", "structured", "kernel_seconds", "reference": {"method", ...,
    "note"/"estimated_error" for a lazy one}, "methods_skipped"}``.
``records``
    One dict per (problem, solver, measure, eps), the input of
    :func:`ksvd_bench.report.profiles.profile_tables` (fields
    :data:`~ksvd_bench.report.profiles.SUITE_RECORD_FIELDS` and more)::

        {"problem": str, "solver": str,          # a compare entry: "rsvd",
                                                 # "rsvd [stop=residual]", "tsvd (structured)"
         "measure": str, "eps": float,           # "eta[uniform]", "lowrank"
         "seconds": float,                       # time to solve t_{p,s}; inf when unsolved
                                                 # (written null in the JSON)
         "passes": float or null,                # passes over G of the solve
         "entries_read": float or null,          # passes * N * M (the solvers' accounting)
         "status": str,                          # "converged", "not converged",
                                                 # "unreliable", "stopped early, wrong"
         "reason": str or null,                  # why not, in words (sv error for a wrong
                                                 # early stop, the n/a or skip reason)
         "shape": [N, M], "n_seeds": int, "stop": str,
         "collection": str, "collection_version": int}

    ``seconds`` is the median over seeds of the solve at the found effort, JIT and the
    reference not charged, and it is finite only when every seed's answer met the race's
    whole-triplet rule (measure, singular values and triplet residual within eps, not
    unreliable): Dolan & Moré's ``t_{p,s}``, so ``r_{p,s} = t_{p,s} / min_s t_{p,s}`` and an
    unsolved problem has ``r = inf``, never within any ``tau``. ``passes`` and ``entries_read``
    are the budget of the same solve (Moré & Wild's data-profile cost); of an unsolved record
    they are the budget spent at the last effort tried (the profiles ignore them). An entry
    that does not apply (``rpcholesky`` without point sets) or that the collection does not
    race on a problem is a record with ``status`` "not converged" and the reason.
``failures``
    The records not solved: ``{"problem", "solver", "measure", "eps", "status", "reason"}``.
``rows``
    Every ``compare`` row of every problem (:data:`ksvd_bench.race.compare.ROW_FIELDS`) with
    ``collection`` and ``collection_version`` added.
``meta``
    ``command_line``, ``settings`` (rank, eps, measures, seeds, methods, budgets), ``threads``,
    ``machine``, ``load_average`` (before and after), ``wall_seconds`` (and per problem, the
    sum of its cells'), ``compare`` (per problem: the effort caps, per-run seeds, and the
    Numba and BLAS thread counts in force inside each cell), ``cells`` (``where``: in process
    or the Dask scheduler; ``n_cells``; ``resumed``, the cells read back from an earlier run;
    ``ran``, per cell its seconds, worker host and process, and when it finished),
    ``finished_at``.

The work is cut into cells, one per problem and raced entry
(:mod:`~ksvd_bench.race.suite.cells`), raced in this process or on a Dask cluster
(:mod:`~ksvd_bench.race.suite.cluster`), each kept in ``<out>/cells/`` as it finishes so
that a rerun resumes. Each problem's ``compare`` record (rows and per-seed runs, the
collection in its meta) is kept in ``<out>/problems/<name>/compare.json``; the one page is
``<out>/report.html``.

References
----------
.. [1] E. D. Dolan and J. J. Moré, "Benchmarking optimization software with performance
   profiles", Math. Program. 91 (2002), pp. 201-213.
.. [2] J. J. Moré and S. M. Wild, "Benchmarking derivative-free optimization algorithms",
   SIAM J. Optim. 20 (2009), pp. 172-191.
"""

from ksvd_bench.race.suite.collection import (
    COLLECTIONS,
    DEFAULT_COLLECTION,
    Collection,
    ProblemSpec,
    get_collection,
)
from ksvd_bench.race.suite.run import (
    SUITE_FILE,
    SuiteResult,
    failures_table,
    records_from_rows,
    run_suite,
    write_record,
)

__all__ = [
    "COLLECTIONS",
    "DEFAULT_COLLECTION",
    "Collection",
    "ProblemSpec",
    "get_collection",
    "SUITE_FILE",
    "SuiteResult",
    "failures_table",
    "records_from_rows",
    "run_suite",
    "write_record",
]
