"""``ksvd-bench scale``: argument parsing and wiring of the scale study.

:func:`add_parser` adds the sub-command; :func:`run` calls :func:`ksvd_bench.race.scale.run_scale`,
prints its tables (:func:`~ksvd_bench.race.scale.format_scale`) and the files written. Flags
are checked by argparse (each message names its flag) and by :func:`check` before any work.
"""

from __future__ import annotations

import argparse
import contextlib
import math

from ksvd_bench.cliargs import (
    add_run_arguments,
    check_out,
    check_scheduler,
    positive_float,
    positive_int,
    print_result,
)
from ksvd_bench.kernels.backends import backend_class
from ksvd_bench.race.scale import (
    DASK_METHODS,
    DEFAULT_METHODS,
    DEFAULT_PARTS,
    DEFAULT_RANK,
    DEFAULT_SIZES,
    DEFAULT_TIME_LIMIT,
    DENSE_REFERENCE_MAX_ENTRIES,
    DEVICES,
    PARTS,
    QUICK_DENSE_REFERENCE_MAX_ENTRIES,
    QUICK_SIZES,
    QUICK_TIME_LIMIT,
    RUNNERS,
    format_scale,
    run_scale,
)
from ksvd_bench.race.scale.files import load_merge_base

__all__ = ["add_parser", "check", "run"]

_PART_CHOICES = ("a", "b", "c", "both", "all")


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
        raise argparse.ArgumentTypeError(
            f"expected comma-separated positive integers (1e5 allowed), got {text.strip()!r}"
        )
    return int(value)


def _size_list(text):
    return tuple(_size(p) for p in text.split(","))


def add_parser(subparsers):
    """Add ``scale`` to an argparse ``subparsers``; it sets ``func`` and ``check``."""
    p = subparsers.add_parser(
        "scale",
        help="cost against size: seconds, passes, memory and accuracy per method",
        description=(
            "Solve (a) synthetic directed graphs (structured SNE operator), (b) two "
            "clustered point sets (lazy SNE kernel, d = 64, a spectral gap at r) and (c) the "
            "rare-cluster family (as b, 30% of the r clusters rare: where uniform sampling "
            "misses structure; with the asym Nystrom sampling entries ARP, RPCholesky and "
            "ACA) for their top-r triplets at a ladder of sizes, each method in a fresh "
            "process with a time limit; report seconds, passes, entries read, peak RSS, "
            "subspace and singular-value errors against the exact top-r (or a labelled "
            "block Krylov reference) and the warnings of each solve, fit growth exponents "
            "where the cells support them (>= 3 sizes of >= 0.5 s spanning x4 in N), and write "
            "scale.csv, scale.json, scale_exponents.csv and scale.png "
            "under --out. Rerun only some cells with --part/--sizes/--methods (and --merge "
            "to keep the other cells of an earlier run)."
        ),
    )
    p.add_argument(
        "--part",
        default="both",
        choices=_PART_CHOICES,
        help="which study: a (graphs), b (point sets), c (rare clusters), both "
        "(a and b) or all (default: both)",
    )
    p.add_argument(
        "--sizes",
        type=_size_list,
        default=None,
        help="comma-separated sizes N (= M), e.g. 20000,100000 or 1e5; needs "
        f"--part a, b or c (default: a {_fmt(DEFAULT_SIZES['a'])}; "
        f"b {_fmt(DEFAULT_SIZES['b'])}; c {_fmt(DEFAULT_SIZES['c'])}; with "
        f"--quick a {_fmt(QUICK_SIZES['a'])}, b {_fmt(QUICK_SIZES['b'])}, "
        f"c {_fmt(QUICK_SIZES['c'])})",
    )
    p.add_argument(
        "--methods",
        type=_name_list,
        default=None,
        help=f"comma-separated methods among {', '.join(RUNNERS)} (default: "
        "tsvd, rsvd, block_krylov, generalized_nystrom and asym_nystrom for "
        "a; all but tsvd for b; for c those of b plus asym_nystrom_arp, "
        "_rpcholesky and _aca; asym_nystrom_rpcholesky applies to b and c)",
    )
    p.add_argument(
        "--rank",
        type=positive_int,
        default=DEFAULT_RANK,
        help="number of singular triplets r; parts b and c draw r clusters (default: %(default)s)",
    )
    p.add_argument(
        "--time-limit",
        type=positive_float,
        default=None,
        help=f"wall-clock seconds per cell, process start and warm-up included; "
        f"a method over it is skipped at larger sizes (default: "
        f"{DEFAULT_TIME_LIMIT:g}, --quick {QUICK_TIME_LIMIT:g})",
    )
    p.add_argument(
        "--memory-limit",
        type=positive_float,
        default=None,
        metavar="GIB",
        help="resident GiB per cell; a cell over it is stopped and its method "
        "skipped at larger sizes (default: half of this machine's memory)",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="CI sizes and a smaller dense-reference cap: parts a and b, 27 cells "
        "and 6 references, each in a fresh process; about 2 min of CPU in all "
        "(measured: 132 s), so 2 to 3 min on a quiet 2-core machine and longer "
        "on a loaded one (7.5 min at a load of 7 to 28)",
    )
    p.add_argument(
        "--dtype",
        default="float64",
        choices=("float64", "float32"),
        help="storage dtype of the kernel sources (default: %(default)s)",
    )
    p.add_argument(
        "--reference",
        default="auto",
        choices=("auto", "none"),
        help="auto: exact top-r (structured or dense LAPACK) where possible, else "
        "a labelled block Krylov answer; none: no subspace errors "
        "(default: %(default)s)",
    )
    p.add_argument(
        "--dense-reference-max",
        type=positive_int,
        default=None,
        help="largest N*M whose reference is a dense LAPACK SVD (default: 25e6, --quick 4e6)",
    )
    p.add_argument(
        "--merge",
        action="store_true",
        help="keep the cells of an earlier scale.json in --out that this run does "
        "not redo, and fit the exponents on all of them; the file is checked "
        "before any work (an unreadable one, or one made with another --rank, "
        "--seed, --dtype or --device, is refused)",
    )
    p.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="run every cell on the Dask cluster of this scheduler (e.g. "
        "tcp://host:8786, see `dask scheduler`); part b then also runs "
        "svd_compressed. Without it, a LocalCluster sized to this machine is "
        "started (and closed at the end) only when --methods asks for "
        "svd_compressed",
    )
    p.add_argument(
        "--device",
        default="cpu",
        choices=DEVICES,
        help="where the lazy kernel of parts b and c runs: cpu, or cuda (one GPU, "
        "KernelSource.from_points(..., device='cuda'); needs the [cuda] extra "
        "and a GPU). Part a's structured operator stays on the CPU "
        "(default: %(default)s)",
    )
    p.add_argument(
        "--in-process",
        action="store_true",
        help="run the cells in this process (no peak RSS, no time limit; for debugging)",
    )
    p.add_argument(
        "--wide",
        action="store_true",
        help="show every column (set-up and solve seconds, CPU seconds, set-up "
        "passes, entries read); the default fits 100 characters",
    )
    add_run_arguments(p, out_default="results/scale")
    p.set_defaults(func=run, check=check, parser=p)
    return p


def _fmt(sizes):
    return ",".join(str(n) for n in sizes)


def _resolve(args):
    """part list, sizes and methods per part from the flags (validated by :func:`check`)."""
    parts = {"both": DEFAULT_PARTS, "all": PARTS}.get(args.part, (args.part,))
    sizes = {}
    for part in parts:
        if args.sizes is not None:
            sizes[part] = args.sizes
        elif args.quick:
            sizes[part] = QUICK_SIZES[part]
    methods = {part: args.methods or DEFAULT_METHODS[part] for part in parts}
    if args.methods is None and args.scheduler is not None:  # on a cluster: Dask's own too
        methods = {
            part: names + tuple(m for m in DASK_METHODS if part in RUNNERS[m].parts)
            for part, names in methods.items()
        }
    return parts, sizes, methods


def check(args, parser):
    """Cross-flag checks, before any work: they stop with a usage error naming the flag."""
    if args.sizes is not None and args.part in ("both", "all"):
        parser.error(
            "argument --sizes: needs --part a, b or c (the studies have different size ranges)"
        )
    parts, sizes, methods = _resolve(args)
    if args.methods is not None:
        unknown = [m for m in args.methods if m not in RUNNERS]
        if unknown:
            parser.error(
                f"argument --methods: unknown {', '.join(unknown)}; choose among "
                f"{', '.join(RUNNERS)}"
            )
        for part in parts:
            wrong = [m for m in args.methods if part not in RUNNERS[m].parts]
            if wrong:
                parser.error(f"argument --methods: {', '.join(wrong)} do not apply to part {part}")
    for part in parts:
        small = [n for n in sizes.get(part, DEFAULT_SIZES[part]) if n < 4 * args.rank]
        if small:
            parser.error(
                f"argument --sizes: every size must be >= 4 * --rank = "
                f"{4 * args.rank}, got {_fmt(small)}"
            )
    if args.device != "cpu":
        _check_device(args, parser)
    if args.scheduler is not None:
        check_scheduler(args.scheduler, parser)
    check_out(args, parser)
    if args.merge:
        _check_merge(args, parser)


def _check_device(args, parser):
    """--device cuda applies to parts b and c, and needs Numba's CUDA target and a GPU: known
    now."""
    if args.part == "a":
        parser.error(
            "argument --device: applies to parts b and c (part a's structured "
            "operator runs on the CPU)"
        )
    if args.scheduler is not None or any(m in DASK_METHODS for m in args.methods or ()):
        parser.error(
            f"argument --device: {args.device} runs in this process, not on a Dask "
            f"cluster: drop --scheduler and {', '.join(DASK_METHODS)}"
        )

    try:
        backend_class(args.device)
    except (ImportError, RuntimeError) as exc:  # the backend's own message says which
        parser.error(f"argument --device: {exc}")


def _check_merge(args, parser):
    """Read the scale.json that --merge extends now, before any cell is computed."""
    try:
        load_merge_base(
            args.out,
            {"rank": args.rank, "seed": args.seed, "dtype": args.dtype, "device": args.device},
        )
    except ValueError as exc:
        parser.error(f"argument --merge: {exc}")


@contextlib.contextmanager
def _cluster(args, methods):
    """``(client, scheduler)`` for :func:`run_scale`: the --scheduler address, a LocalCluster
    started here when a Dask method is asked for without one (closed at the end), or none."""
    if args.scheduler is not None:
        yield None, args.scheduler
        return
    if not any(m in DASK_METHODS for names in methods.values() for m in names):
        yield None, None
        return
    # distributed: an optional dependency (ksvd-bench[dask]), needed on a cluster only
    from distributed import Client, LocalCluster

    with LocalCluster(processes=True, dashboard_address=":0") as cluster, Client(cluster) as client:
        yield client, None


def run(args):
    """Run the study, print its tables and the files written; exit status 0."""
    parts, sizes, methods = _resolve(args)
    time_limit = args.time_limit or (QUICK_TIME_LIMIT if args.quick else DEFAULT_TIME_LIMIT)
    dense_max = args.dense_reference_max or (
        QUICK_DENSE_REFERENCE_MAX_ENTRIES if args.quick else DENSE_REFERENCE_MAX_ENTRIES
    )
    with _cluster(args, methods) as (client, scheduler):
        result = run_scale(
            parts,
            sizes=sizes,
            methods=methods,
            rank=args.rank,
            random_state=args.seed,
            threads=args.threads,
            time_limit=time_limit,
            dtype=args.dtype,
            device=args.device,
            memory_limit=None if args.memory_limit is None else args.memory_limit * 2**30,
            reference=args.reference,
            dense_reference_max_entries=dense_max,
            isolate=not args.in_process,
            client=client,
            scheduler=scheduler,
            out=args.out,
            merge=args.merge,
            progress=not args.no_progress,
        )
    return print_result(format_scale(result, wide=args.wide), result.paths)
