"""The paper's "varying singular spectrum" study: how the bandwidth changes the race.

On a citation graph (Cora by default) the SNE kernel is built for a range of bandwidth factors
(``gamma = factor * sqrt(M * var(A))``). A small bandwidth flattens the spectrum, a large one
makes the top singular value dominate. For each factor we record the leading singular values,
the number of samples ``m`` asym Nystrom needs to reach ``eps``, the oversampling RSVD needs,
and the speedup of asym Nystrom over RSVD (time at the found efforts, median over seeds).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ksvd_bench.race.paper_runtime import DEFAULT_KERNEL, DEFAULT_RANK, PAPER_WEIGHTS
from ksvd_bench.race.problems import (
    GRAPH_DATASETS,
    build_problem,
    problem_from_data,
    quiet_rank_warnings,
)

__all__ = ["DEFAULT_FACTORS", "SpectrumResult", "run_spectrum", "format_spectrum",
           "plot_spectrum"]

DEFAULT_FACTORS = (0.25, 0.5, 1.0, 2.0, 4.0)
#: methods raced at every bandwidth (the paper's figure compares these two)
SPECTRUM_METHODS = ("rsvd", "asym_nystrom")


@dataclass
class SpectrumResult:
    """Outcome of :func:`run_spectrum`.

    Attributes
    ----------
    rows : list of dict
        One row per bandwidth factor: ``factor``, ``gamma``, efforts, times, etas, converged
        flags and ``speedup`` (RSVD time / asym Nystrom time, None unless both converged).
    singular_values : dict
        factor -> the reference's leading singular values (list of float).
    meta : dict
        Settings, seeds, threads, machine info.
    paths : dict
        Files written (``"csv"``, ``"json"``, ``"png"``).
    """

    rows: list
    singular_values: dict
    meta: dict
    paths: dict = field(default_factory=dict)


def run_spectrum(
    dataset="cora",
    *,
    data=None,
    factors=DEFAULT_FACTORS,
    kernel=DEFAULT_KERNEL,
    rank=DEFAULT_RANK,
    eps=0.1,
    weights=PAPER_WEIGHTS,
    seeds=3,
    center=True,
    n_values=None,
    max_effort=None,
    threads=1,
    random_state=0,
    out=None,
    progress=True,
):
    """Race asym Nystrom against RSVD on the same graph at several bandwidths.

    Parameters
    ----------
    dataset : {"cora", "citeseer", "pubmed"} or str, default="cora"
        The graph; with ``data`` given, only the label of the problem.
    data : ndarray or sparse matrix, optional
        A square data matrix to use instead of a bundled graph (e.g. from
        :func:`ksvd_bench.datasets.make_directed_graph`).
    factors : sequence of float, default=(0.25, 0.5, 1, 2, 4)
        Bandwidth factors of the paper's rule.
    kernel : str, default="sne"
    rank : int, default=20
    eps : float, default=0.1
        Tolerance on eta.
    weights : {"singular_values", "relative", "uniform"}, default="singular_values"
        Weighting of eta (the paper's by default).
    seeds : int, default=3
        Seeds per method and factor; times are medians over seeds.
    center : bool, default=True
    n_values : int, optional
        How many leading singular values to keep per factor (default ``rank``).
    max_effort : int, optional
        Effort cap passed to the driver.
    threads : int or None, default=1
        Numba and BLAS threads for both solvers (None: Numba's current count).
    random_state : int, default=0
        Root seed of the per-run seeds.
    out : str or Path, optional
        Directory for ``spectrum.csv``, ``spectrum.json`` and ``spectrum.png``.
    progress : bool, default=True
        tqdm progress bar over factors.

    Returns
    -------
    SpectrumResult
    """
    import numba
    from threadpoolctl import threadpool_limits
    from tqdm.auto import tqdm

    from ksvd_bench.driver import reference_svd, solve_to_tolerance
    from ksvd_bench.metrics import WEIGHTS
    from ksvd_bench.race.compare import (
        _check_positive_int,
        _warm_up,
        seeds_from,
    )
    from ksvd_bench.report import machine_info, write_csv, write_json

    if data is None and dataset not in GRAPH_DATASETS:
        raise ValueError(f"dataset must be one of {GRAPH_DATASETS}, got {dataset!r}")
    factors = [float(f) for f in np.atleast_1d(factors)]
    if not factors or any(not (np.isfinite(f) and f > 0) for f in factors):
        raise ValueError(f"factors must be finite positive numbers, got {factors!r}")
    rank = _check_positive_int(rank, "rank")
    n_seeds = _check_positive_int(seeds, "seeds")
    n_values = rank if n_values is None else _check_positive_int(n_values, "n_values")
    if n_values > rank:
        raise ValueError(f"n_values must be <= rank={rank}, got {n_values}")
    eps = float(eps)
    if not (np.isfinite(eps) and eps > 0):
        raise ValueError(f"eps must be a finite positive number, got {eps!r}")
    if weights not in WEIGHTS:
        raise ValueError(f"weights must be one of {WEIGHTS}, got {weights!r}")
    threads = numba.get_num_threads() if threads is None else _check_positive_int(threads,
                                                                                  "threads")
    run_seeds = seeds_from(random_state, n_seeds)

    rows, svals = [], {}
    old = numba.get_num_threads()
    try:
        numba.set_num_threads(threads)
        with threadpool_limits(limits=threads), quiet_rank_warnings():
            for factor in tqdm(factors, desc="spectrum", disable=not progress, leave=False):
                if data is None:
                    problem = build_problem(dataset, kernel=kernel, center=center,
                                            bandwidth_factor=factor,
                                            random_state=int(random_state))
                else:
                    problem = problem_from_data(data, name=str(dataset), kernel=kernel,
                                                bandwidth_factor=factor, center=center,
                                                random_state=int(random_state))
                G = problem.G
                t0 = time.perf_counter()
                reference = reference_svd(G, rank)
                ref_seconds = time.perf_counter() - t0
                svals[factor] = np.asarray(reference.s[:n_values], dtype=float).tolist()
                _warm_up(G, rank, SPECTRUM_METHODS)
                row = {"factor": factor, "gamma": problem.gamma,
                       "kernel_seconds": problem.kernel_seconds,
                       "reference_seconds_not_charged": ref_seconds,
                       "s1": svals[factor][0],
                       "s2_over_s1": reference.s[1] / reference.s[0] if rank > 1 else None,
                       "s_r_over_s1": reference.s[rank - 1] / reference.s[0]}
                for method in SPECTRUM_METHODS:
                    results = [solve_to_tolerance(G, rank, method, eps, reference=reference,
                                                  weights=weights, random_state=seed,
                                                  max_effort=max_effort, track_residual=False)
                               for seed in run_seeds]
                    ok = all(r.converged for r in results)
                    row[f"{method}_converged"] = ok
                    row[f"{method}_effort"] = (int(statistics.median(r.effort for r in results))
                                               if ok else max(r.effort for r in results))
                    row[f"{method}_seconds"] = (statistics.median(r.seconds for r in results)
                                                if ok else None)
                    row[f"{method}_eta"] = (statistics.median(r.eta for r in results) if ok
                                            else min(r.eta for r in results))
                a, b = row["rsvd_seconds"], row["asym_nystrom_seconds"]
                row["speedup"] = a / b if (a is not None and b) else None
                rows.append(row)
    finally:
        numba.set_num_threads(old)

    meta = {"command": "spectrum", "dataset": dataset, "kernel": kernel, "rank": rank,
            "eps": eps, "weights": weights, "center": bool(center), "factors": factors,
            "n_seeds": n_seeds, "seeds": run_seeds, "random_state": int(random_state),
            "max_effort": max_effort, "threads": threads, "dtype": "float64",
            "machine": machine_info()}
    result = SpectrumResult(rows=rows, singular_values=svals, meta=meta)
    if out is not None:
        out = Path(out)
        csv_rows = [{**r, **{f"s{i + 1}": v for i, v in enumerate(svals[r["factor"]])}}
                    for r in rows]
        result.paths = {
            "csv": str(write_csv(out / "spectrum.csv", csv_rows)),
            "json": str(write_json(out / "spectrum.json",
                                   {"meta": meta, "rows": rows,
                                    "singular_values": {str(k): v for k, v in svals.items()}})),
            "png": str(plot_spectrum(result, out / "spectrum.png")),
        }
    return result


def format_spectrum(result, *, precision=3):
    """Terminal text: the race per bandwidth, then the leading singular values per bandwidth."""
    from ksvd_bench.report import format_table

    meta = result.meta
    cols = [("factor", "factor"), ("gamma", "gamma"), ("s2_over_s1", "s2/s1"),
            ("s_r_over_s1", "s_r/s1"), ("asym_nystrom_effort", "m"),
            ("asym_nystrom_seconds", "asym s"), ("asym_nystrom_eta", "asym eta"),
            ("rsvd_effort", "rsvd p"), ("rsvd_seconds", "rsvd s"), ("speedup", "speedup")]
    title = (f"{meta['dataset']}: asym Nystrom vs RSVD to eta <= {meta['eps']:g} "
             f"({meta['weights']} weights, r={meta['rank']}, {meta['n_seeds']} seeds, "
             f"threads={meta['threads']}); '-' = not converged")
    race = format_table(result.rows, cols, precision=precision, title=title)
    k = len(next(iter(result.singular_values.values())))
    sv_rows = [{"factor": f, **{f"s{i + 1}": v for i, v in enumerate(s)}}
               for f, s in result.singular_values.items()]
    shown = ["factor"] + [f"s{i + 1}" for i in range(min(k, 8))]
    sv = format_table(sv_rows, shown, precision=4,
                      title=f"leading singular values per bandwidth factor (first {len(shown) - 1}"
                            f" of {k})")
    return race + "\n\n" + sv


def plot_spectrum(result, path):
    """Save the figure: normalised spectra (left), samples needed and speedup (right)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    for factor, s in result.singular_values.items():
        s = np.asarray(s)
        ax1.semilogy(np.arange(1, s.size + 1), s / s[0], marker=".", label=f"factor {factor:g}")
    ax1.set_xlabel("index i")
    ax1.set_ylabel("sigma_i / sigma_1")
    ax1.set_title("singular spectrum")
    ax1.legend(fontsize=8)
    f = [r["factor"] for r in result.rows]
    m = [r["asym_nystrom_effort"] if r["asym_nystrom_converged"] else np.nan
         for r in result.rows]
    sp_ = [np.nan if r["speedup"] is None else r["speedup"] for r in result.rows]
    ax2.semilogx(f, m, "o-", color="C0", label="m needed (asym Nystrom)")
    ax2.set_xlabel("bandwidth factor")
    ax2.set_ylabel("m needed", color="C0")
    ax3 = ax2.twinx()
    ax3.semilogx(f, sp_, "s--", color="C1", label="speedup vs RSVD")
    ax3.set_ylabel("speedup vs RSVD", color="C1")
    # label the factors themselves: log-axis minor labels collide on a short range
    ax2.set_xticks(f, [f"{x:g}" for x in f])
    ax2.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax2.set_title(f"eta <= {result.meta['eps']:g} ({result.meta['weights']})")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
