"""``ksvd-bench reproduce <experiment>``: thin argument parsing around the experiments.

Each sub-command runs one experiment, prints our table beside the paper's, and writes
``<out>/<experiment>.csv`` and ``.json`` (rows, protocol, command, machine) and, for the
Nystrom figure, ``nystrom_f1.png``. ``--quick`` selects a small configuration (fewer runs,
components, samples) that finishes in a few minutes on a shared 2-core machine.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

EXPERIMENTS = (
    "node-classification",
    "graph-reconstruction",
    "uci",
    "ablation",
    "nystrom-f1",
    "asymmetry",
)


def _csv_list(kind):
    def parse(text):
        return tuple(kind(x) for x in text.split(",") if x)

    return parse


def _save(args, name, result, title, columns, precision=3):
    from ksvd_bench.report import format_table, machine_info, write_csv, write_json

    out = Path(args.out)
    write_csv(out / f"{name}.csv", result["rows"])
    payload = dict(result, command=" ".join(["ksvd-bench"] + sys.argv[1:]),
                   seconds=result.get("seconds"), machine=machine_info())
    write_json(out / f"{name}.json", payload)
    print(format_table(result["rows"], columns, precision=precision, title=title))
    print(f"[{name}] {result['seconds']:.1f} s; wrote {out / (name + '.csv')} and .json")


def _timed(fn, **kwargs):
    t0 = time.perf_counter()
    result = fn(**kwargs)
    result["seconds"] = time.perf_counter() - t0
    return result


def _run_node_classification(args):
    from ksvd_bench.paper.node_classification import (
        BANDWIDTH_GRID,
        run_node_classification,
    )

    quick = args.quick
    kwargs = dict(
        datasets=args.datasets,
        n_components=args.n_components or (32 if quick else 256),
        n_components_large=args.n_components or 16,
        n_runs=args.runs or (3 if quick else 10),
        bandwidth_grid=args.grid or ((0.5, 1.0, 2.0, 4.0, 8.0) if quick else BANDWIDTH_GRID),
        feature_mode=args.feature_mode,
        standardize=args.standardize,
        subsample=args.subsample,
        progress=not args.no_progress,
        random_state=args.seed,
    )
    result = _timed(run_node_classification, **kwargs)
    _save(args, "node_classification", result,
          "Node classification (RidgeClassifier alpha=1): ours vs paper (Table 1)",
          ["dataset", "method", "n_features", "micro", "micro_std", "paper_micro", "macro",
           "macro_std", "paper_macro", "factors", "note"])
    return 0


def _run_graph_reconstruction(args):
    from ksvd_bench.paper.graph_reconstruction import run_graph_reconstruction

    kwargs = dict(
        datasets=args.datasets,
        n_components=args.n_components or (32 if args.quick else 64),
        scale=args.scale,
        subsample=args.subsample,
        progress=not args.no_progress,
        random_state=args.seed,
    )
    result = _timed(run_graph_reconstruction, **kwargs)
    _save(args, "graph_reconstruction", result,
          "Graph reconstruction: induced 1-norm / spectral norm of A - A_hat vs paper (Table 2)",
          ["dataset", "method", "l1", "paper_l1", "l2", "paper_l2", "missing", "spurious",
           "n_diff", "note"], precision=1)
    return 0


def _run_uci(args):
    from ksvd_bench.paper.uci import run_uci

    result = _timed(run_uci, datasets=args.datasets, n_runs=args.runs or (3 if args.quick
                                                                           else 10),
                    progress=not args.no_progress, random_state=args.seed)
    _save(args, "uci", result, "UCI: KPCA vs KSVD (4 features, linear model) vs paper",
          ["dataset", "metric", "method", "value", "std", "paper"])
    return 0


def _run_ablation(args):
    from ksvd_bench.paper.ablation import run_ablation

    result = _timed(run_ablation, datasets=args.datasets,
                    n_runs=args.runs or (3 if args.quick else 10),
                    progress=not args.no_progress, random_state=args.seed)
    _save(args, "ablation", result, "Ablation: poly-2 features + SVD vs KSVD poly-2 vs paper",
          ["dataset", "metric", "method", "value", "std", "paper"], precision=4)
    return 0


def _run_nystrom_f1(args):
    from ksvd_bench.paper.nystrom_f1 import plot_f1_vs_m, run_nystrom_f1

    quick = args.quick
    result = _timed(
        run_nystrom_f1,
        datasets=args.datasets,
        m_grid=args.m_grid or ((50, 100, 200) if quick else (50, 100, 200, 500, 1000)),
        n_components=args.n_components or (16 if quick else 50),
        n_runs=args.runs or (3 if quick else 10),
        standardize=args.standardize,
        subsample=args.subsample,
        progress=not args.no_progress,
        random_state=args.seed,
    )
    _save(args, "nystrom_f1", result, "F1 vs m: KSVD asym Nystrom vs KPCA sym Nystrom (RBF)",
          ["dataset", "method", "m", "n_features", "micro", "micro_std", "macro", "macro_std",
           "seconds"])
    png = plot_f1_vs_m(result, Path(args.out) / "nystrom_f1.png")
    print(f"[nystrom_f1] wrote {png}")
    return 0


def _run_asymmetry(args):
    from ksvd_bench.paper.asymmetry import run_asymmetry

    result = _timed(run_asymmetry, datasets=args.datasets, progress=not args.no_progress,
                    random_state=args.seed)
    _save(args, "asymmetry", result, "Asymmetry: KDE KL between rows and a1-projected columns",
          ["dataset", "n_rows", "n_cols", "kl_rows", "kl_cols", "kl_rows_sum", "kl_cols_sum",
           "paper"], precision=2)
    return 0


_RUNNERS = {
    "node-classification": _run_node_classification,
    "graph-reconstruction": _run_graph_reconstruction,
    "uci": _run_uci,
    "ablation": _run_ablation,
    "nystrom-f1": _run_nystrom_f1,
    "asymmetry": _run_asymmetry,
}

_GRAPHS = ("cora", "citeseer", "pubmed")
_TABLES = ("diabetes", "ionosphere", "liver", "cholesterol", "yacht")


def _run_all(args):
    status = 0
    for name in EXPERIMENTS:
        sub = argparse.Namespace(**vars(args))
        sub.datasets = _TABLES if name in ("uci", "ablation", "asymmetry") else _GRAPHS
        if name == "nystrom-f1" and args.quick:
            sub.datasets = ("cora", "citeseer")
        status |= _RUNNERS[name](sub)
    return status


def _common(p, datasets):
    p.add_argument("--out", default="results/reproduce", help="output directory")
    p.add_argument("--quick", action="store_true",
                   help="small configuration (fewer runs/components/samples)")
    p.add_argument("--seed", type=int, default=0, help="random_state of the experiment")
    p.add_argument("--runs", type=int, default=None, help="number of random splits")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    if datasets is not None:
        p.add_argument("--datasets", type=_csv_list(str), default=datasets,
                       help=f"comma-separated, default {','.join(datasets)}")


def add_parser(subparsers):
    """Add the ``reproduce`` command and its sub-commands to an argparse ``subparsers``.

    Each leaf parser sets ``func`` (called with the parsed namespace, returns an exit code).
    """
    rep = subparsers.add_parser("reproduce", help="reproduce the paper's feature-learning "
                                "tables and figures")
    sub = rep.add_subparsers(dest="experiment", required=True)

    p = sub.add_parser("node-classification", help="Table 1: node classification F1")
    _common(p, _GRAPHS)
    p.add_argument("--n-components", type=int, default=None,
                   help="embedding dimension per side (default 256, quick 32; PubMed 16)")
    p.add_argument("--grid", type=_csv_list(float), default=None,
                   help="bandwidth factors searched by 10-fold CV")
    p.add_argument("--feature-mode", default="uv", choices=("u", "us", "uv", "usvs"))
    p.add_argument("--standardize", action="store_true", help="standardise features first")
    p.add_argument("--subsample", type=int, default=None, help="keep the first n nodes")
    p.set_defaults(func=_run_node_classification)

    p = sub.add_parser("graph-reconstruction", help="Table 2: graph reconstruction")
    _common(p, _GRAPHS)
    p.add_argument("--n-components", type=int, default=None, help="default 64, quick 32")
    p.add_argument("--scale", default="u", choices=("u", "us", "sqrt"))
    p.add_argument("--subsample", type=int, default=None)
    p.set_defaults(func=_run_graph_reconstruction)

    p = sub.add_parser("uci", help="UCI table: KPCA vs KSVD (a0/a1/a2)")
    _common(p, _TABLES)
    p.set_defaults(func=_run_uci)

    p = sub.add_parser("ablation", help="degree-2 polynomial ablation")
    _common(p, _TABLES)
    p.set_defaults(func=_run_ablation)

    p = sub.add_parser("nystrom-f1", help="F1 vs m figure (PNG + CSV)")
    _common(p, _GRAPHS)
    p.add_argument("--m-grid", type=_csv_list(int), default=None)
    p.add_argument("--n-components", type=int, default=None, help="default 50, quick 16")
    p.add_argument("--standardize", action="store_true", help="standardise features first")
    p.add_argument("--subsample", type=int, default=None)
    p.set_defaults(func=_run_nystrom_f1)

    p = sub.add_parser("asymmetry", help="KL asymmetry of the UCI tables")
    _common(p, _TABLES)
    p.set_defaults(func=_run_asymmetry)

    p = sub.add_parser("all", help="every experiment above")
    _common(p, None)
    for flag in ("--n-components", "--subsample"):
        p.add_argument(flag, type=int, default=None)
    p.set_defaults(func=_run_all, grid=None, feature_mode="uv", standardize=False, scale="u",
                   m_grid=None)
    return rep


def main(argv=None):
    """Run ``reproduce`` standalone: ``python -m ksvd_bench.paper._reproduce_cli``."""
    parser = argparse.ArgumentParser(prog="ksvd-bench")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
