"""The suite's cells on a Dask cluster: ``ksvd-bench suite --scheduler ADDRESS`` / ``--workers N``.

:func:`race_on_cluster` submits, per problem, one task that builds it and writes its reference
into the shared cache (:func:`~ksvd_bench.race.suite.cells.prepare_problem`), then one task per
cell that waits for it (:func:`~ksvd_bench.race.suite.cells.race_cell`), and yields the cells as
they finish (``distributed.as_completed``); the caller writes each to ``out`` at once. Dask
does the scheduling: a worker that dies mid-cell has its cells raced again elsewhere, and a
cell already yielded is on disk, so nothing finished is lost; if the client dies, a rerun with
the same ``out`` resumes. :func:`local_cluster` starts the ``--workers N`` cluster: N worker
processes on 127.0.0.1, one thread each.

One cell at a time per worker process: a cell sets its process's Numba and BLAS thread
counts, so two cells sharing a process would time each other. A cluster whose workers have
more than one thread is refused (start them with ``dask worker ADDRESS --nthreads 1``).
"""

from __future__ import annotations

import contextlib
import uuid

from ksvd_bench.race.suite.cells import forget_problems, prepare_problem, race_cell

__all__ = ["local_cluster", "check_cluster", "race_on_cluster"]


@contextlib.contextmanager
def local_cluster(n_workers):
    """A client of ``n_workers`` worker processes on 127.0.0.1, one thread each, no memory
    limit (a serial run has none either); closed on exit."""
    # distributed: an optional dependency (ksvd-bench[dask]), needed on a cluster only
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=n_workers,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address="127.0.0.1:0",  # loopback, any free port
            memory_limit=0,
        ) as cluster,
        Client(cluster) as client,
    ):
        yield client


def check_cluster(client, *, timeout=30.0):
    """The cluster's worker count, once at least one worker is up; a ValueError naming the
    fix when none comes within ``timeout`` seconds or a worker runs more than one thread."""
    # distributed: an optional dependency (ksvd-bench[dask]), needed on a cluster only
    from distributed.client import TimeoutError as DaskTimeout

    try:
        client.wait_for_workers(1, timeout=timeout)
    except (TimeoutError, DaskTimeout):
        raise ValueError(
            f"the Dask cluster at {client.scheduler.address!r} has no workers after "
            f"{timeout:g} s: start some with `dask worker ADDRESS --nthreads 1`"
        ) from None
    workers = client.scheduler_info(n_workers=-1)["workers"]
    threaded = sorted(a for a, w in workers.items() if w.get("nthreads", 1) != 1)
    if threaded:
        raise ValueError(
            f"the suite races one cell at a time per worker process, but {len(threaded)} "
            f"worker(s) of the cluster at {client.scheduler.address!r} run several threads "
            f"(e.g. {threaded[0]}): start them with `dask worker ADDRESS --nthreads 1`"
        )
    return len(workers)


def race_on_cluster(client, collection, quick, cells, *, cache_dir, **options):
    """Race ``cells`` (``[(problem, entry), ...]``) on the client's cluster; yield each cell
    (the dict of :func:`~ksvd_bench.race.suite.cells.race_cell`, called with ``cache_dir``
    and ``options``) as it finishes.

    A cell that raises (or kills its workers three times over) stops the run: the other
    tasks are cancelled and the exception is raised, noting the cell; the cells yielded
    before are the caller's to keep.
    """
    # distributed: an optional dependency (ksvd-bench[dask]), needed on a cluster only
    from distributed import as_completed

    run = uuid.uuid4().hex[:8]  # keys unique on a shared scheduler
    cache_dir = str(cache_dir)
    prepared, futures = {}, {}
    for problem, method in cells:
        if problem not in prepared:
            prepared[problem] = client.submit(
                prepare_problem,
                collection,
                quick,
                problem,
                cache_dir=cache_dir,
                key=f"suite-{run}-reference-{problem}",
            )
        future = client.submit(
            race_cell,
            collection,
            quick,
            problem,
            method,
            cache_dir=cache_dir,
            after=prepared[problem],
            key=f"suite-{run}-cell-{problem}-{method}",
            **options,
        )
        futures[future] = (problem, method)
    try:
        for future in as_completed(futures):
            try:
                cell = future.result()
            except Exception as exc:
                problem, method = futures[future]
                exc.add_note(
                    f"(suite cell {problem} x {method} on the Dask cluster; the cells that "
                    f"finished are kept: rerun with the same --out to resume)"
                )
                raise
            future.release()
            yield cell
    finally:
        client.cancel(list(futures) + list(prepared.values()))
        # a worker of a lasting cluster would keep the last problem it built (3 GB for PubMed)
        client.run(forget_problems, on_error="ignore")
