"""``ksvd-bench compare``: argument parsing and wiring.

:func:`add_compare` adds the sub-command and sets ``func`` (:func:`run_compare_command`) and
``check`` (:func:`check_compare`, called before any work: cross-flag checks, ``--out``,
``--record`` and ``--readme-table``). The argument helpers shared with the other race
sub-commands are in :mod:`ksvd_bench.race.commands`.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

from ksvd_bench.cliargs import (
    add_run_arguments,
    check_out,
    nonnegative_float,
    positive_float,
    positive_int,
    unit_interval,
)
from ksvd_bench.datasets import DatasetError
from ksvd_bench.race.commands import (
    METHODS,
    add_kernel_arguments,
    add_problem_arguments,
    add_weights_alias,
    check_rank,
    fail,
    problems_from_args,
)
from ksvd_bench.race.common import VARIANTS
from ksvd_bench.race.compare import format_compare, readme_table, run_compare, write_record
from ksvd_bench.race.compare.files import load_record
from ksvd_bench.race.compare.settings import (
    DEFAULT_MEASURES,
    DEFAULT_SEEDS,
    DEFAULT_SWEEP_LIMIT,
    FULL_MEASURES,
    FULL_SEEDS,
    FULL_SWEEP_LIMIT,
    check_tolerance,
)
from ksvd_bench.race.paper_runtime import (
    DEFAULT_EPS,
    DEFAULT_RANK,
    MEASURES,
)
from ksvd_bench.race.problems import (
    DATASETS,
    DEFAULT_SHAPES,
    SHAPED_DATASETS,
    dataset_shape,
)
from ksvd_bench.report import check_out_dir, headline
from ksvd_bench.report.messages import warning_summary

__all__ = ["add_compare", "check_compare", "ignored_flags", "run_compare_command"]

#: flags of the synthetic problem only (``--size`` applies to every shaped dataset)
_SYNTHETIC_FLAGS = ("planted_rank", "decay", "coherence", "noise")


def _tolerance(text):
    """A tolerance of the race, in (0, 1) (``settings.check_tolerance``)."""
    try:
        return check_tolerance(positive_float(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _effort_cap(text):
    if text in ("auto", "none"):
        return None if text == "none" else "auto"
    try:
        return positive_int(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"expected a positive integer, 'auto' or 'none', got {text!r}"
        ) from None


def add_compare(sub):
    """Add ``compare``: race every solver to each tolerance (the paper's runtime tables)."""
    c = sub.add_parser(
        "compare",
        help="race every solver to eps (the paper's runtime tables)",
        description="Drive every solver to each tolerance under each accuracy measure on each "
        "problem, and end with the headline: per problem, measure and tolerance, "
        "the fastest solver whose whole answer is right, its time and its speedup "
        "over RSVD. Writes report.html (headline, time-to-accuracy curves, "
        "failures, the run's record), JSON and CSV under --out; --table also "
        "prints the full tables. The default race is the strict measures (eta "
        "with uniform weights, lowrank) at 0.1 and 0.01 with 3 seeds; --full runs "
        "every measure with 5 seeds.",
    )
    c.add_argument(
        "--dataset",
        nargs="+",
        default=None,
        choices=DATASETS,
        help="problem(s) (default: cora, unless --data, --points or --matrix "
        "names your own); rare-clusters: two point sets from 20 "
        "clusters, 6 of them rare (issue 15; uncentred SNE, shape --size, "
        "default 6000 6000), where asym_nystrom_rpcholesky applies",
    )
    c.add_argument(
        "--eps",
        nargs="+",
        type=_tolerance,
        default=list(DEFAULT_EPS),
        help="tolerance(s), each in (0, 1) (default: 0.1 0.01)",
    )
    c.add_argument(
        "--measures",
        dest="weights",
        nargs="+",
        default=None,
        choices=MEASURES,
        help="accuracy measure(s), one row-group each: eta under a weighting "
        "(singular_values is the paper's, uniform the strict one) or lowrank, "
        "||G - U U^T G||_F <= (1 + eps) ||G - G_r||_F (gap-robust) "
        f"(default: {' '.join(DEFAULT_MEASURES)}; with --full all four). "
        "Every measure also asks the singular values and triplets to meet "
        "eps, and a reliable answer",
    )
    add_weights_alias(c, nargs="+")
    c.add_argument(
        "--seeds",
        type=positive_int,
        default=None,
        help="seeds per solver; times are medians over seeds (default: "
        f"{DEFAULT_SEEDS}; with --full {FULL_SEEDS})",
    )
    c.add_argument(
        "--full",
        action="store_true",
        help=f"the full grid: every measure ({' '.join(FULL_MEASURES)}) with "
        f"{FULL_SEEDS} seeds (--measures and --seeds still override it)",
    )
    c.add_argument(
        "--table",
        action="store_true",
        help="also print the full tables (one per problem and eps; they are in "
        "the files either way)",
    )
    c.add_argument(
        "--methods",
        nargs="+",
        default=None,
        choices=METHODS + tuple(VARIANTS),
        help="solvers to race (default: all, plus the asym Nystrom entries: "
        "asym_nystrom_paper (the paper's core, no check), asym_nystrom_norm, "
        "_arp, _rpcholesky (point problems only, n/a elsewhere) and _aca "
        "sampling; asym_nystrom is the stable core + one check pass)",
    )
    c.add_argument(
        "--max-effort",
        type=_effort_cap,
        default="auto",
        help="cap on every method's effort: an int, 'auto' (Nystrom m <= min(N,M)/4,"
        " RSVD p <= min(min(N,M)/4, 10 r), block Krylov basis <= min(N,M)/4) "
        "or 'none' (the driver's caps, up to m = min(N,M)) (default: auto)",
    )
    c.add_argument(
        "--sweep-limit",
        type=positive_float,
        default=None,
        help="wall-clock seconds one effort sweep may take before it stops "
        "growing the effort; such runs are reported not converged "
        f"(default: {DEFAULT_SWEEP_LIMIT:g}; with --full {FULL_SWEEP_LIMIT:g})",
    )
    c.add_argument(
        "--budget",
        type=positive_float,
        default=3.0,
        help="seconds per (problem, method, measure) after which further seeds "
        "are skipped (default: %(default)s)",
    )
    c.add_argument(
        "--repeats",
        type=positive_int,
        default=1,
        help="timings per found effort, median (default: 1)",
    )
    c.add_argument(
        "--no-structured", action="store_true", help="skip the exact 'tsvd (structured)' rows"
    )
    c.add_argument(
        "--no-residual",
        action="store_true",
        help="skip the residual estimates and the residual-stopped rows",
    )
    c.add_argument(
        "--wide",
        action="store_true",
        help="print the tables with every column (effort range, kernel time, worst "
        "and best value, residual estimate, paper seconds); implies --table",
    )
    g = c.add_argument_group("shaped problems (--dataset synthetic or rare-clusters only)")
    g.add_argument(
        "--size",
        nargs=2,
        type=positive_int,
        metavar=("N", "M"),
        default=None,
        help="shape of synthetic (default: {} {}) or rare-clusters (default: {} "
        "{}; each >= its 20 clusters)".format(
            *DEFAULT_SHAPES["synthetic"], *DEFAULT_SHAPES["rare-clusters"]
        ),
    )
    g.add_argument(
        "--planted-rank",
        type=positive_int,
        default=None,
        help="number of planted singular triplets (default: max(--rank, 20), at most min(N, M))",
    )
    g.add_argument(
        "--decay",
        default=None,
        choices=("exponential", "polynomial", "flat"),
        help="singular-value decay",
    )
    g.add_argument(
        "--coherence",
        type=unit_interval,
        default=None,
        help="coherence in [0, 1] of the singular vectors",
    )
    g.add_argument("--noise", type=nonnegative_float, default=None, help="noise level (>= 0)")
    c.add_argument(
        "--cache-dir", default=None, help="reference-SVD cache (default: <out>/reference_cache)"
    )
    r = c.add_argument_group("the record behind the README's race tables")
    r.add_argument(
        "--record",
        default=None,
        metavar="FILE",
        help="also keep this run's rows, machine, load averages and command line "
        "in FILE (the repository keeps benchmarks/recorded/race_cora.json)",
    )
    r.add_argument(
        "--readme-table",
        default=None,
        metavar="FILE",
        help="print the README's race tables (Markdown) rendered from a record or "
        "a compare.json, and exit without racing",
    )
    add_kernel_arguments(c)
    add_problem_arguments(c)
    add_run_arguments(c, out_default="results")
    c.set_defaults(func=run_compare_command, check=check_compare, parser=c)
    return c


def _synthetic_shape(args):
    return dataset_shape("synthetic", args.size)


def _planted_rank(args):
    if args.planted_rank is not None:
        return args.planted_rank
    return min(max(args.rank, DEFAULT_RANK), min(_synthetic_shape(args)))


def _resolve_defaults(args):
    """The defaults that depend on other flags: the datasets (cora unless the user names
    problems of their own), the measures and seeds (``--full`` or the default race)."""
    own = any(getattr(args, f, None) for f in ("data", "points", "matrix"))
    if args.dataset is None:
        args.dataset = [] if own else ["cora"]
    if args.weights is None:
        args.weights = list(FULL_MEASURES if args.full else DEFAULT_MEASURES)
    if args.seeds is None:
        args.seeds = FULL_SEEDS if args.full else DEFAULT_SEEDS
    if args.sweep_limit is None:
        args.sweep_limit = FULL_SWEEP_LIMIT if args.full else DEFAULT_SWEEP_LIMIT
    args.table = args.table or args.wide


def check_compare(args, parser):
    """Cross-flag checks of ``compare``: the synthetic flags, ``--rank``, ``--out``,
    ``--record`` and ``--readme-table``."""
    _resolve_defaults(args)
    if args.readme_table is not None:
        try:
            load_record(args.readme_table)
        except ValueError as exc:
            fail(parser, "--readme-table", str(exc))
        return
    if args.record is not None:
        try:
            check_out_dir(Path(args.record).parent or ".", "--record")
        except ValueError as exc:
            parser.error(str(exc))
    given = [f for f in _SYNTHETIC_FLAGS if getattr(args, f) is not None]
    flag = "--" + given[0].replace("_", "-") if given else None
    if given and "synthetic" not in args.dataset:
        fail(
            parser,
            flag,
            f"applies to --dataset synthetic only, got --dataset {' '.join(args.dataset)}",
        )
    if given and (len(args.dataset) > 1 or _own_files(args)):
        fail(parser, flag, "applies when --dataset synthetic is the only dataset")
    if args.size is not None:
        _check_size(args, parser)
    shapes = [(d, dataset_shape(d, args.size)) for d in args.dataset]
    check_rank(args, parser, shapes)
    if "synthetic" in args.dataset and args.planted_rank is not None:
        n = min(_synthetic_shape(args))
        if args.planted_rank > n:
            fail(
                parser,
                "--planted-rank",
                f"must be at most min(N, M) = {n} of --size, got {args.planted_rank}",
            )
    check_out(args, parser)


def _own_files(args):
    return [p for f in ("data", "points", "matrix") for p in (getattr(args, f, None) or [])]


def _check_size(args, parser):
    """``--size`` shapes the one shaped dataset asked for (rare-clusters: >= 20 clusters)."""
    if len(args.dataset) != 1 or args.dataset[0] not in SHAPED_DATASETS or _own_files(args):
        fail(
            parser,
            "--size",
            f"applies when the only dataset is one of "
            f"{', '.join(SHAPED_DATASETS)}, got --dataset "
            f"{' '.join(args.dataset)}",
        )
    if args.dataset[0] == "rare-clusters" and min(args.size) < 20:
        fail(
            parser,
            "--size",
            f"N and M of rare-clusters must each be >= its 20 clusters, "
            f"got {args.size[0]} {args.size[1]}",
        )


def _problem_options(args):
    if "rare-clusters" in args.dataset and args.size is not None:
        return {"shape": tuple(args.size)}
    if "synthetic" not in args.dataset:
        return None
    synth = {
        k: v
        for k, v in (("decay", args.decay), ("coherence", args.coherence), ("noise", args.noise))
        if v is not None
    }
    synth["rank"] = _planted_rank(args)
    return {"shape": _synthetic_shape(args), "synthetic_options": synth}


#: the problem kinds each kernel flag applies to ("dataset": a bundled graph or feature table;
#: synthetic and rare-clusters fix their own G; a --matrix G is raced as given; point sets are
#: uncentred)
_FLAG_USERS = {
    "kernel": ("dataset", "data", "points"),
    "center": ("dataset", "data"),
    "gamma": ("data", "points"),
    "bandwidth_factor": ("data", "points"),
    "compat": ("data",),
}
_KIND_NAMES = {
    "dataset": "the bundled graphs and feature tables",
    "data": "--data",
    "points": "--points",
}


def _problem_kind(problem):
    if problem.points is not None:
        return "points"
    return "matrix" if problem.params.get("given") else "data"


def ignored_flags(args, own):
    """The kernel flags typed that no problem of the run uses, each with the reason.

    ``--kernel`` and ``--gamma`` with only ``--matrix`` problems, say, change nothing; the
    record says so rather than keep a setting that was never applied.

    Returns
    -------
    dict
        ``{"--kernel": "applies to ..., and this run has none (so it was not used)", ...}``
        (empty when every flag typed was used).
    """
    kinds = {_problem_kind(p) for p in own} | {
        "fixed" if d in ("synthetic", "rare-clusters") else "dataset" for d in args.dataset
    }
    out = {}
    for dest, users in _FLAG_USERS.items():
        if dest in getattr(args, "given", ()) and not kinds & set(users):
            flag = "--center/--no-center" if dest == "center" else "--" + dest.replace("_", "-")
            applies = ", ".join(_KIND_NAMES[k] for k in users)
            out[flag] = f"applies to {applies}, and this run has none (so it was not used)"
    return out


def run_compare_command(args):
    """Run ``compare`` with parsed arguments (or, with ``--readme-table``, only render a
    record).

    The progress bar and the warnings go to stderr: each warning is recorded while the race
    runs (per row in the files) and the terminal gets, at the end, the per-solver counts the
    headline gives and one line per message template, numbers that vary shown as their range
    (:func:`ksvd_bench.report.messages.warning_summary`). Stdout gets the tables
    (``--table``), the files written, then the headline (at most 30 lines) ending with the
    path of ``report.html``.
    """

    if args.readme_table is not None:
        print(readme_table(args.readme_table), end="")
        return 0
    try:  # every file is read and checked before any kernel is built
        own = problems_from_args(args)
    except DatasetError as exc:
        args.parser.error(str(exc))
    ignored = ignored_flags(args, own)
    for flag, why in ignored.items():
        print(f"ksvd-bench compare: ignored {flag}: {why}", file=sys.stderr)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = _run(args, run_compare, own, ignored)
    # grouped by template, per-solver counts as the headline's (report.messages)
    for line in warning_summary(result.rows, others=[str(w.message) for w in caught]):
        print(line, file=sys.stderr)
    if args.record is not None:
        result.paths["record"] = str(write_record(result, args.record))
    report = result.paths.pop("report", None)
    if args.table:
        print(format_compare(result, wide=args.wide))
        print()
    for kind, path in result.paths.items():
        print(f"wrote {kind}: {path}")
    print("\n".join(headline(result.rows, max_lines=30, report_path=report)))
    return 0


def _run(args, run_compare, own, ignored):
    return run_compare(
        [*args.dataset, *own],
        kernel=args.kernel,
        rank=args.rank,
        eps=args.eps,
        weights=args.weights,
        seeds=args.seeds,
        center=args.center,
        methods=args.methods,
        structured=not args.no_structured,
        residual=not args.no_residual,
        max_effort=args.max_effort,
        budget_seconds=args.budget,
        repeats=args.repeats,
        sweep_limit=args.sweep_limit,
        threads=args.threads,
        random_state=args.seed,
        problem_options=_problem_options(args),
        cache_dir=args.cache_dir,
        out=args.out,
        progress=not args.no_progress,
        command_line=getattr(args, "command_line", None),
        ignored_flags=ignored,
    )
