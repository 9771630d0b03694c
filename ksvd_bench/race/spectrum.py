"""The paper's "varying singular spectrum" study: how the bandwidth changes the race.

On a citation graph (Cora by default) the SNE kernel is built for a range of bandwidth factors
(``gamma = factor * sqrt(M * var(A))``). A small bandwidth flattens the spectrum, a large one
makes the top singular value dominate. For each factor we record the leading singular values,
the number of samples ``m`` asym Nystrom needs to reach ``eps``, the oversampling RSVD needs,
and the speedup of asym Nystrom over RSVD (time at the found efforts, median over seeds).

The measure is eta under the strict uniform weighting by default. Where the tolerance is
vacuous (every answer meets it: on a centred SNE kernel the paper's eta, ``--measure
singular_values``, is at most ``2 mean(sigma)``, a few thousandths) the speedup means nothing;
the table and the figure mark those factors, as ``compare`` does.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ksvd_bench.driver import reference_svd, solve_to_tolerance
from ksvd_bench.metrics import CLUSTER_RTOL, lowrank_error
from ksvd_bench.race.common import (
    driver_options,
    exact_operator,
    measure_bound,
    meets,
    num,
    ratio_text,
    seeds_from,
    status_of,
    verdict,
    warm_up,
)
from ksvd_bench.race.paper_runtime import DEFAULT_KERNEL, DEFAULT_RANK, MEASURES, STRICT_WEIGHTS
from ksvd_bench.race.problems import (
    GRAPH_DATASETS,
    build_problem,
    problem_from_data,
)
from ksvd_bench.report import (
    check_out_dir,
    format_table,
    machine_info,
    progress_bar,
    save_figure,
    wrap_note,
    write_csv,
    write_json,
)
from ksvd_bench.threads import check_threads, solver_threads
from solvers import check_int

__all__ = [
    "DEFAULT_FACTORS",
    "SpectrumResult",
    "run_spectrum",
    "format_spectrum",
    "plot_spectrum",
    "write_spectrum_files",
]

DEFAULT_FACTORS = (0.25, 0.5, 1.0, 2.0, 4.0)
#: methods raced at every bandwidth (the paper's figure compares these two)
SPECTRUM_METHODS = ("rsvd", "asym_nystrom")


@dataclass(repr=False)
class SpectrumResult:
    """Outcome of :func:`run_spectrum`.

    Attributes
    ----------
    rows : list of dict
        One row per bandwidth factor: ``factor``, ``gamma``, efforts, times, values of the
        measure, the low-rank error of each answer, converged flags, ``value_max`` (the most
        any answer can score), ``vacuous`` (``value_max <= eps``: every answer meets eps) and
        ``speedup`` (RSVD time / asym Nystrom time, None unless both converged).
    singular_values : dict
        factor -> the reference's leading singular values (list of float).
    meta : dict
        Settings, seeds, threads used, machine info.
    paths : dict
        Files written (``"csv"``, ``"json"``, ``"png"``).
    """

    rows: list
    singular_values: dict
    meta: dict
    paths: dict = field(default_factory=dict)

    def __repr__(self):
        m = self.meta
        n_vac = sum(bool(r["vacuous"]) for r in self.rows)
        return (
            f"SpectrumResult(dataset={m.get('dataset')!r}, factors={m.get('factors')}, "
            f"eps={m.get('eps')}, measure={m.get('measure')!r}, rows={len(self.rows)} "
            f"({n_vac} vacuous), paths={sorted(self.paths)})"
        )


def _check_arguments(dataset, data, factors, rank, seeds, n_values, eps, weights):
    if data is None and dataset not in GRAPH_DATASETS:
        raise ValueError(f"dataset must be one of {GRAPH_DATASETS}, got {dataset!r}")
    factors = [float(f) for f in np.atleast_1d(factors)]
    if not factors or any(not (np.isfinite(f) and f > 0) for f in factors):
        raise ValueError(f"factors must be finite positive numbers, got {factors!r}")
    rank = check_int("rank", rank, 1)
    n_seeds = check_int("seeds", seeds, 1)
    n_values = rank if n_values is None else check_int("n_values", n_values, 1)
    if n_values > rank:
        raise ValueError(f"n_values must be <= rank={rank}, got {n_values}")
    eps = float(eps)
    if not (np.isfinite(eps) and eps > 0):
        raise ValueError(f"eps must be a finite positive number, got {eps!r}")
    if weights not in MEASURES:
        raise ValueError(f"weights must be one of {MEASURES}, got {weights!r}")
    return factors, rank, n_seeds, n_values, eps


def _factor_problem(dataset, data, factor, kernel, center, random_state):
    if data is None:
        return build_problem(
            dataset,
            kernel=kernel,
            center=center,
            bandwidth_factor=factor,
            random_state=random_state,
        )
    return problem_from_data(
        data,
        name=str(dataset),
        kernel=kernel,
        bandwidth_factor=factor,
        center=center,
        random_state=random_state,
    )


def _race_at(G, reference, method, settings):
    """Both solvers' fields of one row: effort, time, value and low-rank error over seeds."""
    rank, eps, measure, seeds, max_effort = settings
    options = {**driver_options(measure), "track_residual": False}
    # the driver records each answer's warnings (and re-issues them once after its sweep)
    results = [
        solve_to_tolerance(
            G,
            rank,
            method,
            eps,
            reference=reference,
            random_state=seed,
            max_effort=max_effort,
            **options,
        )
        for seed in seeds
    ]
    # the whole-triplet rule of the race, applied here to every seed's answer whatever the
    # driver stopped on: the measure, the singular values, the triplets and the solver's
    # trust; an unreliable answer never converges
    judged = [verdict(r) for r in results]
    ok = all(
        r.converged and meets({**j, "value": r.value}, eps)
        for r, j in zip(results, judged, strict=True)
    )
    reliable = all(j["reliable"] for j in judged)
    lowrank = [lowrank_error(G, reference, r.result, rank=rank) for r in results]
    return {
        f"{method}_converged": ok,
        f"{method}_effort": (
            int(statistics.median(r.effort for r in results))
            if ok
            else max(r.effort for r in results)
        ),
        f"{method}_seconds": statistics.median(r.seconds for r in results) if ok else None,
        f"{method}_value": (
            statistics.median(r.value for r in results) if ok else min(r.value for r in results)
        ),
        f"{method}_lowrank": float(statistics.median(lowrank)),
        f"{method}_passes": statistics.median(
            float(r.result.info.get("n_passes", np.nan)) for r in results
        ),
        f"{method}_sv_error": float(statistics.median(j["sv_error"] for j in judged)),
        f"{method}_triplet_residual": float(
            statistics.median(j["triplet_residual"] for j in judged)
        ),
        f"{method}_n_warnings": sum(j["n_warnings"] for j in judged),
        f"{method}_warnings": list(dict.fromkeys(m for j in judged for m in j["warnings"])),
        f"{method}_reliable": reliable,
        f"{method}_status": status_of(ok, reliable),
    }


def _spectrum_row(problem, factor, settings, n_values):
    """One bandwidth: its spectrum, the vacuity bound and both solvers' race."""
    rank, eps, measure = settings[0], settings[1], settings[2]
    G = problem.G
    t0 = time.perf_counter()
    reference = reference_svd(exact_operator(problem), rank, cluster_rtol=CLUSTER_RTOL)
    ref_seconds = time.perf_counter() - t0
    s = np.asarray(reference.s, dtype=float)
    bound = measure_bound(measure, s, float(np.linalg.norm(G)), rank)
    warm_up_warnings = warm_up(G, rank, SPECTRUM_METHODS)
    row = {
        "factor": factor,
        "eps": eps,
        "gamma": problem.gamma,
        "kernel_seconds": problem.kernel_seconds,
        "warm_up_warnings": warm_up_warnings,
        "reference_seconds_not_charged": ref_seconds,
        "s1": float(s[0]),
        "s2_over_s1": s[1] / s[0] if rank > 1 else None,
        "s_r_over_s1": s[rank - 1] / s[0],
        "value_max": bound,
        "vacuous": bool(bound <= eps),
    }
    for method in SPECTRUM_METHODS:
        row.update(_race_at(G, reference, method, settings))
    a, b = row["rsvd_seconds"], row["asym_nystrom_seconds"]
    row["speedup"] = a / b if (a is not None and b) else None
    return row, s[:n_values].tolist()


def run_spectrum(
    dataset="cora",
    *,
    data=None,
    factors=DEFAULT_FACTORS,
    kernel=DEFAULT_KERNEL,
    rank=DEFAULT_RANK,
    eps=0.1,
    weights=STRICT_WEIGHTS,
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
        Tolerance on the measure.
    weights : {"singular_values", "relative", "uniform", "lowrank"}, default="uniform"
        The measure: eta under a weighting (the strict uniform one by default, as in
        ``compare``; the paper's ``"singular_values"`` is vacuous at eps = 0.1 on a centred
        SNE kernel), or ``"lowrank"``, the gap-robust low-rank error. Whatever the
        measure, each row also records the low-rank error of the answers found.
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
        Directory for ``spectrum.csv``, ``spectrum.json`` and ``spectrum.png``; checked before
        any work, written atomically.
    progress : bool, default=True
        Progress bar over factors (counts and elapsed time, no ETA).

    Returns
    -------
    SpectrumResult

    Notes
    -----
    Where ``eps`` is at or above the most any answer can score (``value_max``; for the
    paper's weighting ``2 mean(sigma)``, which is tiny on a centred SNE kernel), the row is
    marked ``vacuous``: both solvers "converge" at their smallest effort and the speedup says
    nothing about accuracy. :func:`format_spectrum` and :func:`plot_spectrum` say so.
    """
    factors, rank, n_seeds, n_values, eps = _check_arguments(
        dataset, data, factors, rank, seeds, n_values, eps, weights
    )
    threads = check_threads(threads)
    if out is not None:
        out = check_out_dir(out, "out")
    run_seeds = seeds_from(random_state, n_seeds)
    settings = (rank, eps, weights, run_seeds, max_effort)

    rows, svals = [], {}
    with solver_threads(threads):
        machine = machine_info()  # inside the limits: the counts the solvers used
        for factor in progress_bar(factors, desc="spectrum", unit="factors", enabled=progress):
            problem = _factor_problem(dataset, data, factor, kernel, center, int(random_state))
            row, svals[factor] = _spectrum_row(problem, factor, settings, n_values)
            rows.append(row)

    meta = {
        "command": "spectrum",
        "dataset": dataset,
        "kernel": kernel,
        "rank": rank,
        "eps": eps,
        "measure": weights,
        "center": bool(center),
        "factors": factors,
        "n_seeds": n_seeds,
        "seeds": run_seeds,
        "random_state": int(random_state),
        "max_effort": max_effort,
        "threads": machine["numba_threads"],
        "blas_threads": [b.get("num_threads") for b in machine["blas"]],
        "dtype": "float64",
        "machine": machine,
    }
    result = SpectrumResult(rows=rows, singular_values=svals, meta=meta)
    if out is not None:
        result.paths = write_spectrum_files(result, out)
    return result


def write_spectrum_files(result, out):
    """Write ``spectrum.csv``, ``spectrum.json`` and ``spectrum.png`` under ``out`` atomically."""
    out = Path(out)
    svals = result.singular_values
    csv_rows = [
        {**r, **{f"s{i + 1}": v for i, v in enumerate(svals[r["factor"]])}} for r in result.rows
    ]
    return {
        "csv": str(write_csv(out / "spectrum.csv", csv_rows)),
        "json": str(
            write_json(
                out / "spectrum.json",
                {
                    "meta": result.meta,
                    "rows": result.rows,
                    "singular_values": {str(k): v for k, v in svals.items()},
                },
            )
        ),
        "png": str(plot_spectrum(result, out / "spectrum.png")),
    }


def _warn_text(row):
    """``asym/rsvd`` warning counts, ``!`` after a method with an unreliable answer."""
    parts = []
    for method in SPECTRUM_METHODS[::-1]:
        n = row.get(f"{method}_n_warnings")
        mark = "" if row.get(f"{method}_reliable", True) else "!"
        parts.append(("-" if n is None else str(n)) + mark)
    return "/".join(parts)


def _speedup_text(row):
    if row["speedup"] is None:
        return "-"
    return ratio_text(row["speedup"]) + ("*" if row["vacuous"] else "")


def format_spectrum(result, *, precision=3):
    """Terminal text: the race per bandwidth, vacuity notes, the leading singular values.

    Both tables fit 100 characters: the race shows efforts, times, values, singular-value
    errors and warnings; the spectrum table the bandwidth and the leading values.
    """
    meta = result.meta
    measure = meta["measure"]
    what = "lowrank excess" if measure == "lowrank" else f"eta ({measure} weights)"
    cols = [
        ("factor", "factor"),
        ("asym_nystrom_effort", "m"),
        ("asym_nystrom_seconds", "asym s"),
        ("asym_nystrom_value", "asym val"),
        ("asym_nystrom_lowrank", "asym lr"),
        ("asym_sv", "asym sv"),
        ("rsvd_effort", "p"),
        ("rsvd_seconds", "rsvd s"),
        ("rsvd_value", "rsvd val"),
        ("rsvd_sv", "rsvd sv"),
        ("warn", "warn"),
        ("speedup_text", "speedup"),
    ]
    title = (
        f"{meta['dataset']}: asym Nystrom vs RSVD to {what} <= {meta['eps']:g} "
        f"(r={meta['rank']}, {meta['n_seeds']} seeds, threads={meta['threads']}); "
        f"m = asym Nystrom samples, p = RSVD oversampling; '-' = not converged "
        f"(val = best reached; converging also needs "
        f"max |s~_i - s_i| <= eps s_1, coherent triplets and a reliable answer); lr = "
        f"low-rank excess of the answer; sv = max |s~_i - s_i| / s_1; warn = warnings "
        f"of the asym Nystrom / RSVD answers ('!': one marked unreliable)"
    )
    # at most 100 characters: values and errors in 2 significant digits, times in 3
    short = {f"{m}_{k}": 2 for m in SPECTRUM_METHODS for k in ("value", "lowrank")}
    short.update({f"{m}_seconds": 3 for m in SPECTRUM_METHODS})
    rows = [
        {
            **r,
            **{k: num(r.get(k), d) for k, d in short.items()},
            "speedup_text": _speedup_text(r),
            "warn": _warn_text(r),
            "asym_sv": num(r.get("asym_nystrom_sv_error"), 2),
            "rsvd_sv": num(r.get("rsvd_sv_error"), 2),
        }
        for r in result.rows
    ]
    race = format_table(rows, cols, precision=precision, title=wrap_note(title))
    notes = [wrap_note(n) for n in _spectrum_notes(result)]
    k = len(next(iter(result.singular_values.values())))
    by_factor = {r["factor"]: r for r in result.rows}
    sv_rows = [
        {
            "factor": f,
            "gamma": by_factor[f]["gamma"],
            "s2/s1": by_factor[f]["s2_over_s1"],
            "s_r/s1": by_factor[f]["s_r_over_s1"],
            **{f"s{i + 1}": v for i, v in enumerate(s)},
        }
        for f, s in result.singular_values.items()
    ]
    shown = ["factor", "gamma", "s2/s1", "s_r/s1"] + [f"s{i + 1}" for i in range(min(k, 8))]
    sv = format_table(
        sv_rows,
        shown,
        precision=4,
        title=f"bandwidth and leading singular values per factor (first {len(shown) - 4} of {k})",
    )
    return "\n".join([race] + notes) + "\n\n" + sv


def _spectrum_notes(result):
    """The vacuity note (as ``compare`` prints it) and a note when nothing converged."""
    meta = result.meta
    notes = []
    vac = [r for r in result.rows if r["vacuous"]]
    if vac:
        factors = ", ".join(f"{r['factor']:g}" for r in vac)
        bound = max(r["value_max"] for r in vac)
        what = (
            "the low-rank excess"
            if meta["measure"] == "lowrank"
            else f"eta with {meta['measure']} weights (<= 2 mean(w))"
        )
        notes.append(
            f"NOTE: at factor(s) {factors} {what} is at most {bound:.3g} <= eps = "
            f"{meta['eps']:g} for ANY answer (even random vectors): the tolerance is "
            f"vacuous there, and the speedups marked * mean nothing. Use --measure "
            f"uniform or --measure lowrank for a tolerance that discriminates."
        )
    if not any(r["asym_nystrom_converged"] or r["rsvd_converged"] for r in result.rows):
        notes.append("NOTE: neither method reached eps at any factor within the effort cap.")
    return notes


def _draw_spectrum(result):
    """The figure of :func:`plot_spectrum` (a matplotlib Figure, not saved)."""
    # matplotlib: loaded only when a figure is drawn (start-up)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # after use("Agg"): no display needed
    import matplotlib.ticker

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    for factor, s in result.singular_values.items():
        s = np.asarray(s)
        ax1.semilogy(np.arange(1, s.size + 1), s / s[0], marker=".", label=f"factor {factor:g}")
    ax1.set_xlabel("index i")
    ax1.set_ylabel("sigma_i / sigma_1")
    ax1.set_title("singular spectrum")
    ax1.legend(fontsize=8)
    rows = result.rows
    f = [r["factor"] for r in rows]
    m = [r["asym_nystrom_effort"] if r["asym_nystrom_converged"] else np.nan for r in rows]
    sp_ = [np.nan if r["speedup"] is None else r["speedup"] for r in rows]
    ax2.semilogx(f, m, "o-", color="C0", label="m needed (asym Nystrom)")
    ax2.set_xlabel("bandwidth factor")
    ax2.set_ylabel("m needed", color="C0")
    ax3 = ax2.twinx()
    ax3.semilogx(f, sp_, "s--", color="C1", label="speedup vs RSVD")
    ax3.set_ylabel("speedup vs RSVD", color="C1")
    # label the factors themselves: log-axis minor labels collide on a short range
    ax2.set_xticks(f, [f"{x:g}" for x in f])
    ax2.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax2.set_xlim(min(f) / 1.4, max(f) * 1.4)  # room for the labels of the end factors
    _mark_cells(ax2, rows)
    if not any(r["asym_nystrom_converged"] or r["rsvd_converged"] for r in rows):
        ax2.set_yticks([])  # an empty panel has no scale to show
        ax3.set_yticks([])
    measure = result.meta["measure"]
    what = "lowrank" if measure == "lowrank" else f"eta, {measure}"
    ax2.set_title(f"{what} <= {result.meta['eps']:g}")
    fig.tight_layout()
    return fig


def _mark_cells(ax, rows):
    """Grey out vacuous factors, flag misses, and say so when the panel has nothing to show."""
    bottom = ("data", "axes fraction")
    for r in rows:
        if r["vacuous"]:
            ax.axvspan(r["factor"] / 1.08, r["factor"] * 1.08, color="0.85", zorder=0)
            ax.annotate(
                "vacuous",
                (r["factor"], 0.97),
                xycoords=bottom,
                ha="center",
                va="top",
                fontsize=7,
                rotation=90,
                color="0.35",
            )
        elif not r["asym_nystrom_converged"]:
            ax.annotate(
                "not conv.",
                (r["factor"], 0.03),
                xycoords=bottom,
                ha="center",
                va="bottom",
                fontsize=7,
                rotation=90,
                color="C3",
            )
    if not any(r["asym_nystrom_converged"] or r["rsvd_converged"] for r in rows):
        ax.text(
            0.5,
            0.5,
            "nothing converged:\nneither method reached eps\nat any factor within the effort cap",
            transform=ax.transAxes,
            ha="center",
            va="center",
            fontsize=9,
            color="C3",
        )
    elif any(r["vacuous"] for r in rows):
        ax.text(
            0.02,
            0.02,
            "grey: eps vacuous (any answer meets it)",
            transform=ax.transAxes,
            fontsize=7,
            color="0.35",
        )


def plot_spectrum(result, path):
    """Save the figure: normalised spectra (left), samples needed and speedup (right).

    Factors where eps is vacuous are greyed out and labelled; factors where asym Nystrom did
    not converge are flagged; when neither method converged anywhere, the right panel says so.
    The PNG is written atomically.
    """
    return save_figure(_draw_spectrum(result), path, dpi=120)
