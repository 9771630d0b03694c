"""``ksvd-bench scale``: argument parsing and wiring of the scale study.

:func:`add_parser` adds the sub-command; :func:`run` calls :func:`ksvd_bench.race.scale.run_scale`,
prints its tables (:func:`~ksvd_bench.race.scale.format_scale`) and the files written. Flags
are checked by argparse (each message names its flag) and by :func:`check` before any work.
"""

from __future__ import annotations

import argparse
import contextlib
import math

from ksvd_bench._cliargs import add_run_arguments, check_out, positive_float, positive_int

__all__ = ["add_parser", "check", "run"]

_PART_CHOICES = ("a", "b", "both")


def _name_list(text):
    """Comma-separated names, e.g. ``rsvd,generalized_nystrom`` (checked by :func:`check`)."""
    names = tuple(p.strip() for p in text.split(","))
    if not names or any(p == "" for p in names):
        raise argparse.ArgumentTypeError(f"expected comma-separated method names, got {text!r}")
    return names


def _size(text):
    """One size: a positive integer, also written as ``1e5`` or ``100_000``."""
    try:
        value = float(text.strip().replace("_", ""))
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value.is_integer() and value >= 1):
        raise argparse.ArgumentTypeError(f"expected comma-separated positive integers (1e5 "
                                         f"allowed), got {text.strip()!r}")
    return int(value)


def _size_list(text):
    return tuple(_size(p) for p in text.split(","))


def add_parser(subparsers):
    """Add ``scale`` to an argparse ``subparsers``; it sets ``func`` and ``check``."""
    from ksvd_bench.race.scale import (
        DEFAULT_RANK,
        DEFAULT_SIZES,
        DEFAULT_TIME_LIMIT,
        QUICK_SIZES,
        QUICK_TIME_LIMIT,
        RUNNERS,
    )

    p = subparsers.add_parser(
        "scale", help="cost against size: seconds, passes, memory and accuracy per method",
        description=(
            "Solve (a) synthetic directed graphs (structured SNE operator) and (b) two "
            "clustered point sets (lazy SNE kernel, d = 64, a spectral gap at r) for their "
            "top-r triplets at a ladder of sizes, each method in a fresh process with a time "
            "limit; report seconds, passes, entries read, peak RSS and subspace error "
            "against the exact top-r (or a labelled block Krylov reference), fit growth "
            "exponents, and write scale.csv, scale.json, scale_exponents.csv and scale.png "
            "under --out. Rerun only some cells with --part/--sizes/--methods (and --merge "
            "to keep the other cells of an earlier run)."))
    p.add_argument("--part", default="both", choices=_PART_CHOICES,
                   help="which study: a (graphs), b (point sets) or both (default: both)")
    p.add_argument("--sizes", type=_size_list, default=None,
                   help="comma-separated sizes N (= M), e.g. 20000,100000 or 1e5; needs "
                        f"--part a or b (default: a {_fmt(DEFAULT_SIZES['a'])}; "
                        f"b {_fmt(DEFAULT_SIZES['b'])}; with --quick a "
                        f"{_fmt(QUICK_SIZES['a'])}, b {_fmt(QUICK_SIZES['b'])})")
    p.add_argument("--methods", type=_name_list, default=None,
                   help=f"comma-separated methods among {', '.join(RUNNERS)} (default: "
                        "all five for a; all but tsvd for b)")
    p.add_argument("--rank", type=positive_int, default=DEFAULT_RANK,
                   help="number of singular triplets r; part b draws r clusters "
                        "(default: %(default)s)")
    p.add_argument("--time-limit", type=positive_float, default=None,
                   help=f"wall-clock seconds per cell, process start and warm-up included; "
                        f"a method over it is skipped at larger sizes (default: "
                        f"{DEFAULT_TIME_LIMIT:g}, --quick {QUICK_TIME_LIMIT:g})")
    p.add_argument("--memory-limit", type=positive_float, default=None, metavar="GIB",
                   help="resident GiB per cell; a cell over it is stopped and its method "
                        "skipped at larger sizes (default: half of this machine's memory)")
    p.add_argument("--quick", action="store_true",
                   help="CI sizes (a minute or two in all) and a smaller dense-reference cap")
    p.add_argument("--dtype", default="float64", choices=("float64", "float32"),
                   help="storage dtype of the kernel sources (default: %(default)s)")
    p.add_argument("--reference", default="auto", choices=("auto", "none"),
                   help="auto: exact top-r (structured or dense LAPACK) where possible, else "
                        "a labelled block Krylov answer; none: no subspace errors "
                        "(default: %(default)s)")
    p.add_argument("--dense-reference-max", type=positive_int, default=None,
                   help="largest N*M whose reference is a dense LAPACK SVD (default: 25e6, "
                        "--quick 4e6)")
    p.add_argument("--merge", action="store_true",
                   help="keep the cells of an earlier scale.json in --out that this run does "
                        "not redo, and fit the exponents on all of them")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="run every cell on the Dask cluster of this scheduler (e.g. "
                        "tcp://host:8786, see `dask scheduler`); part b then also runs "
                        "svd_compressed. Without it, a LocalCluster sized to this machine is "
                        "started (and closed at the end) only when --methods asks for "
                        "svd_compressed")
    p.add_argument("--in-process", action="store_true",
                   help="run the cells in this process (no peak RSS, no time limit; for "
                        "debugging)")
    add_run_arguments(p, out_default="results/scale",
                      threads_help="Numba and BLAS threads of every cell, at most "
                                   "NUMBA_NUM_THREADS (default: all of them)")
    p.set_defaults(func=run, check=check, parser=p, threads=None)
    return p


def _fmt(sizes):
    return ",".join(str(n) for n in sizes)


def _resolve(args):
    """part list, sizes and methods per part from the flags (validated by :func:`check`)."""
    from ksvd_bench.race.scale import DASK_METHODS, DEFAULT_METHODS, PARTS, QUICK_SIZES, RUNNERS

    parts = PARTS if args.part == "both" else (args.part,)
    sizes = {}
    for part in parts:
        if args.sizes is not None:
            sizes[part] = args.sizes
        elif args.quick:
            sizes[part] = QUICK_SIZES[part]
    methods = {part: args.methods or DEFAULT_METHODS[part] for part in parts}
    if args.methods is None and args.scheduler is not None:  # on a cluster: Dask's own too
        methods = {part: names + tuple(m for m in DASK_METHODS if part in RUNNERS[m].parts)
                   for part, names in methods.items()}
    return parts, sizes, methods


def check(args, parser):
    """Cross-flag checks, before any work: they stop with a usage error naming the flag."""
    from ksvd_bench.race.scale import DEFAULT_SIZES, RUNNERS

    if args.sizes is not None and args.part == "both":
        parser.error("argument --sizes: needs --part a or --part b (the two studies have "
                     "different size ranges)")
    parts, sizes, methods = _resolve(args)
    if args.methods is not None:
        unknown = [m for m in args.methods if m not in RUNNERS]
        if unknown:
            parser.error(f"argument --methods: unknown {', '.join(unknown)}; choose among "
                         f"{', '.join(RUNNERS)}")
        for part in parts:
            wrong = [m for m in args.methods if part not in RUNNERS[m].parts]
            if wrong:
                parser.error(f"argument --methods: {', '.join(wrong)} do not apply to part "
                             f"{part}")
    for part in parts:
        small = [n for n in sizes.get(part, DEFAULT_SIZES[part]) if n < 4 * args.rank]
        if small:
            parser.error(f"argument --sizes: every size must be >= 4 * --rank = "
                         f"{4 * args.rank}, got {_fmt(small)}")
    if args.scheduler is not None:
        _check_scheduler(args.scheduler, parser)
    check_out(args, parser)


def _check_scheduler(address, parser):
    """Connect once to ``--scheduler`` before any work: unreachable is a usage error."""
    from ksvd_bench.kernels.distributed import connect

    try:
        connect(address).close()
    except (ConnectionError, TypeError) as exc:
        parser.error(f"argument --scheduler: {exc}")


@contextlib.contextmanager
def _cluster(args, methods):
    """``(client, scheduler)`` for :func:`run_scale`: the --scheduler address, a LocalCluster
    started here when a Dask method is asked for without one (closed at the end), or none."""
    from ksvd_bench.race.scale import DASK_METHODS

    if args.scheduler is not None:
        yield None, args.scheduler
        return
    if not any(m in DASK_METHODS for names in methods.values() for m in names):
        yield None, None
        return
    from distributed import Client, LocalCluster

    with LocalCluster(processes=True, dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        yield client, None


def run(args):
    """Run the study, print its tables and the files written; exit status 0."""
    from ksvd_bench.race.scale import (
        DEFAULT_TIME_LIMIT,
        DENSE_REFERENCE_MAX_ENTRIES,
        QUICK_DENSE_REFERENCE_MAX_ENTRIES,
        QUICK_TIME_LIMIT,
        format_scale,
        run_scale,
    )

    parts, sizes, methods = _resolve(args)
    time_limit = args.time_limit or (QUICK_TIME_LIMIT if args.quick else DEFAULT_TIME_LIMIT)
    dense_max = args.dense_reference_max or (
        QUICK_DENSE_REFERENCE_MAX_ENTRIES if args.quick else DENSE_REFERENCE_MAX_ENTRIES)
    with _cluster(args, methods) as (client, scheduler):
        result = run_scale(
            parts, sizes=sizes, methods=methods, rank=args.rank, random_state=args.seed,
            threads=args.threads, time_limit=time_limit, dtype=args.dtype,
            memory_limit=None if args.memory_limit is None else args.memory_limit * 2**30,
            reference=args.reference, dense_reference_max_entries=dense_max,
            isolate=not args.in_process, client=client, scheduler=scheduler, out=args.out,
            merge=args.merge, progress=not args.no_progress)
    print(format_scale(result))
    for kind, path in result.paths.items():
        print(f"wrote {kind}: {path}")
    return 0
