"""The ``ksvd-bench`` command line: argument parsing only; experiments do the work.

Sub-commands
------------
``compare``         race every solver to each tolerance (the paper's Tables 3 and 4)
``spectrum``        asym Nystrom vs RSVD across bandwidths (the paper's spectrum figure)
``residual-study``  how the reference-free residual estimate relates to eta
``reproduce``       the paper's feature-learning experiments (tables and figures)
"""

from __future__ import annotations

import argparse
import sys

from ksvd_bench.kernels._params import KERNELS
from ksvd_bench.paper import _reproduce_cli
from ksvd_bench.race.paper_runtime import (
    DEFAULT_EPS,
    DEFAULT_KERNEL,
    DEFAULT_RANK,
    DEFAULT_WEIGHTS,
    PAPER_WEIGHTS,
)
from ksvd_bench.race.problems import DATASETS, GRAPH_DATASETS

__all__ = ["build_parser", "main"]

_METHODS = ("tsvd", "rsvd", "sym_nystrom", "asym_nystrom")


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _positive_float(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a finite positive number, got {value}")
    return value


def _effort_cap(text):
    if text in ("auto", "none"):
        return None if text == "none" else "auto"
    return _positive_int(text)


def _common(p, *, out_default):
    p.add_argument("--kernel", default=DEFAULT_KERNEL, choices=KERNELS,
                   help="kernel of the real problems (default: %(default)s)")
    p.add_argument("--rank", type=_positive_int, default=DEFAULT_RANK,
                   help="number of singular triplets r (default: %(default)s)")
    p.add_argument("--center", action=argparse.BooleanOptionalAction, default=True,
                   help="centre the kernel matrix H_N G H_M (default: on)")
    p.add_argument("--threads", type=_positive_int, default=1,
                   help="Numba and BLAS threads, the same for every solver (default: 1, "
                        "which keeps timings steady on a shared machine)")
    p.add_argument("--seed", type=int, default=0,
                   help="root seed; per-run seeds are derived from it and recorded")
    p.add_argument("--out", default=out_default,
                   help="directory for the JSON/CSV (and PNG) outputs (default: %(default)s)")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def build_parser():
    """The argparse parser of ``ksvd-bench`` (all sub-commands)."""
    parser = argparse.ArgumentParser(
        prog="ksvd-bench",
        description="Asymmetric-kernel SVD (KSVD) solvers: benchmark and paper reproduction.",
    )
    sub = parser.add_subparsers(dest="command", metavar="command", required=True)

    c = sub.add_parser(
        "compare", help="race every solver to eta <= eps (the paper's runtime tables)",
        description="Drive every solver (tsvd, rsvd, sym_nystrom, asym_nystrom) to each "
                    "tolerance on each problem; print times, efforts, eta, speedups over RSVD "
                    "and the paper's numbers; write JSON and CSV under --out.")
    c.add_argument("--dataset", nargs="+", default=["cora"], choices=DATASETS,
                   help="problem(s) (default: cora)")
    c.add_argument("--eps", nargs="+", type=_positive_float, default=list(DEFAULT_EPS),
                   help="tolerance(s) on eta (default: 0.1 0.01)")
    c.add_argument("--weights", nargs="+", default=list(DEFAULT_WEIGHTS),
                   choices=DEFAULT_WEIGHTS,
                   help="weighting(s) of eta; singular_values is the paper's, uniform the "
                        "strict one (default: all three)")
    c.add_argument("--seeds", type=_positive_int, default=5,
                   help="seeds per solver; times are medians over seeds (default: 5)")
    c.add_argument("--methods", nargs="+", default=None,
                   choices=_METHODS + ("asym_nystrom_norm",),
                   help="solvers to race (default: all four plus asym_nystrom_norm, asym "
                        "Nystrom with norm sampling)")
    c.add_argument("--max-effort", type=_effort_cap, default="auto",
                   help="cap on every method's effort: an int, 'auto' (Nystrom m <= min(N,M)/4,"
                        " RSVD p <= min(min(N,M)/4, 10 r)) or 'none' (up to m = min(N,M)) "
                        "(default: auto)")
    c.add_argument("--sweep-limit", type=_positive_float, default=20.0,
                   help="wall-clock seconds one effort sweep may take before it stops "
                        "growing the effort; such runs are reported not converged "
                        "(default: %(default)s)")
    c.add_argument("--budget", type=_positive_float, default=3.0,
                   help="seconds per (problem, method, weighting) after which further seeds "
                        "are skipped (default: %(default)s)")
    c.add_argument("--repeats", type=_positive_int, default=1,
                   help="timings per found effort, median (default: 1)")
    c.add_argument("--no-structured", action="store_true",
                   help="skip the exact 'tsvd (structured)' rows")
    c.add_argument("--no-residual", action="store_true",
                   help="skip the residual estimates and the [stop=residual] rows")
    c.add_argument("--size", nargs=2, type=_positive_int, metavar=("N", "M"), default=None,
                   help="shape of the synthetic problem (default: 1500 1200)")
    c.add_argument("--decay", default=None, choices=("exponential", "polynomial", "flat"),
                   help="singular-value decay of the synthetic problem")
    c.add_argument("--coherence", type=float, default=None,
                   help="coherence in [0, 1] of the synthetic problem's singular vectors")
    c.add_argument("--noise", type=float, default=None,
                   help="noise level of the synthetic problem")
    c.add_argument("--cache-dir", default=None,
                   help="reference-SVD cache (default: <out>/reference_cache)")
    _common(c, out_default="results")
    c.set_defaults(func=_run_compare)

    s = sub.add_parser(
        "spectrum", help="asym Nystrom vs RSVD across bandwidths (the spectrum figure)",
        description="For a range of bandwidth factors: the m asym Nystrom needs to reach eps, "
                    "its speedup over RSVD and the leading singular values; PNG + CSV.")
    s.add_argument("--dataset", default="cora", choices=GRAPH_DATASETS,
                   help="graph (default: cora)")
    s.add_argument("--factors", nargs="+", type=_positive_float, default=None,
                   help="bandwidth factors (default: 0.25 0.5 1 2 4)")
    s.add_argument("--eps", type=_positive_float, default=0.1,
                   help="tolerance on eta (default: 0.1)")
    s.add_argument("--weights", default=PAPER_WEIGHTS, choices=DEFAULT_WEIGHTS,
                   help="weighting of eta (default: the paper's)")
    s.add_argument("--seeds", type=_positive_int, default=3, help="seeds (default: 3)")
    s.add_argument("--max-effort", type=_positive_int, default=None,
                   help="cap on the effort (default: the driver's cap)")
    _common(s, out_default="results")
    s.set_defaults(func=_run_spectrum)

    r = sub.add_parser(
        "residual-study", help="the residual estimate of eta against the true eta",
        description="For each graph and solver, over a range of efforts on the exact "
                    "structured kernel operator: the reference-free residual estimate and the "
                    "true eta (all weightings), with a summary per dataset and weighting.")
    r.add_argument("--dataset", nargs="+", default=list(GRAPH_DATASETS),
                   choices=GRAPH_DATASETS, help="graph(s) (default: all three)")
    r.add_argument("--methods", nargs="+", default=None, choices=_METHODS,
                   help="solvers (default: all)")
    r.add_argument("--n-points", type=_positive_int, default=6,
                   help="Nystrom sample sizes per method (default: %(default)s)")
    r.add_argument("--max-samples", type=_positive_int, default=1000,
                   help="largest Nystrom sample size (default: %(default)s)")
    _common(r, out_default="results")
    r.set_defaults(func=_run_residual_study)

    _reproduce_cli.add_parser(sub)
    return parser


def _run_compare(args):
    from ksvd_bench.race.compare import format_compare, run_compare

    options = {}
    if "synthetic" in args.dataset:
        synth = {k: v for k, v in (("decay", args.decay), ("coherence", args.coherence),
                                   ("noise", args.noise)) if v is not None}
        if args.size is not None:
            options["shape"] = tuple(args.size)
        if synth:
            options["synthetic_options"] = synth
        if len(args.dataset) > 1 and options:
            raise SystemExit("ksvd-bench compare: --size/--decay/--coherence/--noise apply to "
                             "--dataset synthetic alone")
    result = run_compare(
        args.dataset, kernel=args.kernel, rank=args.rank, eps=args.eps, weights=args.weights,
        seeds=args.seeds, center=args.center, methods=args.methods,
        structured=not args.no_structured, residual=not args.no_residual,
        max_effort=args.max_effort, budget_seconds=args.budget, repeats=args.repeats,
        sweep_limit=args.sweep_limit,
        threads=args.threads, random_state=args.seed, problem_options=options or None,
        cache_dir=args.cache_dir, out=args.out, progress=not args.no_progress)
    print(format_compare(result))
    for kind, path in result.paths.items():
        print(f"wrote {kind}: {path}")
    return result


def _run_spectrum(args):
    from ksvd_bench.race.spectrum import DEFAULT_FACTORS, format_spectrum, run_spectrum

    result = run_spectrum(
        args.dataset, factors=args.factors or DEFAULT_FACTORS, kernel=args.kernel,
        rank=args.rank, eps=args.eps, weights=args.weights, seeds=args.seeds,
        center=args.center, max_effort=args.max_effort, threads=args.threads,
        random_state=args.seed, out=args.out, progress=not args.no_progress)
    print(format_spectrum(result))
    for kind, path in result.paths.items():
        print(f"wrote {kind}: {path}")
    return result


def _run_residual_study(args):
    import numba

    from ksvd_bench.race.residual_study import (
        run_residual_study,
        summarize_residual_study,
    )
    from ksvd_bench.report import format_table, machine_info, write_csv, write_json

    if args.kernel not in ("sne", "rbf"):
        raise SystemExit("ksvd-bench residual-study: --kernel must be sne or rbf (the study "
                         "runs on the exact structured operator)")
    from threadpoolctl import threadpool_limits

    old = numba.get_num_threads()
    numba.set_num_threads(args.threads)
    try:
        with threadpool_limits(limits=args.threads):
            rows = run_residual_study(
                args.dataset, args.rank, methods=args.methods, kernel=args.kernel,
                center=args.center, n_points=args.n_points, max_samples=args.max_samples,
                random_state=args.seed)
    finally:
        numba.set_num_threads(old)
    summary = summarize_residual_study(rows)
    print(format_table(summary, precision=3,
                       title="residual estimate vs eta (per dataset and weighting)"))
    meta = {"command": "residual-study", "datasets": args.dataset, "rank": args.rank,
            "methods": args.methods, "kernel": args.kernel, "center": args.center,
            "n_points": args.n_points, "max_samples": args.max_samples, "seed": args.seed,
            "threads": args.threads, "machine": machine_info()}
    if args.out:
        paths = [write_json(f"{args.out}/residual_study.json",
                            {"meta": meta, "summary": summary, "rows": rows}),
                 write_csv(f"{args.out}/residual_study.csv", rows),
                 write_csv(f"{args.out}/residual_study_summary.csv", summary)]
        for path in paths:
            print(f"wrote {path}")
    return 0


def main(argv=None):
    """Entry point of the ``ksvd-bench`` console script.

    Parameters
    ----------
    argv : list of str, optional
        Arguments (default ``sys.argv[1:]``).

    Returns
    -------
    int
        Exit status: 0, or the status a ``reproduce`` experiment returns (argument errors
        raise ``SystemExit`` through argparse; other errors propagate).
    """
    parser = build_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    status = args.func(args)
    return status if isinstance(status, int) else 0
