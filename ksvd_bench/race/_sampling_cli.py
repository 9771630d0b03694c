"""``ksvd-bench sampling``: argument parsing and wiring of the sampling study (issue 15).

:func:`add_parser` adds the sub-command; :func:`run` calls
:func:`ksvd_bench.race.sampling.sampling_study`, prints its summary table
(:func:`~ksvd_bench.race.sampling.format_sampling`) and the files written
(``sampling.json``, ``sampling.csv``, ``sampling_summary.csv``, ``sampling.png``).
"""

from __future__ import annotations

import argparse

from ksvd_bench._cliargs import (
    add_run_arguments,
    check_out,
    positive_float,
    positive_int,
    print_result,
)

__all__ = ["add_parser", "check", "run"]


def _names(allowed, what):
    def parse(text):
        names = tuple(p.strip() for p in text.split(","))
        bad = [p for p in names if p not in allowed]
        if not names or bad:
            raise argparse.ArgumentTypeError(
                f"expected comma-separated {what} among {', '.join(allowed)}, got {text!r}")
        return names

    return parse


def add_parser(subparsers):
    """Add ``sampling`` to an argparse ``subparsers``; it sets ``func`` and ``check``."""
    from ksvd_bench.race.sampling import BASELINES, FAMILIES, PLAIN_RPCHOLESKY, SAMPLINGS

    samplings = SAMPLINGS + (PLAIN_RPCHOLESKY,)

    p = subparsers.add_parser(
        "sampling", help="asym Nystrom samplers raced by entries read and by passes",
        description=(
            "Race the samplers of asym_nystrom (uniform, norm, arp, aca, rpcholesky, and "
            "the textbook rpcholesky-plain) at a "
            "ladder of sample sizes beside rsvd, block_krylov and generalized_nystrom, on two "
            "point sets with an SNE kernel: rare clusters (20 clusters, 6 of weight 0.02) and "
            "plain ones; report subspace error against entries read and against passes, and "
            "the clusters each sampler found. Writes sampling.json, sampling.csv, "
            "sampling_summary.csv and sampling.png under --out."))
    p.add_argument("--n", type=positive_int, default=6000,
                   help="N = M (default: %(default)s)")
    p.add_argument("--rank", type=positive_int, default=20,
                   help="r, also the number of clusters (default: %(default)s)")
    p.add_argument("--families", type=_names(FAMILIES, "families"), default=FAMILIES,
                   help=f"comma-separated among {', '.join(FAMILIES)} (default: both)")
    p.add_argument("--samplings", type=_names(samplings, "samplings"), default=samplings,
                   help=f"comma-separated among {', '.join(samplings)} (default: all; "
                        f"{PLAIN_RPCHOLESKY} is the textbook RPCholesky, for comparison)")
    p.add_argument("--baselines", type=_names(BASELINES + ("none",), "methods"),
                   default=BASELINES,
                   help="comma-separated multiplying methods, or none (default: all three)")
    p.add_argument("--time-limit", type=positive_float, default=60.0,
                   help="a sampler's ladder stops after a run slower than this many seconds "
                        "(default: %(default)s)")
    p.add_argument("--quick", action="store_true",
                   help="N = M = 1200, r = 10, a short ladder (a CI-sized run)")
    add_run_arguments(p, out_default="results/sampling")
    p.set_defaults(func=run, check=check, parser=p)
    return p


def check(args, parser):
    """Cross-flag checks, before any work."""
    if args.rank > args.n // 4:
        parser.error(f"argument --rank: must be <= --n / 4 = {args.n // 4}, got {args.rank}")
    check_out(args, parser)


def run(args):
    """Run the study, print its summary and the files written."""
    from ksvd_bench._threads import solver_threads
    from ksvd_bench.race.sampling import format_sampling, sampling_study, write_sampling

    n, rank, extra = args.n, args.rank, {}
    if args.quick:
        n, rank, extra = 1200, 10, {"ladder": (1, 2, 4, 8, 16)}
    baselines = () if "none" in args.baselines else args.baselines
    with solver_threads(args.threads):
        result = sampling_study(n=n, rank=rank, families=args.families,
                                samplings=args.samplings, baselines=baselines,
                                time_limit=args.time_limit, seed=args.seed,
                                progress=not args.no_progress, **extra)
    result["params"]["command"] = getattr(args, "command_line", None)
    result["params"]["threads"] = args.threads
    return print_result(format_sampling(result), write_sampling(result, args.out))
