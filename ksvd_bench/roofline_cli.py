"""``ksvd-bench roofline``: argument parsing and wiring of :mod:`ksvd_bench.roofline`."""

from __future__ import annotations

from pathlib import Path

from ksvd_bench.cliargs import (
    check_out,
    int_list,
    nonnegative_float,
    out_dir,
    positive_int,
    print_result,
)
from ksvd_bench.kernels.params import KERNELS
from ksvd_bench.report import write_json
from ksvd_bench.roofline import SETTLE_S, format_roofline, roofline
from ksvd_bench.threads import max_threads

__all__ = ["add_parser", "check", "run"]


def add_parser(subparsers):
    """Add ``roofline`` to an argparse ``subparsers``; it sets ``func`` and ``check``."""
    p = subparsers.add_parser(
        "roofline",
        help="the fused passes timed against this machine's BLAS",
        description=(
            "Time matmat, rmatmat and sketch of a lazy point source against numpy's BLAS "
            "doing the pass's products (X Z^T, then times Omega and/or Psi; exp left out) at "
            "the same shape, dtype and thread count, in interleaved rounds of one run; print "
            "the BLAS rates, ns per kernel entry, the pass/BLAS ratios and the machine's "
            "record, and write roofline.json under --out."
        ),
    )
    p.add_argument("--n", type=positive_int, default=4000, help="N = M (default: %(default)s)")
    p.add_argument("--dim", type=positive_int, default=64, help="d (default: %(default)s)")
    p.add_argument(
        "--cols",
        type=positive_int,
        default=40,
        help="columns of Omega and of Psi (default: %(default)s)",
    )
    p.add_argument(
        "--kernel",
        choices=KERNELS,
        default="rbf",
        help="the source's kernel (default: %(default)s)",
    )
    p.add_argument(
        "--dtypes",
        default="float32,float64",
        type=lambda s: tuple(x.strip() for x in s.split(",")),
        help="comma-separated among float32, float64 (default: both)",
    )
    p.add_argument(
        "--threads",
        type=int_list,
        default=None,
        help="comma-separated thread counts (default: 1 and NUMBA_NUM_THREADS)",
    )
    p.add_argument(
        "--repeats",
        type=positive_int,
        default=5,
        help="interleaved rounds; medians are reported (default: %(default)s)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the points (default: 0)")
    p.add_argument(
        "--settle",
        type=nonnegative_float,
        default=SETTLE_S,
        help="idle seconds before each timed call, so that one call's idle BLAS "
        "and Numba threads do not slow the next (default: %(default)s)",
    )
    p.add_argument(
        "--out",
        type=out_dir,
        default="results/roofline",
        help="directory for roofline.json (default: %(default)s)",
    )
    p.set_defaults(func=run, check=check, parser=p)
    return p


def check(args, parser):
    """Cross-flag checks, before any work."""
    bad = [t for t in args.dtypes if t not in ("float32", "float64")]
    if bad or not args.dtypes:
        parser.error(f"argument --dtypes: expected float32 and/or float64, got {bad}")
    if args.threads and max(args.threads) > max_threads():
        parser.error(f"argument --threads: at most {max_threads()} (NUMBA_NUM_THREADS)")
    check_out(args, parser)


def run(args):
    """Measure, print the table and write ``roofline.json``."""

    result = roofline(
        args.n,
        d=args.dim,
        k=args.cols,
        dtypes=args.dtypes,
        threads=args.threads,
        kernel=args.kernel,
        repeats=args.repeats,
        seed=args.seed,
        settle=args.settle,
    )
    result["command"] = getattr(args, "command_line", None)
    path = Path(args.out) / "roofline.json"
    write_json(path, result)
    return print_result(format_roofline(result), {"roofline": str(path)})
