"""``ksvd-bench reproduce <experiment>``: thin argument parsing around the experiments.

Each sub-command runs one experiment, prints our table beside the paper's, and writes
``<out>/<experiment>.csv`` and ``.json`` (rows, protocol, command, machine) and, for the
Nystrom figure, ``nystrom_f1.png``. ``--quick`` selects a small configuration (fewer runs,
components, samples) that finishes in a few minutes on a shared 2-core machine.

Every argument is checked before any work starts: argparse refuses malformed values (``--runs 0``,
``--m-grid 10,x``, unknown ``--datasets``), and a pre-flight step refuses settings that only the
data can rule out (a ``--subsample`` too small to split, an ``--out`` that cannot be written),
each with a message that names the flag.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

from ksvd_bench.cliargs import Parser
from ksvd_bench.datasets import load_graph
from ksvd_bench.report import format_table, machine_info, write_csv, write_json

EXPERIMENTS = (
    "node-classification",
    "graph-reconstruction",
    "uci",
    "ablation",
    "nystrom-f1",
    "asymmetry",
)

_GRAPHS = ("cora", "citeseer", "pubmed")
_TABLES = ("diabetes", "ionosphere", "liver", "cholesterol", "yacht")
_GRAPH_EXPERIMENTS = ("node-classification", "graph-reconstruction", "nystrom-f1")
#: test share and CV folds of the node-classification protocol (the pre-flight checks them)
_TEST_SIZE = 0.1
_CV_FOLDS = 10
#: the smallest --subsample: the embeddings need r = N // 2 - 1 >= 1 component
_MIN_SUBSAMPLE = 4


# ------------------------------------------------------------------ argparse value types
def _int_at_least(minimum):
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected an integer >= {minimum}, got {text!r}"
            ) from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {value}")
        return value

    return parse


def _positive_float(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"expected a finite positive number, got {text!r}")
    return value


def _name_in(allowed):
    def parse(text):
        key = text.strip().lower()
        if key not in allowed:
            raise argparse.ArgumentTypeError(
                f"unknown dataset {text!r}; valid names are {', '.join(allowed)}"
            )
        return key

    return parse


def _csv_list(kind):
    """A comma-separated, non-empty list whose every item passes ``kind``."""

    def parse(text):
        items = [x.strip() for x in text.split(",") if x.strip()]
        if not items:
            raise argparse.ArgumentTypeError(f"expected a comma-separated list, got {text!r}")
        return tuple(kind(x) for x in items)

    return parse


def _out_dir(text):
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a directory path, got an empty string")
    return text


# ------------------------------------------------------------------ pre-flight checks
def _usage_error(args, flag, message):
    """Exit as argparse does for a bad value (status 2, the flag named)."""
    print(
        f"ksvd-bench reproduce {args.experiment}: error: argument {flag}: {message}",
        file=sys.stderr,
    )
    raise SystemExit(2)


def _check_out(args):
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        _usage_error(args, "--out", f"cannot create directory {str(out)!r}: {exc.strerror}")
    if not os.access(out, os.W_OK | os.X_OK):
        _usage_error(args, "--out", f"directory {str(out)!r} is not writable")


def _check_subsample(args, name):
    """Refuse a --subsample whose nodes have no edge, or cannot be split as the protocol needs."""
    if getattr(args, "subsample", None) is None:
        return

    # start-up: the experiments load scikit-learn, and --help must not
    from ksvd_bench.paper.node_classification import check_has_edges, check_labels_splittable

    cv_folds = _CV_FOLDS if name == "node-classification" else None
    for dataset in args.datasets:
        graph = load_graph(dataset)
        keep = slice(0, args.subsample)
        try:
            check_has_edges(graph.adjacency[keep, keep])
            if name != "graph-reconstruction":
                labels = np.asarray(graph.labels)[keep]
                check_labels_splittable(labels, test_size=_TEST_SIZE, cv_folds=cv_folds)
        except ValueError as exc:
            _usage_error(
                args, "--subsample", f"{args.subsample} nodes of {dataset} are too few: {exc}"
            )


def _preflight(name, args):
    _check_out(args)
    if name in _GRAPH_EXPERIMENTS:
        _check_subsample(args, name)


# ------------------------------------------------------------------ output
def _save(args, name, result, title, columns, precision=3, notes=()):
    out = Path(args.out)
    write_csv(out / f"{name}.csv", result["rows"])
    payload = dict(
        result,
        command=" ".join(["ksvd-bench"] + sys.argv[1:]),
        seconds=result.get("seconds"),
        machine=machine_info(),
    )
    write_json(out / f"{name}.json", payload)
    print(format_table(result["rows"], columns, precision=precision, title=title))
    for line in notes:
        print(f"note: {line}")
    print(f"[{name}] {result['seconds']:.1f} s; wrote {out / (name + '.csv')} and .json")


def _timed(fn, **kwargs):
    t0 = time.perf_counter()
    result = fn(**kwargs)
    result["seconds"] = time.perf_counter() - t0
    return result


# ------------------------------------------------------------------ experiments
def _run_node_classification(args):
    # start-up: the experiments load scikit-learn, and --help must not
    from ksvd_bench.paper.node_classification import (
        BANDWIDTH_GRID,
        format_chance_levels,
        run_node_classification,
    )

    _preflight("node-classification", args)
    quick = args.quick
    kwargs = dict(
        datasets=args.datasets,
        n_components=args.n_components or (32 if quick else 256),
        n_components_large=args.n_components or 16,
        n_runs=args.runs or (3 if quick else 10),
        test_size=_TEST_SIZE,
        cv_folds=_CV_FOLDS,
        bandwidth_grid=args.grid or ((0.5, 1.0, 2.0, 4.0, 8.0) if quick else BANDWIDTH_GRID),
        feature_mode=args.feature_mode,
        standardize=args.standardize,
        subsample=args.subsample,
        progress=not args.no_progress,
        random_state=args.seed,
    )
    result = _timed(run_node_classification, **kwargs)
    _save(
        args,
        "node_classification",
        result,
        "Node classification (RidgeClassifier alpha=1): ours vs paper (Table 1)",
        [
            "dataset",
            "method",
            "n_features",
            "micro",
            "micro_std",
            "paper_micro",
            "macro",
            "macro_std",
            "paper_macro",
            "factors",
            "note",
        ],
        notes=format_chance_levels(result),
    )
    return 0


def _run_graph_reconstruction(args):
    # start-up: the experiments load scikit-learn, and --help must not
    from ksvd_bench.paper.graph_reconstruction import run_graph_reconstruction

    _preflight("graph-reconstruction", args)
    kwargs = dict(
        datasets=args.datasets,
        n_components=args.n_components or (32 if args.quick else 64),
        scale=args.scale,
        subsample=args.subsample,
        progress=not args.no_progress,
        random_state=args.seed,
    )
    result = _timed(run_graph_reconstruction, **kwargs)
    _save(
        args,
        "graph_reconstruction",
        result,
        "Graph reconstruction: induced 1-norm / spectral norm of A - A_hat vs paper (Table 2)",
        [
            "dataset",
            "method",
            "l1",
            "paper_l1",
            "l2",
            "paper_l2",
            "missing",
            "spurious",
            "n_diff",
            "note",
        ],
        precision=1,
    )
    return 0


def _run_uci(args):
    # start-up: the experiments load scikit-learn, and --help must not
    from ksvd_bench.paper.uci import run_uci

    _preflight("uci", args)
    result = _timed(
        run_uci,
        datasets=args.datasets,
        n_runs=args.runs or (3 if args.quick else 10),
        progress=not args.no_progress,
        random_state=args.seed,
    )
    _save(
        args,
        "uci",
        result,
        "UCI: KPCA vs KSVD (4 features, linear model) vs paper",
        ["dataset", "metric", "method", "value", "std", "paper"],
    )
    return 0


def _run_ablation(args):
    # start-up: the experiments load scikit-learn, and --help must not
    from ksvd_bench.paper.ablation import run_ablation

    _preflight("ablation", args)
    result = _timed(
        run_ablation,
        datasets=args.datasets,
        n_runs=args.runs or (3 if args.quick else 10),
        progress=not args.no_progress,
        random_state=args.seed,
    )
    _save(
        args,
        "ablation",
        result,
        "Ablation: poly-2 features + SVD vs KSVD poly-2 vs paper",
        ["dataset", "metric", "method", "value", "std", "paper"],
        precision=4,
    )
    return 0


def _run_nystrom_f1(args):
    # start-up: the experiments load scikit-learn, and --help must not
    from ksvd_bench.paper.node_classification import format_chance_levels
    from ksvd_bench.paper.nystrom_f1 import plot_f1_vs_m, run_nystrom_f1

    _preflight("nystrom-f1", args)
    quick = args.quick
    result = _timed(
        run_nystrom_f1,
        datasets=args.datasets,
        m_grid=args.m_grid or ((50, 100, 200) if quick else (50, 100, 200, 500, 1000)),
        n_components=args.n_components or (16 if quick else 50),
        n_runs=args.runs or (3 if quick else 10),
        test_size=_TEST_SIZE,
        standardize=args.standardize,
        subsample=args.subsample,
        progress=not args.no_progress,
        random_state=args.seed,
    )
    _save(
        args,
        "nystrom_f1",
        result,
        "F1 vs m: KSVD asym Nystrom vs KPCA sym Nystrom (RBF)",
        [
            "dataset",
            "method",
            "m",
            "n_features",
            "micro",
            "micro_std",
            "macro",
            "macro_std",
            "seconds",
            "note",
        ],
        notes=format_chance_levels(result),
    )
    png = plot_f1_vs_m(result, Path(args.out) / "nystrom_f1.png")
    print(f"[nystrom_f1] wrote {png}")
    return 0


def _run_asymmetry(args):
    # start-up: the experiments load scikit-learn, and --help must not
    from ksvd_bench.paper.asymmetry import NOT_COMPARABLE, PAPER_COLUMN, run_asymmetry

    _preflight("asymmetry", args)
    result = _timed(
        run_asymmetry, datasets=args.datasets, progress=not args.no_progress, random_state=args.seed
    )
    _save(
        args,
        "asymmetry",
        result,
        "Asymmetry: KDE KL between rows and a1-projected columns",
        [
            "dataset",
            "n_rows",
            "n_cols",
            "kl_rows",
            "kl_cols",
            "kl_rows_sum",
            "kl_cols_sum",
            ("paper", PAPER_COLUMN),
        ],
        precision=2,
        notes=[f"{PAPER_COLUMN}: {NOT_COMPARABLE}"],
    )
    return 0


_RUNNERS = {
    "node-classification": _run_node_classification,
    "graph-reconstruction": _run_graph_reconstruction,
    "uci": _run_uci,
    "ablation": _run_ablation,
    "nystrom-f1": _run_nystrom_f1,
    "asymmetry": _run_asymmetry,
}


def _sub_namespace(args, name):
    sub = argparse.Namespace(**vars(args))
    sub.datasets = _TABLES if name in ("uci", "ablation", "asymmetry") else _GRAPHS
    if name == "nystrom-f1" and args.quick:
        sub.datasets = ("cora", "citeseer")
    return sub


def _run_all(args):
    subs = {name: _sub_namespace(args, name) for name in EXPERIMENTS}
    # every setting is checked before the first experiment's minutes of work
    for name, sub in subs.items():
        _preflight(name, sub)
    status = 0
    for name, sub in subs.items():
        status |= _RUNNERS[name](sub)
    return status


# ------------------------------------------------------------------ parsers
def _common(p, datasets, allowed):
    p.add_argument(
        "--out",
        type=_out_dir,
        default="results/reproduce",
        help="output directory (created if missing)",
    )
    p.add_argument(
        "--quick", action="store_true", help="small configuration (fewer runs/components/samples)"
    )
    p.add_argument(
        "--seed",
        type=_int_at_least(0),
        default=0,
        help="random_state of the experiment (an integer >= 0)",
    )
    p.add_argument(
        "--runs", type=_int_at_least(1), default=None, help="number of random splits (>= 1)"
    )
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    if datasets is not None:
        p.add_argument(
            "--datasets",
            type=_csv_list(_name_in(allowed)),
            default=datasets,
            help=f"comma-separated, default {','.join(datasets)}",
        )


def _subsample_flag(p):
    p.add_argument(
        "--subsample",
        type=_int_at_least(_MIN_SUBSAMPLE),
        default=None,
        help=f"keep the first n nodes (n >= {_MIN_SUBSAMPLE}, and enough nodes of "
        "every class for a stratified split)",
    )


def add_parser(subparsers):
    """Add the ``reproduce`` command and its sub-commands to an argparse ``subparsers``.

    Each leaf parser sets ``func`` (called with the parsed namespace, returns an exit code).
    """
    rep = subparsers.add_parser(
        "reproduce",
        help="reproduce the paper's feature-learning tables and figures",
        description="Run one of the paper's feature-learning experiments (or all of them), "
        "print our table beside the paper's, and write <out>/<experiment>.csv and "
        ".json (rows, protocol, command, machine). --quick picks a small "
        "configuration that finishes in minutes on 2 cores. See REPRODUCTION.md.",
    )
    sub = rep.add_subparsers(dest="experiment", required=True, metavar="experiment")
    components = _int_at_least(1)

    p = sub.add_parser(
        "node-classification",
        help="Table 1: node classification F1",
        description="Table 1: KSVD embeddings of the directed citation graphs (SNE kernel of "
        "the adjacency matrix) against SVD, PCA and KPCA features, classified by a "
        "RidgeClassifier (alpha=1) on random splits; the bandwidth is chosen by "
        "10-fold CV on the training part. Micro and macro F1, mean and std over "
        "--runs, beside the paper's numbers and the chance levels.",
    )
    _common(p, _GRAPHS, _GRAPHS)
    p.add_argument(
        "--n-components",
        type=components,
        default=None,
        help="embedding dimension per side, >= 1 (default 256, quick 32; PubMed 16)",
    )
    p.add_argument(
        "--grid",
        type=_csv_list(_positive_float),
        default=None,
        help="bandwidth factors (> 0) searched by 10-fold CV",
    )
    p.add_argument(
        "--feature-mode",
        default="uv",
        choices=("u", "us", "uv", "usvs"),
        help="which KSVD factors make a node's features: u (left singular "
        "vectors), us (U scaled by the singular values), uv (U and V side by "
        "side, the paper's), usvs (both scaled) (default: %(default)s)",
    )
    p.add_argument("--standardize", action="store_true", help="standardise features first")
    _subsample_flag(p)
    p.set_defaults(func=_run_node_classification)

    p = sub.add_parser(
        "graph-reconstruction",
        help="Table 2: graph reconstruction",
        description="Table 2: reconstruct the adjacency matrix from the rank-r embeddings "
        "(PCA, KPCA, SVD and KSVD) and report the induced "
        "1-norm and spectral norm of A - A_hat, missing and spurious edges, beside "
        "the paper's numbers.",
    )
    _common(p, _GRAPHS, _GRAPHS)
    p.add_argument(
        "--n-components", type=components, default=None, help=">= 1, default 64, quick 32"
    )
    p.add_argument(
        "--scale",
        default="u",
        choices=("u", "us", "sqrt"),
        help="how the embeddings are scaled before the reconstruction: u (vectors "
        "only), us (by the singular values), sqrt (by their square roots) "
        "(default: %(default)s)",
    )
    _subsample_flag(p)
    p.set_defaults(func=_run_graph_reconstruction)

    p = sub.add_parser(
        "uci",
        help="UCI table: KPCA vs KSVD (a0/a1/a2)",
        description="The UCI table: four features from KPCA and from KSVD with the paper's "
        "compatibility maps a0, a1, a2, fed to a linear model on five tables; the "
        "metric per table (accuracy or error), mean and std over --runs, beside "
        "the paper's.",
    )
    _common(p, _TABLES, _TABLES)
    p.set_defaults(func=_run_uci)

    p = sub.add_parser(
        "ablation",
        help="degree-2 polynomial ablation",
        description="The ablation: explicit degree-2 polynomial features followed by an SVD "
        "against KSVD with the degree-2 polynomial kernel, on the UCI tables, "
        "beside the paper's numbers.",
    )
    _common(p, _TABLES, _TABLES)
    p.set_defaults(func=_run_ablation)

    p = sub.add_parser(
        "nystrom-f1",
        help="F1 vs m figure (PNG + CSV)",
        description="The Nystrom figure: node-classification F1 of KSVD features from "
        "asymmetric Nystrom against KPCA features from symmetric Nystrom (RBF "
        "kernel), as the number of samples m grows; writes nystrom_f1.png beside "
        "the CSV and JSON.",
    )
    _common(p, _GRAPHS, _GRAPHS)
    p.add_argument(
        "--m-grid",
        type=_csv_list(_int_at_least(2)),
        default=None,
        help="Nystrom sample sizes, each >= 2; one above a graph's node count runs "
        "at the node count (noted in its row)",
    )
    p.add_argument(
        "--n-components",
        type=components,
        default=None,
        help="r >= 1, capped at m // 2; each method gets 2r features (default 50, quick 16)",
    )
    p.add_argument("--standardize", action="store_true", help="standardise features first")
    _subsample_flag(p)
    p.set_defaults(func=_run_nystrom_f1)

    p = sub.add_parser(
        "asymmetry",
        help="KL asymmetry of the UCI tables",
        description="How asymmetric each UCI table is: the KL divergence between kernel "
        "density estimates of the rows and of the a1-projected columns (the "
        "paper's column is printed beside ours, with why they are not "
        "comparable).",
    )
    _common(p, _TABLES, _TABLES)
    p.set_defaults(func=_run_asymmetry)

    p = sub.add_parser(
        "all",
        help="every experiment above",
        description="Every experiment above, in order, each on its default datasets; every "
        "setting is checked before the first experiment starts.",
    )
    _common(p, None, None)
    p.add_argument(
        "--n-components",
        type=components,
        default=None,
        help="embedding dimension (>= 1) for every experiment that has one "
        "(node-classification, graph-reconstruction, nystrom-f1); default: "
        "each experiment's own",
    )
    _subsample_flag(p)
    p.set_defaults(
        func=_run_all, grid=None, feature_mode="uv", standardize=False, scale="u", m_grid=None
    )
    return rep


def main(argv=None):
    """Run ``reproduce`` standalone: ``python -m ksvd_bench.paper.cli``."""
    parser = Parser(prog="ksvd-bench")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
