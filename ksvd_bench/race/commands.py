"""``ksvd-bench spectrum``, ``residual-study`` and ``sampling``: argument parsing and wiring,
and the argument helpers every race sub-command shares (``compare`` and ``suite`` too).

Each ``add_*`` function adds one sub-command to an argparse ``subparsers`` and sets ``func``
(called with the parsed namespace; returns an exit status or a result) and ``check`` (called
with the namespace and the sub-command's parser before any work: cross-flag checks and the
output directory). The studies compute; :mod:`ksvd_bench.report` and the studies' ``format_*``
functions format. ``compare``'s and ``scale``'s sub-commands live in their packages
(:mod:`ksvd_bench.race.compare.cli`, :mod:`ksvd_bench.race.scale.cli`).
"""

from __future__ import annotations

import argparse

import solvers
from ksvd_bench.cliargs import (
    add_run_arguments,
    check_out,
    positive_float,
    positive_int,
    print_result,
)
from ksvd_bench.driver import effort_kind
from ksvd_bench.kernels.params import EXP_KERNELS, KERNELS
from ksvd_bench.race.paper_runtime import (
    DEFAULT_KERNEL,
    DEFAULT_RANK,
    DEFAULT_WEIGHTS,
    LOWRANK,
    MEASURES,
    STRICT_WEIGHTS,
)
from ksvd_bench.race.problems import (
    DATASET_SHAPES,
    DEFAULT_MEMORY_LIMIT,
    GRAPH_DATASETS,
    user_problems,
)
from ksvd_bench.race.residual_study import (
    NYSTROM_MAX_SAMPLES,
    run_residual_study,
    summarize_error_estimates,
    summarize_residual_study,
)
from ksvd_bench.race.sampling import (
    BASELINES,
    FAMILIES,
    PLAIN_RPCHOLESKY,
    SAMPLINGS,
    SCALE_MIN_N,
    SCALE_WARM_UP_N,
    format_sampling,
    format_scale,
    sampling_study,
    scale_study,
    write_sampling,
    write_scale,
)
from ksvd_bench.race.spectrum import DEFAULT_FACTORS, format_spectrum, run_spectrum
from ksvd_bench.report import format_table, machine_info, write_csv, write_json
from ksvd_bench.threads import solver_threads

__all__ = [
    "add_spectrum",
    "add_residual_study",
    "add_sampling",
    "add_kernel_arguments",
    "add_weights_alias",
    "weighting",
    "fail",
    "check_rank",
    "METHODS",
    "add_problem_arguments",
    "problems_from_args",
]

#: the solvers, as ``solvers`` lists them (``compare`` adds its raced variants)
METHODS = tuple(solvers.METHODS)


def add_kernel_arguments(p):
    """``--kernel``, ``--rank`` and ``--center``, as every race sub-command reads them."""
    p.add_argument(
        "--kernel",
        default=DEFAULT_KERNEL,
        choices=KERNELS,
        help="kernel of the real problems (default: %(default)s)",
    )
    p.add_argument(
        "--rank",
        type=positive_int,
        default=DEFAULT_RANK,
        help="number of singular triplets r (default: %(default)s)",
    )
    p.add_argument(
        "--center",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="centre the kernel matrix H_N G H_M (default: on)",
    )


def weighting(text):
    """An eta weighting; ``lowrank`` is refused with the flag to use instead."""
    if text == LOWRANK:
        raise argparse.ArgumentTypeError(
            "lowrank is a measure, not a weighting of eta: use "
            "--measures lowrank (compare) or --measure lowrank "
            "(spectrum)"
        )
    if text not in DEFAULT_WEIGHTS:
        raise argparse.ArgumentTypeError(
            f"expected one of {', '.join(DEFAULT_WEIGHTS)}, got {text!r}"
        )
    return text


def add_weights_alias(p, *, nargs):
    """``--weights``: the older name, for eta weightings only (the measure flag takes all)."""
    p.add_argument(
        "--weights",
        dest="weights",
        nargs=nargs,
        type=weighting,
        default=argparse.SUPPRESS,
        metavar="WEIGHTING",
        help=f"eta weighting(s) among {', '.join(DEFAULT_WEIGHTS)}: the older name "
        f"of the measure flag (lowrank is a measure: use the measure flag)",
    )


def fail(parser, flag, message):
    """A usage error naming ``flag`` (exit status 2)."""
    parser.error(f"argument {flag}: {message}")


def check_rank(args, parser, shapes):
    """``--rank`` at most min(N, M) of every ``(name, shape)``."""
    for name, shape in shapes:
        if args.rank > min(shape):
            fail(
                parser,
                "--rank",
                f"must be at most min(N, M) = {min(shape)} for {name} "
                f"({shape[0]}x{shape[1]}), got {args.rank}",
            )


# ---------------------------------------------------------------------------------------------
# spectrum
# ---------------------------------------------------------------------------------------------


def add_spectrum(sub):
    """Add ``spectrum``: asym Nystrom against RSVD across bandwidths."""
    s = sub.add_parser(
        "spectrum",
        help="asym Nystrom vs RSVD across bandwidths (the spectrum figure)",
        description="For a range of bandwidth factors: the m asym Nystrom needs to reach eps, "
        "its speedup over RSVD and the leading singular values; PNG + CSV.",
    )
    s.add_argument(
        "--dataset", default="cora", choices=GRAPH_DATASETS, help="graph (default: cora)"
    )
    s.add_argument(
        "--factors",
        nargs="+",
        type=positive_float,
        default=None,
        help="bandwidth factors (default: 0.25 0.5 1 2 4)",
    )
    s.add_argument("--eps", type=positive_float, default=0.1, help="tolerance (default: 0.1)")
    s.add_argument(
        "--measure",
        dest="weights",
        default=STRICT_WEIGHTS,
        choices=MEASURES,
        help="accuracy measure: eta under a weighting, or lowrank (gap-robust) "
        "(default: %(default)s, the strict weighting; the paper's singular_values "
        "is vacuous at eps 0.1 on a centred SNE kernel); the singular "
        "values and triplets must meet eps too",
    )
    add_weights_alias(s, nargs=None)
    s.add_argument("--seeds", type=positive_int, default=3, help="seeds (default: 3)")
    s.add_argument(
        "--max-effort",
        type=positive_int,
        default=None,
        help="cap on the effort (default: the driver's cap)",
    )
    add_kernel_arguments(s)
    add_run_arguments(s, out_default="results")
    s.set_defaults(func=run_spectrum_command, check=check_spectrum, parser=s)
    return s


def check_spectrum(args, parser):
    """Cross-flag checks of ``spectrum``: ``--rank`` and ``--out``."""
    check_rank(args, parser, [(args.dataset, DATASET_SHAPES[args.dataset])])
    check_out(args, parser)


def run_spectrum_command(args):
    """Run ``spectrum`` with parsed arguments; print the tables and the files written."""
    result = run_spectrum(
        args.dataset,
        factors=args.factors or DEFAULT_FACTORS,
        kernel=args.kernel,
        rank=args.rank,
        eps=args.eps,
        weights=args.weights,
        seeds=args.seeds,
        center=args.center,
        max_effort=args.max_effort,
        threads=args.threads,
        random_state=args.seed,
        out=args.out,
        progress=not args.no_progress,
    )
    return print_result(format_spectrum(result), result.paths)


# ---------------------------------------------------------------------------------------------
# residual-study
# ---------------------------------------------------------------------------------------------


def add_residual_study(sub):
    """Add ``residual-study``: the residual estimate of eta against the true eta."""
    r = sub.add_parser(
        "residual-study",
        help="the residual estimate of eta against the true eta",
        description="For each graph and solver, over a range of efforts on the exact "
        "structured kernel operator: the reference-free residual estimate and the "
        "true eta (all weightings), with a summary per dataset and weighting.",
    )
    r.add_argument(
        "--dataset",
        nargs="+",
        default=list(GRAPH_DATASETS),
        choices=GRAPH_DATASETS,
        help="graph(s) (default: all three)",
    )
    r.add_argument(
        "--methods", nargs="+", default=None, choices=METHODS, help="solvers (default: all)"
    )
    r.add_argument(
        "--n-points",
        type=positive_int,
        default=6,
        help="Nystrom sample sizes per method (default: %(default)s)",
    )
    r.add_argument(
        "--max-samples",
        type=positive_int,
        default=NYSTROM_MAX_SAMPLES,
        help="largest Nystrom sample size, at least --rank (default: %(default)s)",
    )
    r.add_argument(
        "--kernel",
        default="sne",
        choices=EXP_KERNELS,
        help="kernel; the study runs on the exact structured operator, which "
        "exists for these two (default: %(default)s)",
    )
    r.add_argument(
        "--rank",
        type=positive_int,
        default=DEFAULT_RANK,
        help="number of singular triplets r (default: %(default)s)",
    )
    r.add_argument(
        "--center",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="centre the kernel matrix H_N G H_M (default: on)",
    )
    add_run_arguments(r, out_default="results")
    r.set_defaults(func=run_residual_study_command, check=check_residual_study, parser=r)
    return r


def check_residual_study(args, parser):
    """Cross-flag checks of ``residual-study``: ``--rank``, ``--max-samples``, ``--out``."""
    check_rank(args, parser, [(d, DATASET_SHAPES[d]) for d in args.dataset])
    methods = args.methods or METHODS
    if any(effort_kind(m) == "samples" for m in methods) and args.max_samples < args.rank:
        fail(
            parser,
            "--max-samples",
            f"must be at least --rank={args.rank} (a Nystrom "
            f"sample smaller than r gives fewer than r triplets), "
            f"got {args.max_samples}",
        )
    check_out(args, parser)


def run_residual_study_command(args):
    """Run ``residual-study``; print the summary and write JSON/CSV under ``--out``."""
    with solver_threads(args.threads):
        machine = machine_info()  # inside the limits: records the counts the solvers used
        rows = run_residual_study(
            args.dataset,
            args.rank,
            methods=args.methods,
            kernel=args.kernel,
            center=args.center,
            n_points=args.n_points,
            max_samples=args.max_samples,
            random_state=args.seed,
        )
    summary = summarize_residual_study(rows)
    print(
        format_table(
            summary, precision=3, title="residual estimate vs eta (per dataset and weighting)"
        )
    )
    estimates = summarize_error_estimates(rows)
    print(
        format_table(
            estimates,
            precision=3,
            title="error estimate / true low-rank error ||G - U U^T G||_F (per cell)",
        )
    )
    meta = {
        "command": "residual-study",
        "datasets": args.dataset,
        "rank": args.rank,
        "methods": args.methods,
        "kernel": args.kernel,
        "center": args.center,
        "n_points": args.n_points,
        "max_samples": args.max_samples,
        "seed": args.seed,
        "threads": machine["numba_threads"],
        "blas_threads": [b.get("num_threads") for b in machine["blas"]],
        "machine": machine,
    }
    paths = [
        write_json(
            f"{args.out}/residual_study.json",
            {"meta": meta, "summary": summary, "estimates": estimates, "rows": rows},
        ),
        write_csv(f"{args.out}/residual_study.csv", rows),
        write_csv(f"{args.out}/residual_study_summary.csv", summary),
    ]
    for path in paths:
        print(f"wrote {path}")
    return 0


# ---------------------------------------------------------------------------------------------
# sampling
# ---------------------------------------------------------------------------------------------


def _names(allowed, what):
    def parse(text):
        names = tuple(p.strip() for p in text.split(","))
        bad = [p for p in names if p not in allowed]
        if not names or bad:
            raise argparse.ArgumentTypeError(
                f"expected comma-separated {what} among {', '.join(allowed)}, got {text!r}"
            )
        return names

    return parse


def add_sampling(subparsers):
    """Add ``sampling``: asym Nystrom samplers raced by entries read and by passes (issue 15)."""
    samplings = SAMPLINGS + (PLAIN_RPCHOLESKY,)

    p = subparsers.add_parser(
        "sampling",
        help="asym Nystrom samplers raced by entries read and by passes",
        description=(
            "Race the samplers of asym_nystrom (uniform, norm, arp, aca, rpcholesky, and "
            "the textbook rpcholesky-plain) at a "
            "ladder of sample sizes beside rsvd, block_krylov and generalized_nystrom, on two "
            "point sets with an SNE kernel: rare clusters (r clusters, 30% of them of weight "
            "0.02: 6 of 20, 2 of 5) and plain ones; report subspace error against entries "
            "read and against passes, and the clusters each sampler found. Writes "
            "sampling.json, sampling.csv, sampling_summary.csv and sampling.png under --out. "
            "With --scale N, the scale run instead (see 'scale run' below)."
        ),
    )
    p.add_argument("--n", type=positive_int, default=6000, help="N = M (default: %(default)s)")
    p.add_argument(
        "--rank",
        type=positive_int,
        default=20,
        help="r, also the number of clusters (default: %(default)s)",
    )
    p.add_argument(
        "--families",
        type=_names(FAMILIES, "families"),
        default=FAMILIES,
        help=f"comma-separated among {', '.join(FAMILIES)} (default: both)",
    )
    p.add_argument(
        "--samplings",
        type=_names(samplings, "samplings"),
        default=samplings,
        help=f"comma-separated among {', '.join(samplings)} (default: all; "
        f"{PLAIN_RPCHOLESKY} is the textbook RPCholesky, for comparison)",
    )
    p.add_argument(
        "--baselines",
        type=_names(BASELINES + ("none",), "methods"),
        default=BASELINES,
        help="comma-separated multiplying methods, or none (default: all three)",
    )
    p.add_argument(
        "--time-limit",
        type=positive_float,
        default=60.0,
        help="a sampler's ladder stops after a run slower than this many seconds "
        "(default: %(default)s)",
    )
    p.add_argument(
        "--quick", action="store_true", help="N = M = 1200, r = 10, a short ladder (a CI-sized run)"
    )
    g = p.add_argument_group(
        "scale run",
        "Instead of the race: RPCholesky (4 r pivots) on the rare-cluster family at a large "
        "N = M, on a lazy SNE source that never runs its set-up pass, and no reference. The "
        "answer runs twice beside each other on the same points: uncertified, then with its "
        "row-sampled certificate (the solver's default budget). Before the timed runs an "
        f"untimed warm-up at N = M = {SCALE_WARM_UP_N} compiles (or loads from cache) the "
        "Numba kernels, so neither timing pays for compilation; generating the points is "
        "timed apart. Reads --rank, "
        "--threads and --seed; the race's flags (--n, --families, --samplings, --baselines, "
        "--time-limit, --quick) are refused. Writes scale.json under --out.",
    )
    g.add_argument(
        "--scale",
        type=positive_int,
        default=None,
        metavar="N",
        help=f"run the scale run at N = M = N (at least {SCALE_MIN_N}), e.g. 1000000",
    )
    g.add_argument(
        "--repeat",
        type=positive_int,
        default=1,
        metavar="K",
        help="with --scale: K rounds, each uncertified then certified (interleaved); the "
        "summary gives the medians (default: %(default)s)",
    )
    add_run_arguments(p, out_default="results/sampling")
    p.set_defaults(func=run_sampling_command, check=check_sampling, parser=p)
    return p


#: the race's flags, which ``--scale`` refuses when set: (flag, dest)
_RACE_FLAGS = (
    ("--n", "n"),
    ("--families", "families"),
    ("--samplings", "samplings"),
    ("--baselines", "baselines"),
    ("--time-limit", "time_limit"),
    ("--quick", "quick"),
)


def _typed(args, parser, dest):
    """Whether the flag of ``dest`` was typed (``args.given``, set by the CLI's ``main``), or,
    where that is unknown, set to other than its default."""
    given = getattr(args, "given", None)
    return dest in given if given is not None else getattr(args, dest) != parser.get_default(dest)


def _check_scale(args, parser):
    """``--scale``: its size and rank, and none of the race's flags."""
    for flag, dest in _RACE_FLAGS:
        if _typed(args, parser, dest):
            fail(
                parser,
                "--scale",
                f"runs the scale run alone (RPCholesky on the rare-cluster family), not "
                f"the sampler race: drop {flag}",
            )
    if args.scale < SCALE_MIN_N:
        fail(
            parser,
            "--scale",
            f"must be >= {SCALE_MIN_N} (N = M: rank clusters, some rare, need their "
            f"points), got {args.scale}",
        )
    _check_family_rank(args, parser, args.scale, "--scale", rare=True)


def _check_family_rank(args, parser, n, size_flag, rare):
    """``--rank`` at most a quarter of the ``n`` points (``size_flag``: ``--n`` or
    ``--scale``), and at least 2 where the rare family runs (rank clusters, some rare)."""
    if args.rank > n // 4:
        fail(parser, "--rank", f"must be <= {size_flag} / 4 = {n // 4}, got {args.rank}")
    if rare and args.rank < 2:
        fail(
            parser,
            "--rank",
            f"must be >= 2 for the rare family (rank clusters, some rare and some common), "
            f"got {args.rank}",
        )


def check_sampling(args, parser):
    """Cross-flag checks of ``sampling``, before any work."""
    if args.scale is not None:
        _check_scale(args, parser)
        check_out(args, parser)
        return
    if _typed(args, parser, "repeat"):
        fail(parser, "--repeat", "applies to the scale run only: pass --scale N with it")
    _check_family_rank(args, parser, args.n, "--n", rare="rare" in args.families)
    check_out(args, parser)


def run_sampling_command(args):
    """Run ``sampling``; print its summary and the files written."""
    if args.scale is not None:
        return run_scale_command(args)
    n, rank, extra = args.n, args.rank, {}
    if args.quick:
        n, rank, extra = 1200, 10, {"ladder": (1, 2, 4, 8, 16)}
    baselines = () if "none" in args.baselines else args.baselines
    with solver_threads(args.threads):
        result = sampling_study(
            n=n,
            rank=rank,
            families=args.families,
            samplings=args.samplings,
            baselines=baselines,
            time_limit=args.time_limit,
            seed=args.seed,
            progress=not args.no_progress,
            **extra,
        )
    result["params"]["command"] = getattr(args, "command_line", None)
    result["params"]["threads"] = args.threads
    return print_result(format_sampling(result), write_sampling(result, args.out))


def run_scale_command(args):
    """Run ``sampling --scale``; print its summary and the file written."""
    # scale_study applies --threads to each run itself (the warm-up's and the timed ones)
    result = scale_study(
        args.scale,
        rank=args.rank,
        seed=args.seed,
        threads=args.threads,
        repeat=args.repeat,
        progress=not args.no_progress,
    )
    result["params"]["command"] = getattr(args, "command_line", None)
    return print_result(format_scale(result), write_scale(result, args.out))


def add_problem_arguments(parser):
    """Add a user's own problems to a parser: ``--data``, ``--points``, ``--matrix`` (each
    repeatable, mixable with ``--dataset``) and ``--memory-limit``.

    The kernel, gamma (``--gamma``, ``--bandwidth-factor``), compat and centring come from the
    parser's usual flags when it has them (``--kernel``, ``--center``). Read the problems back
    with :func:`problems_from_args`.
    """
    g = parser.add_argument_group(
        "your own problems (each repeatable, mixable with --dataset; named by the file's stem)"
    )
    g.add_argument(
        "--data",
        action="append",
        default=[],
        metavar="FILE",
        help="a data matrix A (.npy, .npz with one array or a scipy sparse matrix, "
        ".mtx, .csv): the kernel is built from it as for the graphs (--kernel, "
        "--gamma, --compat, --center)",
    )
    g.add_argument(
        "--points",
        action="append",
        nargs="+",
        default=[],
        metavar="FILE",
        help="X.npy [Z.npy]: two point sets (one point per row), or one used "
        "twice; G = k(X, Z), uncentred (a block of a PSD kernel, which "
        "rpcholesky needs), dense or lazy (see --memory-limit); every method "
        "runs, rpcholesky included",
    )
    g.add_argument(
        "--matrix",
        action="append",
        default=[],
        metavar="FILE",
        help="a precomputed kernel matrix G, dense or sparse, raced as given",
    )
    g.add_argument(
        "--gamma",
        type=positive_float,
        default=None,
        help="bandwidth of the user problems (default: the paper's rule, "
        "factor --bandwidth-factor)",
    )
    g.add_argument(
        "--bandwidth-factor",
        type=positive_float,
        default=1.0,
        help="factor of the paper's bandwidth rule for the user problems (default: %(default)s)",
    )
    g.add_argument(
        "--compat",
        default=None,
        help="compatibility map of a non-square --data matrix (default: pca)",
    )
    g.add_argument(
        "--memory-limit",
        type=positive_float,
        default=DEFAULT_MEMORY_LIMIT / 2**30,
        metavar="GIB",
        help="GiB a dense G of a --points problem may take; above it the problem "
        "is raced lazily (G never formed) against a block Krylov reference "
        "to 1e-10, and its rows say so (default: %(default)s)",
    )
    return g


def _arg(args, name, default):
    value = getattr(args, name, default)
    return default if value is None else value


def problems_from_args(args):
    """The :class:`~ksvd_bench.race.problems.Problem` objects of ``--data``, ``--points`` and
    ``--matrix`` (:func:`~ksvd_bench.race.problems.user_problems` of the parsed flags).

    Every file is read and checked first (a bad one, or one whose kernel matrix is smaller
    than ``args.rank`` in either direction, raises :class:`~ksvd_bench.datasets.DatasetError`
    naming the file and the problem before any kernel is built); then the problems are built
    in the order data, points, matrix. Two problems with the same name (file stem) are
    refused.

    Returns
    -------
    list of Problem
        Empty when no file flag was given.
    """
    files = (
        [("data", [p]) for p in getattr(args, "data", None) or []]
        + [("points", list(p)) for p in getattr(args, "points", None) or []]
        + [("matrix", [p]) for p in getattr(args, "matrix", None) or []]
    )
    return user_problems(
        files,
        taken=list(getattr(args, "dataset", None) or []),
        rank=getattr(args, "rank", None),
        kernel=_arg(args, "kernel", DEFAULT_KERNEL),
        gamma=getattr(args, "gamma", None),
        bandwidth_factor=_arg(args, "bandwidth_factor", 1.0),
        compat=getattr(args, "compat", None),
        center=bool(_arg(args, "center", True)),
        memory_limit=float(_arg(args, "memory_limit", DEFAULT_MEMORY_LIMIT / 2**30)) * 2**30,
        random_state=int(_arg(args, "seed", 0)),
    )
