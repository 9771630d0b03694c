"""``ksvd-bench compare``, ``spectrum`` and ``residual-study``: argument parsing and wiring.

Each ``add_*`` function adds one sub-command to an argparse ``subparsers`` and sets ``func``
(called with the parsed namespace; returns an exit status or a result) and ``check`` (called
with the namespace and the sub-command's parser before any work: cross-flag checks and the
output directory). The studies compute; :mod:`ksvd_bench.report` and the studies' ``format_*``
functions format.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import solvers
from ksvd_bench._cliargs import (
    add_run_arguments,
    check_out,
    nonnegative_float,
    positive_float,
    positive_int,
    print_result,
    unit_interval,
)
from ksvd_bench.kernels._params import KERNELS
from ksvd_bench.race.compare import VARIANTS
from ksvd_bench.race.paper_runtime import (
    DEFAULT_EPS,
    DEFAULT_KERNEL,
    DEFAULT_MEASURES,
    DEFAULT_RANK,
    DEFAULT_WEIGHTS,
    LOWRANK,
    MEASURES,
    PAPER_WEIGHTS,
)
from ksvd_bench.race.problems import (
    DATASET_SHAPES,
    DATASETS,
    DEFAULT_SHAPES,
    GRAPH_DATASETS,
    SHAPED_DATASETS,
    dataset_shape,
)

__all__ = ["add_compare", "add_spectrum", "add_residual_study", "SUBCOMMANDS"]

#: the solvers, as ``solvers`` lists them (``compare`` adds its raced variants)
_METHODS = tuple(solvers.METHODS)
_NYSTROM = ("sym_nystrom", "asym_nystrom")
#: flags of the synthetic problem only (``--size`` applies to every shaped dataset)
_SYNTHETIC_FLAGS = ("planted_rank", "decay", "coherence", "noise")


def _effort_cap(text):
    if text in ("auto", "none"):
        return None if text == "none" else "auto"
    try:
        return positive_int(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"expected a positive integer, 'auto' or 'none', got {text!r}") from None


def _add_problem_arguments(p):
    p.add_argument("--kernel", default=DEFAULT_KERNEL, choices=KERNELS,
                   help="kernel of the real problems (default: %(default)s)")
    p.add_argument("--rank", type=positive_int, default=DEFAULT_RANK,
                   help="number of singular triplets r (default: %(default)s)")
    p.add_argument("--center", action=argparse.BooleanOptionalAction, default=True,
                   help="centre the kernel matrix H_N G H_M (default: on)")


def _weighting(text):
    """An eta weighting; ``lowrank`` is refused with the flag to use instead."""
    if text == LOWRANK:
        raise argparse.ArgumentTypeError("lowrank is a measure, not a weighting of eta: use "
                                         "--measures lowrank (compare) or --measure lowrank "
                                         "(spectrum)")
    if text not in DEFAULT_WEIGHTS:
        raise argparse.ArgumentTypeError(f"expected one of {', '.join(DEFAULT_WEIGHTS)}, got "
                                         f"{text!r}")
    return text


def _add_weights_alias(p, *, nargs):
    """``--weights``: the older name, for eta weightings only (the measure flag takes all)."""
    p.add_argument("--weights", dest="weights", nargs=nargs, type=_weighting,
                   default=argparse.SUPPRESS, metavar="WEIGHTING",
                   help=f"eta weighting(s) among {', '.join(DEFAULT_WEIGHTS)}: the older name "
                        f"of the measure flag (lowrank is a measure: use the measure flag)")


def _fail(parser, flag, message):
    parser.error(f"argument {flag}: {message}")


def _check_rank(args, parser, shapes):
    for name, shape in shapes:
        if args.rank > min(shape):
            _fail(parser, "--rank", f"must be at most min(N, M) = {min(shape)} for {name} "
                                    f"({shape[0]}x{shape[1]}), got {args.rank}")


# ---------------------------------------------------------------------------------------------
# compare
# ---------------------------------------------------------------------------------------------


def add_compare(sub):
    """Add ``compare``: race every solver to each tolerance (the paper's runtime tables)."""
    c = sub.add_parser(
        "compare", help="race every solver to eps (the paper's runtime tables)",
        description="Drive every solver to each tolerance under each accuracy measure on each "
                    "problem; print times, efforts, passes over G, the value reached, "
                    "speedups over RSVD and the paper's numbers; write JSON and CSV under "
                    "--out.")
    c.add_argument("--dataset", nargs="+", default=["cora"], choices=DATASETS,
                   help="problem(s) (default: cora); rare-clusters: two point sets from 20 "
                        "clusters, 6 of them rare (issue 15; uncentred SNE, shape --size, "
                        "default 6000 6000), where asym_nystrom_rpcholesky applies")
    c.add_argument("--eps", nargs="+", type=positive_float, default=list(DEFAULT_EPS),
                   help="tolerance(s) (default: 0.1 0.01)")
    c.add_argument("--measures", dest="weights", nargs="+",
                   default=list(DEFAULT_MEASURES), choices=MEASURES,
                   help="accuracy measure(s), one row-group each: eta under a weighting "
                        "(singular_values is the paper's, uniform the strict one) or lowrank, "
                        "||G - U U^T G||_F <= (1 + eps) ||G - G_r||_F (gap-robust) "
                        "(default: all four). Every measure also asks the singular values "
                        "and triplets to meet eps, and a reliable answer")
    _add_weights_alias(c, nargs="+")
    c.add_argument("--seeds", type=positive_int, default=5,
                   help="seeds per solver; times are medians over seeds (default: 5)")
    c.add_argument("--methods", nargs="+", default=None,
                   choices=_METHODS + tuple(VARIANTS),
                   help="solvers to race (default: all, plus the asym Nystrom entries: "
                        "asym_nystrom_paper (the paper's core, no check), asym_nystrom_norm, "
                        "_arp, _rpcholesky (point problems only, n/a elsewhere) and _aca "
                        "sampling; asym_nystrom is the stable core + one check pass)")
    c.add_argument("--max-effort", type=_effort_cap, default="auto",
                   help="cap on every method's effort: an int, 'auto' (Nystrom m <= min(N,M)/4,"
                        " RSVD p <= min(min(N,M)/4, 10 r), block Krylov basis <= min(N,M)/4) "
                        "or 'none' (the driver's caps, up to m = min(N,M)) (default: auto)")
    c.add_argument("--sweep-limit", type=positive_float, default=20.0,
                   help="wall-clock seconds one effort sweep may take before it stops "
                        "growing the effort; such runs are reported not converged "
                        "(default: %(default)s)")
    c.add_argument("--budget", type=positive_float, default=3.0,
                   help="seconds per (problem, method, measure) after which further seeds "
                        "are skipped (default: %(default)s)")
    c.add_argument("--repeats", type=positive_int, default=1,
                   help="timings per found effort, median (default: 1)")
    c.add_argument("--no-structured", action="store_true",
                   help="skip the exact 'tsvd (structured)' rows")
    c.add_argument("--no-residual", action="store_true",
                   help="skip the residual estimates and the residual-stopped rows")
    c.add_argument("--wide", action="store_true",
                   help="show every column (effort range, kernel time, worst and best value, "
                        "residual estimate, paper seconds); the default fits 100 characters")
    g = c.add_argument_group("shaped problems (--dataset synthetic or rare-clusters only)")
    g.add_argument("--size", nargs=2, type=positive_int, metavar=("N", "M"), default=None,
                   help="shape of synthetic (default: {} {}) or rare-clusters (default: {} "
                        "{}; each >= its 20 clusters)".format(*DEFAULT_SHAPES["synthetic"],
                                                               *DEFAULT_SHAPES["rare-clusters"]))
    g.add_argument("--planted-rank", type=positive_int, default=None,
                   help="number of planted singular triplets (default: max(--rank, 20), at "
                        "most min(N, M))")
    g.add_argument("--decay", default=None, choices=("exponential", "polynomial", "flat"),
                   help="singular-value decay")
    g.add_argument("--coherence", type=unit_interval, default=None,
                   help="coherence in [0, 1] of the singular vectors")
    g.add_argument("--noise", type=nonnegative_float, default=None,
                   help="noise level (>= 0)")
    c.add_argument("--cache-dir", default=None,
                   help="reference-SVD cache (default: <out>/reference_cache)")
    r = c.add_argument_group("the record behind the README's race tables")
    r.add_argument("--record", default=None, metavar="FILE",
                   help="also keep this run's rows, machine, load averages and command line "
                        "in FILE (the repository keeps benchmarks/recorded/race_cora.json)")
    r.add_argument("--readme-table", default=None, metavar="FILE",
                   help="print the README's race tables (Markdown) rendered from a record or "
                        "a compare.json, and exit without racing")
    _add_problem_arguments(c)
    add_run_arguments(c, out_default="results")
    c.set_defaults(func=run_compare_command, check=check_compare, parser=c)
    return c


def _synthetic_shape(args):
    return dataset_shape("synthetic", args.size)


def _planted_rank(args):
    if args.planted_rank is not None:
        return args.planted_rank
    return min(max(args.rank, DEFAULT_RANK), min(_synthetic_shape(args)))


def check_compare(args, parser):
    """Cross-flag checks of ``compare``: the synthetic flags, ``--rank``, ``--out``,
    ``--record`` and ``--readme-table``."""
    if args.readme_table is not None:
        from ksvd_bench.race._compare_files import load_record

        try:
            load_record(args.readme_table)
        except ValueError as exc:
            _fail(parser, "--readme-table", str(exc))
        return
    if args.record is not None:
        from ksvd_bench.report import check_out_dir

        try:
            check_out_dir(Path(args.record).parent or ".", "--record")
        except ValueError as exc:
            parser.error(str(exc))
    given = [f for f in _SYNTHETIC_FLAGS if getattr(args, f) is not None]
    flag = "--" + given[0].replace("_", "-") if given else None
    if given and "synthetic" not in args.dataset:
        _fail(parser, flag, f"applies to --dataset synthetic only, got --dataset "
                            f"{' '.join(args.dataset)}")
    if given and len(args.dataset) > 1:
        _fail(parser, flag, "applies when --dataset synthetic is the only dataset")
    if args.size is not None:
        _check_size(args, parser)
    shapes = [(d, dataset_shape(d, args.size)) for d in args.dataset]
    _check_rank(args, parser, shapes)
    if "synthetic" in args.dataset and args.planted_rank is not None:
        n = min(_synthetic_shape(args))
        if args.planted_rank > n:
            _fail(parser, "--planted-rank", f"must be at most min(N, M) = {n} of --size, "
                                            f"got {args.planted_rank}")
    check_out(args, parser)


def _check_size(args, parser):
    """``--size`` shapes the one shaped dataset asked for (rare-clusters: >= 20 clusters)."""
    if len(args.dataset) > 1 or args.dataset[0] not in SHAPED_DATASETS:
        _fail(parser, "--size", f"applies when the only dataset is one of "
                                f"{', '.join(SHAPED_DATASETS)}, got --dataset "
                                f"{' '.join(args.dataset)}")
    if args.dataset[0] == "rare-clusters" and min(args.size) < 20:
        _fail(parser, "--size", f"N and M of rare-clusters must each be >= its 20 clusters, "
                                f"got {args.size[0]} {args.size[1]}")


def _problem_options(args):
    if "rare-clusters" in args.dataset and args.size is not None:
        return {"shape": tuple(args.size)}
    if "synthetic" not in args.dataset:
        return None
    synth = {k: v for k, v in (("decay", args.decay), ("coherence", args.coherence),
                               ("noise", args.noise)) if v is not None}
    synth["rank"] = _planted_rank(args)
    return {"shape": _synthetic_shape(args), "synthetic_options": synth}


def run_compare_command(args):
    """Run ``compare`` with parsed arguments; print the tables and the files written (or, with
    ``--readme-table``, only render a record)."""
    from ksvd_bench.race._compare_files import readme_table, write_record
    from ksvd_bench.race.compare import format_compare, run_compare

    if args.readme_table is not None:
        print(readme_table(args.readme_table), end="")
        return 0
    result = run_compare(
        args.dataset, kernel=args.kernel, rank=args.rank, eps=args.eps, weights=args.weights,
        seeds=args.seeds, center=args.center, methods=args.methods,
        structured=not args.no_structured, residual=not args.no_residual,
        max_effort=args.max_effort, budget_seconds=args.budget, repeats=args.repeats,
        sweep_limit=args.sweep_limit, threads=args.threads, random_state=args.seed,
        problem_options=_problem_options(args), cache_dir=args.cache_dir, out=args.out,
        progress=not args.no_progress, command_line=getattr(args, "command_line", None))
    if args.record is not None:
        result.paths["record"] = str(write_record(result, args.record))
    return print_result(format_compare(result, wide=args.wide), result.paths)


# ---------------------------------------------------------------------------------------------
# spectrum
# ---------------------------------------------------------------------------------------------


def add_spectrum(sub):
    """Add ``spectrum``: asym Nystrom against RSVD across bandwidths."""
    s = sub.add_parser(
        "spectrum", help="asym Nystrom vs RSVD across bandwidths (the spectrum figure)",
        description="For a range of bandwidth factors: the m asym Nystrom needs to reach eps, "
                    "its speedup over RSVD and the leading singular values; PNG + CSV.")
    s.add_argument("--dataset", default="cora", choices=GRAPH_DATASETS,
                   help="graph (default: cora)")
    s.add_argument("--factors", nargs="+", type=positive_float, default=None,
                   help="bandwidth factors (default: 0.25 0.5 1 2 4)")
    s.add_argument("--eps", type=positive_float, default=0.1,
                   help="tolerance (default: 0.1)")
    s.add_argument("--measure", dest="weights", default=PAPER_WEIGHTS, choices=MEASURES,
                   help="accuracy measure: eta under a weighting, or lowrank (gap-robust) "
                        "(default: the paper's singular_values weighting); the singular "
                        "values and triplets must meet eps too")
    _add_weights_alias(s, nargs=None)
    s.add_argument("--seeds", type=positive_int, default=3, help="seeds (default: 3)")
    s.add_argument("--max-effort", type=positive_int, default=None,
                   help="cap on the effort (default: the driver's cap)")
    _add_problem_arguments(s)
    add_run_arguments(s, out_default="results")
    s.set_defaults(func=run_spectrum_command, check=check_spectrum, parser=s)
    return s


def check_spectrum(args, parser):
    """Cross-flag checks of ``spectrum``: ``--rank`` and ``--out``."""
    _check_rank(args, parser, [(args.dataset, DATASET_SHAPES[args.dataset])])
    check_out(args, parser)


def run_spectrum_command(args):
    """Run ``spectrum`` with parsed arguments; print the tables and the files written."""
    from ksvd_bench.race.spectrum import DEFAULT_FACTORS, format_spectrum, run_spectrum

    result = run_spectrum(
        args.dataset, factors=args.factors or DEFAULT_FACTORS, kernel=args.kernel,
        rank=args.rank, eps=args.eps, weights=args.weights, seeds=args.seeds,
        center=args.center, max_effort=args.max_effort, threads=args.threads,
        random_state=args.seed, out=args.out, progress=not args.no_progress)
    return print_result(format_spectrum(result), result.paths)


# ---------------------------------------------------------------------------------------------
# residual-study
# ---------------------------------------------------------------------------------------------


def add_residual_study(sub):
    """Add ``residual-study``: the residual estimate of eta against the true eta."""
    from ksvd_bench.race.residual_study import NYSTROM_MAX_SAMPLES

    r = sub.add_parser(
        "residual-study", help="the residual estimate of eta against the true eta",
        description="For each graph and solver, over a range of efforts on the exact "
                    "structured kernel operator: the reference-free residual estimate and the "
                    "true eta (all weightings), with a summary per dataset and weighting.")
    r.add_argument("--dataset", nargs="+", default=list(GRAPH_DATASETS),
                   choices=GRAPH_DATASETS, help="graph(s) (default: all three)")
    r.add_argument("--methods", nargs="+", default=None, choices=_METHODS,
                   help="solvers (default: all)")
    r.add_argument("--n-points", type=positive_int, default=6,
                   help="Nystrom sample sizes per method (default: %(default)s)")
    r.add_argument("--max-samples", type=positive_int, default=NYSTROM_MAX_SAMPLES,
                   help="largest Nystrom sample size, at least --rank (default: %(default)s)")
    r.add_argument("--kernel", default="sne", choices=("sne", "rbf"),
                   help="kernel; the study runs on the exact structured operator, which "
                        "exists for these two (default: %(default)s)")
    r.add_argument("--rank", type=positive_int, default=DEFAULT_RANK,
                   help="number of singular triplets r (default: %(default)s)")
    r.add_argument("--center", action=argparse.BooleanOptionalAction, default=True,
                   help="centre the kernel matrix H_N G H_M (default: on)")
    add_run_arguments(r, out_default="results")
    r.set_defaults(func=run_residual_study_command, check=check_residual_study, parser=r)
    return r


def check_residual_study(args, parser):
    """Cross-flag checks of ``residual-study``: ``--rank``, ``--max-samples``, ``--out``."""
    _check_rank(args, parser, [(d, DATASET_SHAPES[d]) for d in args.dataset])
    methods = args.methods or _METHODS
    if any(m in _NYSTROM for m in methods) and args.max_samples < args.rank:
        _fail(parser, "--max-samples", f"must be at least --rank={args.rank} (a Nystrom "
                                       f"sample smaller than r gives fewer than r triplets), "
                                       f"got {args.max_samples}")
    check_out(args, parser)


def run_residual_study_command(args):
    """Run ``residual-study``; print the summary and write JSON/CSV under ``--out``."""
    from ksvd_bench._threads import solver_threads
    from ksvd_bench.race.residual_study import (
        run_residual_study,
        summarize_error_estimates,
        summarize_residual_study,
    )
    from ksvd_bench.report import format_table, machine_info, write_csv, write_json

    with solver_threads(args.threads):
        machine = machine_info()  # inside the limits: records the counts the solvers used
        rows = run_residual_study(
            args.dataset, args.rank, methods=args.methods, kernel=args.kernel,
            center=args.center, n_points=args.n_points, max_samples=args.max_samples,
            random_state=args.seed)
    summary = summarize_residual_study(rows)
    print(format_table(summary, precision=3,
                       title="residual estimate vs eta (per dataset and weighting)"))
    estimates = summarize_error_estimates(rows)
    print(format_table(estimates, precision=3,
                       title="error estimate / true low-rank error ||G - U U^T G||_F (per cell)"))
    meta = {"command": "residual-study", "datasets": args.dataset, "rank": args.rank,
            "methods": args.methods, "kernel": args.kernel, "center": args.center,
            "n_points": args.n_points, "max_samples": args.max_samples, "seed": args.seed,
            "threads": machine["numba_threads"],
            "blas_threads": [b.get("num_threads") for b in machine["blas"]],
            "machine": machine}
    paths = [write_json(f"{args.out}/residual_study.json",
                        {"meta": meta, "summary": summary, "estimates": estimates,
                         "rows": rows}),
             write_csv(f"{args.out}/residual_study.csv", rows),
             write_csv(f"{args.out}/residual_study_summary.csv", summary)]
    for path in paths:
        print(f"wrote {path}")
    return 0


#: the sub-commands this module adds, in the order ``--help`` lists them
SUBCOMMANDS = (add_compare, add_spectrum, add_residual_study)
