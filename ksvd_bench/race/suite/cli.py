"""``ksvd-bench suite``: argument parsing and wiring (the work is :func:`run_suite`)."""

from __future__ import annotations

import contextlib
from collections import Counter
from pathlib import Path

from ksvd_bench.cliargs import (
    THREADS_HELP,
    check_out,
    check_scheduler,
    out_dir,
    positive_int,
    print_result,
    thread_count,
)
from ksvd_bench.race.suite.cluster import local_cluster
from ksvd_bench.race.suite.collection import COLLECTIONS, DEFAULT_COLLECTION, get_collection
from ksvd_bench.race.suite.run import run_suite, write_record
from ksvd_bench.report import check_out_dir, headline
from ksvd_bench.threads import DEFAULT_THREADS

__all__ = ["add_parser", "format_suite"]


def add_parser(sub):
    """Add ``suite``: race a fixed, versioned problem collection; profiles and failures."""
    p = sub.add_parser(
        "suite",
        help="race a fixed problem collection: performance and data profiles",
        description="Race every solver on every problem of a fixed, versioned collection "
        "(compare's race, one cell per problem and solver: in this process, or in "
        "parallel on a Dask cluster), then record per problem, "
        "solver, measure and tolerance the time to solve, the passes over G and "
        "entries read, and why a solver failed; draw Dolan-More performance "
        "profiles and data profiles. The collection's name and version are in "
        "every result. Each finished cell is kept under --out, and a rerun with the same "
        "--out races only the cells not yet finished.",
    )
    p.add_argument(
        "--collection",
        default=DEFAULT_COLLECTION,
        choices=tuple(COLLECTIONS),
        help="the collection (default: %(default)s)",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="one seed, shorter sweeps, smaller shaped problems, PubMed left out "
        "(about 10 minutes on 2 cores)",
    )
    p.add_argument(
        "--problems",
        nargs="+",
        default=None,
        metavar="NAME",
        help="race only these problems of the collection",
    )
    p.add_argument(
        "--list", action="store_true", help="print the collection's problems and settings, and exit"
    )
    p.add_argument("--threads", type=thread_count, default=DEFAULT_THREADS, help=THREADS_HELP)
    p.add_argument(
        "--out",
        type=out_dir,
        default="results/suite",
        help="output directory, checked before any work (default: %(default)s)",
    )
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="race the cells (one per problem and solver) on the Dask cluster of this "
        "scheduler (e.g. tcp://host:8786, see `dask scheduler`; workers started with "
        "--nthreads 1, the same ksvd-bench, --out on a path they share)",
    )
    where.add_argument(
        "--workers",
        type=positive_int,
        default=None,
        metavar="N",
        help="race the cells on a Dask cluster of N worker processes started on this "
        "machine (127.0.0.1, one thread each)",
    )
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.add_argument(
        "--record",
        default=None,
        metavar="FILE",
        help="also keep the run (collection, records, failures, machine, load, "
        "command line; rows without their sweeps) in FILE (the repository "
        "keeps benchmarks/recorded/suite/suite.json)",
    )
    p.set_defaults(func=run_suite_command, check=check_suite, parser=p)
    return p


def check_suite(args, parser):
    """``--problems`` names problems of the collection; ``--out`` is writable."""
    known = [s.name for s in get_collection(args.collection).problems]
    for name in args.problems or ():
        if name not in known:
            parser.error(
                f"argument --problems: {name!r} is not a problem of collection "
                f"{args.collection!r} ({', '.join(known)})"
            )
    if not args.list:
        check_out(args, parser)
        if args.scheduler is not None:
            check_scheduler(args.scheduler, parser)
    if args.record is not None:
        try:
            check_out_dir(Path(args.record).parent or ".", "--record")
        except ValueError as exc:
            parser.error(str(exc))


def _listing(collection, quick):
    lines = [
        f"collection {collection.name!r} version {collection.version}"
        f"{' (quick)' if quick else ''}: {collection.description}"
    ]
    for spec in collection.problems_for(quick):
        lines.append(f"  {spec.name:<16} {spec.description}")
    settings = collection.quick_settings if quick else collection.settings
    lines.append(
        "  settings: " + ", ".join(f"{k}={v}" for k, v in settings.items() if k != "methods")
    )
    lines.append("  methods: " + ", ".join(settings["methods"]))
    return "\n".join(lines)


def format_suite(result):
    """A short terminal summary: solved per solver, then the failures by reason."""
    solved, total = Counter(), Counter()
    for r in result.records:
        total[r["solver"]] += 1
        solved[r["solver"]] += r["status"] == "converged"
    c = result.collection
    lines = [
        f"suite {c['name']} v{c['version']}{' (quick)' if c['quick'] else ''}: "
        f"{len(c['problems'])} problems, {len(result.records)} records, "
        f"{result.meta['wall_seconds']:.0f} s; load before/after "
        f"{result.meta['load_average']}",
        f"cells: {result.meta['cells']['n_cells']} "
        f"({len(result.meta['cells']['resumed'])} finished before, kept), "
        f"{result.meta['cells']['where']}",
        "solved (problem x measure x eps) per solver:",
    ]
    for solver in sorted(total, key=lambda s: (-solved[s], s)):
        lines.append(f"  {solver:<40} {solved[solver]:>3}/{total[solver]}")
    by_status = Counter(f["status"] for f in result.failures)
    lines.append("failures: " + (", ".join(f"{n} {s}" for s, n in by_status.items()) or "none"))
    return "\n".join(lines)


@contextlib.contextmanager
def _client(args):
    """The Dask client of ``--scheduler`` or ``--workers`` (closed at the end), or None."""
    if args.scheduler is not None:
        # dask: an optional dependency (ksvd-bench[dask]), needed with --scheduler only
        from ksvd_bench.kernels.distributed import connect

        with connect(args.scheduler) as client:
            yield client
    elif args.workers is not None:
        with local_cluster(args.workers) as client:
            yield client
    else:
        yield None


def run_suite_command(args):
    """Run ``suite`` with parsed arguments; print the summary and the files written."""
    if args.list:
        print(_listing(get_collection(args.collection), args.quick))
        return 0
    with _client(args) as client:
        result = run_suite(
            args.collection,
            out=args.out,
            quick=args.quick,
            problems=args.problems,
            threads=args.threads,
            progress=not args.no_progress,
            command_line=getattr(args, "command_line", None),
            client=client,
        )
    if args.record is not None:
        result.paths["record"] = str(write_record(result, args.record))
    report = result.paths.pop("report", None)
    print_result(format_suite(result), result.paths)
    print("\n".join(headline(result.rows, max_lines=30, report_path=report)))
    return 0
