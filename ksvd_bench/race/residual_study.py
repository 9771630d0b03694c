"""How well do the reference-free estimates track the truth? ("stopping without a reference").

For each citation graph the exact top-``rank`` SVD of the paper's kernel (SNE, paper bandwidth,
centred) comes cheaply from the structured operator (:func:`structured_svd`), so eta and the
low-rank error can be measured exactly while every solver runs at a range of efforts on the
same operator. Each row relates, for one answer (a *cell*: dataset, method, effort) and one
weighting,

* :func:`ksvd_bench.metrics.residual_estimate` to :func:`ksvd_bench.metrics.eta` (the old
  residual rule, pessimistic by orders of magnitude), and
* the driver's error estimate (``stop="estimate"``: the Frobenius gap where resolved, else
  Gaussian probes; :func:`solvers.probe_error`) and the probe estimate alone to the true low-rank
  error ``||G - U~ U~^T G||_F`` (``estimate_ratio``, ``probe_ratio``).

:func:`summarize_residual_study` condenses the first per dataset and weighting,
:func:`summarize_error_estimates` the second per dataset (target: ratio in ``[0.5, 2]`` in at
least 95% of the cells, never below 0.5).

The functions return data and never print; the CLI (``ksvd-bench residual-study``) formats.
"""

from __future__ import annotations

import math
import numbers
import time

import numpy as np

import solvers
from ksvd_bench.datasets import load_graph
from ksvd_bench.driver import effort_schedule
from ksvd_bench.kernels import paper_gamma
from ksvd_bench.kernels.structured import StructuredKernelSource, structured_svd
from ksvd_bench.metrics import (
    WEIGHTS,
    eta,
    frobenius_norm,
    lowrank_error,
    residual_estimate,
    residuals,
    sv_error,
    triplet_residual,
)
from ksvd_bench.race.paper_runtime import BANDWIDTH_FACTORS
from ksvd_bench.scoring import (
    estimate_error,
    recording_warnings,
    reemit,
    solver_estimate,
    warning_fields,
)

__all__ = [
    "DEFAULT_EFFORTS",
    "default_efforts",
    "run_residual_study",
    "summarize_residual_study",
    "summarize_error_estimates",
    "ESTIMATE_BAND",
]

#: the band an error estimate should fall in, as a multiple of the true error
ESTIMATE_BAND = (0.5, 2.0)

#: ARPACK tolerances tried for TSVD (its accuracy knob; its effort is reported as n_matvec)
TSVD_TOLS = (1e-1, 1e-2, 1e-3, 1e-4, 1e-6, 1e-8, 0.0)
#: RSVD and generalized Nystrom oversampling values (n_iter stays at the solver's default)
RSVD_OVERSAMPLES = (0, 5, 10, 20, 40, 80)
#: block Krylov depths (its block stays at the solver's default width)
KRYLOV_ITERS = (0, 1, 2, 3, 4, 6)
#: largest Nystrom sample size by default: N x m blocks are read, so keep m moderate
NYSTROM_MAX_SAMPLES = 1000
DEFAULT_EFFORTS = {
    "tsvd": TSVD_TOLS,
    "rsvd": RSVD_OVERSAMPLES,
    "generalized_nystrom": RSVD_OVERSAMPLES,
    "block_krylov": KRYLOV_ITERS,
}
_OPTION = {
    "tsvd": "tol",
    "rsvd": "n_oversamples",
    "generalized_nystrom": "n_oversamples",
    "block_krylov": "n_iter",
    "sym_nystrom": "n_samples",
    "asym_nystrom": "n_samples",
}
_SAMPLING = ("sym_nystrom", "asym_nystrom")


def default_efforts(method, rank, n, *, n_points=6, max_samples=NYSTROM_MAX_SAMPLES):
    """The effort values of the study for one method.

    Parameters
    ----------
    method : {"tsvd", "rsvd", "block_krylov", "generalized_nystrom", "sym_nystrom", "asym_nystrom"}
    rank : int
    n : int
        ``min(N, M)`` of the problem.
    n_points : int, default=6
        Number of Nyström sample sizes, geometric from ``2 * rank`` to
        ``min(n, max_samples)``.
    max_samples : int, default=1000

    Returns
    -------
    efforts : tuple
        TSVD: ARPACK tolerances (decreasing, so increasing effort); RSVD and generalized
        Nyström: ``n_oversamples``; block Krylov: ``n_iter``; Nyström: ``n_samples``.

    Raises
    ------
    ValueError
        On an unknown method, or ``max_samples < rank`` for a Nyström method.
    """
    if method == "tsvd":
        return TSVD_TOLS
    if method in ("rsvd", "generalized_nystrom"):
        return tuple(p for p in RSVD_OVERSAMPLES if rank + p <= n)
    if method == "block_krylov":
        deepest = effort_schedule(method, rank, (n, n))[-1]
        return tuple(q for q in KRYLOV_ITERS if q <= deepest)
    if method in _SAMPLING:
        if max_samples < rank:
            raise ValueError(
                f"max_samples must be at least rank={rank} (a Nystrom sample "
                f"smaller than r gives fewer than r triplets), got {max_samples}"
            )
        hi = min(n, max_samples)
        lo = min(2 * rank, hi)
        pts = np.unique(np.round(np.geomspace(lo, hi, n_points)).astype(int))
        return tuple(int(m) for m in pts if m >= rank)
    raise ValueError(f"method must be one of {tuple(_OPTION)}, got {method!r}")


def _check_datasets(datasets):
    if isinstance(datasets, str):
        datasets = (datasets,)
    datasets = tuple(datasets)
    if not datasets:
        raise ValueError("datasets must name at least one graph")
    for name in datasets:
        if name not in BANDWIDTH_FACTORS:
            raise ValueError(
                f"datasets must be among {tuple(BANDWIDTH_FACTORS)} (square graphs with the "
                f"structured operator), got {name!r}"
            )
    return datasets


def run_residual_study(
    datasets=("cora", "citeseer", "pubmed"),
    rank=20,
    *,
    methods=None,
    efforts=None,
    weights=WEIGHTS,
    kernel="sne",
    center=True,
    n_points=6,
    max_samples=NYSTROM_MAX_SAMPLES,
    random_state=0,
    callback=None,
):
    """Relate the residual estimate to eta for every solver over a range of efforts.

    Parameters
    ----------
    datasets : sequence of {"cora", "citeseer", "pubmed"}
        Citation graphs; the kernel uses the paper's bandwidth factor (1, 1, 0.5).
    rank : int, default=20
        Number of triplets computed and scored.
    methods : sequence of str, optional
        Solvers to study, default all of ``solvers.METHODS``.
    efforts : dict, optional
        ``{method: sequence}`` overriding :func:`default_efforts` (TSVD: ARPACK ``tol`` values;
        RSVD: ``n_oversamples``; Nyström: ``n_samples``).
    weights : sequence of str, default=all three
        Weightings of eta (and of the estimate).
    kernel : {"sne", "rbf"}, default="sne"
    center : bool, default=True
    n_points, max_samples : int
        Passed to :func:`default_efforts`.
    random_state : None, int or numpy.random.Generator, default=0
        One seed per solver call is drawn from it, so the study is reproducible.
    callback : callable, optional
        Called with each finished row (e.g. for progress output); its return value is ignored.

    Returns
    -------
    rows : list of dict
        One per (dataset, method, effort, weighting): ``dataset``, ``N``, ``gamma``,
        ``method``, ``option`` (the option varied), ``value`` (its value), ``effort``
        (the solver's ``info["effort"]``; for TSVD that is ARPACK's ``ncv``, so read
        ``value`` and ``n_matvec`` there), ``weights``, ``eta``,
        ``residual_estimate``, ``ratio`` (estimate / eta), ``residual_max``
        (:func:`~ksvd_bench.metrics.residuals` ``["max"]``), ``seconds``, ``n_matvec``,
        ``n_block_entries``, ``n_passes`` (passes over G), ``reference_seconds`` (exact SVD
        of the structured operator), ``true_error`` (``||G - U~ U~^T G||_F``, exact: a pass
        over ``G`` up to :data:`~ksvd_bench.metrics.LOWRANK_PASS_MAX_ENTRIES` entries, else
        products with the exact ``||G||_F``), ``error_estimate`` (the driver's estimate with
        ``||G||_F`` known: the Frobenius gap where resolved, else probes),
        ``estimate_kind`` (``"gap"`` or ``"probes"``), ``probe_estimate`` (10 Gaussian probes
        alone, as for a source without ``||G||_F``), ``estimate_ratio`` and ``probe_ratio``
        (each over ``true_error``), ``solver_estimate`` and ``solver_ratio`` (the solver's
        own ``info["error_estimate"]``, e.g. leave-one-out on its sketch; NaN where it gives
        none), ``sv_error``, ``triplet_residual`` (against the
        reference), ``n_warnings``, ``warnings``, ``reliable`` (the solve's warnings and the
        solver's own verdict; every distinct warning is also re-issued after the study)
        and ``error`` (None, or the message of a solver failure, in which case the numbers
        are NaN).
    """
    datasets = _check_datasets(datasets)
    if isinstance(rank, bool) or not isinstance(rank, numbers.Integral) or rank < 1:
        raise ValueError(f"rank must be a positive int, got {rank!r}")
    methods = tuple(solvers.METHODS) if methods is None else tuple(methods)
    for m in methods:
        if m not in solvers.METHODS:
            raise ValueError(f"methods must be among {tuple(solvers.METHODS)}, got {m!r}")
    weights = (weights,) if isinstance(weights, str) else tuple(weights)
    for w in weights:
        if w not in WEIGHTS:
            raise ValueError(f"weights must be among {WEIGHTS}, got {w!r}")
    efforts = {} if efforts is None else dict(efforts)
    for m in efforts:
        if m not in methods:
            raise ValueError(f"efforts has a key {m!r} that is not in methods {methods}")
    if callback is not None and not callable(callback):
        raise TypeError("callback must be callable or None")
    if any(m in _SAMPLING and m not in efforts for m in methods) and max_samples < rank:
        raise ValueError(
            f"max_samples must be at least rank={rank} (a Nystrom sample smaller "
            f"than r gives fewer than r triplets), got {max_samples}"
        )
    rng = np.random.default_rng(random_state)

    rows = []
    caught_all = []
    try:
        for name in datasets:
            rows += _study_dataset(
                name,
                rank,
                methods,
                efforts,
                weights,
                kernel,
                center,
                n_points,
                max_samples,
                rng,
                callback,
                caught_all,
            )
    finally:
        reemit(caught_all)
    return rows


def _failed_rows(base, weights, exc, callback):
    rows = []
    for w in weights:
        row = dict(
            base,
            effort=None,
            weights=w,
            eta=math.nan,
            residual_estimate=math.nan,
            ratio=math.nan,
            residual_max=math.nan,
            seconds=math.nan,
            n_matvec=None,
            n_block_entries=None,
            n_passes=None,
            true_error=math.nan,
            error_estimate=math.nan,
            estimate_kind=None,
            probe_estimate=math.nan,
            estimate_ratio=math.nan,
            probe_ratio=math.nan,
            solver_estimate=math.nan,
            solver_ratio=math.nan,
            sv_error=math.nan,
            triplet_residual=math.nan,
            n_warnings=0,
            warnings=[],
            reliable=False,
            error=f"{type(exc).__name__}: {exc}",
        )
        rows.append(row)
        if callback is not None:
            callback(row)
    return rows


def _ratio(estimate, truth):
    if truth > 0:
        return float(estimate / truth)
    return 1.0 if estimate == 0 else math.inf


def _cell_fields(src, ref, res, rank, fro, seed):
    """The estimate-against-truth fields of one answer (independent of the weighting)."""
    _, terms = lowrank_error(src, ref, res, rank=rank, norm_fro=fro, return_terms=True)
    true = terms["error"]
    est = estimate_error(src, res, rank=rank, fro2=fro**2, random_state=[seed, 1])
    estimate = est["estimate"]
    return {
        "true_error": true,
        "error_estimate": estimate,
        "estimate_kind": "gap" if math.isfinite(est["gap"]) else "probes",
        "probe_estimate": est["probes"],
        "estimate_ratio": _ratio(estimate, true),
        "probe_ratio": _ratio(est["probes"], true),
        "solver_estimate": solver_estimate(res.info),
        "solver_ratio": _ratio(solver_estimate(res.info), true),
        "sv_error": sv_error(ref, res, rank=rank),
        "triplet_residual": triplet_residual(
            src, res, rank=rank, reference=ref, products=est["products"]
        ),
    }


def _study_dataset(
    name,
    rank,
    methods,
    efforts,
    weights,
    kernel,
    center,
    n_points,
    max_samples,
    rng,
    callback,
    caught_all,
):
    """The rows of one graph (see :func:`run_residual_study`)."""
    A = load_graph(name).adjacency
    gamma = paper_gamma(A, BANDWIDTH_FACTORS[name])
    src = StructuredKernelSource(A, kernel, gamma=gamma, center=center)
    n = min(src.shape)
    if rank > n:
        raise ValueError(f"rank must be at most {n} for {name}, got {rank}")
    t0 = time.perf_counter()
    ref = structured_svd(src, rank, random_state=rng.integers(2**32))
    ref_seconds = time.perf_counter() - t0
    fro = frobenius_norm(src)  # exact (one pass), for the true error and the gap estimate
    rows = []
    for method in methods:
        values = efforts.get(method) or default_efforts(
            method, rank, n, n_points=n_points, max_samples=max_samples
        )
        option = _OPTION[method]
        for value in values:
            seed = int(rng.integers(2**32))
            base = {
                "dataset": name,
                "N": src.shape[0],
                "gamma": gamma,
                "method": method,
                "option": option,
                "value": value,
                "reference_seconds": ref_seconds,
            }
            with recording_warnings() as caught:
                try:
                    t1 = time.perf_counter()
                    res = solvers.svd(
                        src, rank, method=method, random_state=seed, **{option: value}
                    )
                    seconds = time.perf_counter() - t1
                except (ValueError, np.linalg.LinAlgError, ArithmeticError) as exc:
                    failure = exc
                else:
                    failure = None
            caught_all.extend(caught)
            if failure is not None:
                # A solver that breaks down at one effort must not end the study.
                rows += _failed_rows(base, weights, failure, callback)
                continue
            cell = {
                **_cell_fields(src, ref, res, rank, fro, seed),
                **warning_fields(caught, res.info),
            }
            rmax = residuals(src, res)["max"]
            for w in weights:
                e = eta(ref, res, weights=w)
                est = residual_estimate(src, res, weights=w, random_state=seed)
                row = dict(
                    base,
                    effort=int(res.info["effort"]),
                    weights=w,
                    eta=float(e),
                    residual_estimate=float(est),
                    ratio=float(est / e) if e > 0 else math.inf,
                    residual_max=rmax,
                    seconds=seconds,
                    n_matvec=int(res.info["n_matvec"]),
                    n_block_entries=int(res.info["n_block_entries"]),
                    n_passes=res.info.get("n_passes"),
                    **cell,
                    error=None,
                )
                rows.append(row)
                if callback is not None:
                    callback(row)
    return rows


def _rank(x):
    order = np.argsort(x, kind="stable")
    r = np.empty(len(x))
    r[order] = np.arange(len(x))
    # average ranks of ties
    for v in np.unique(x):
        tie = x == v
        r[tie] = r[tie].mean()
    return r


def summarize_residual_study(rows, *, floor=1e-13):
    """Condense study rows per dataset and weighting.

    Parameters
    ----------
    rows : list of dict
        Output of :func:`run_residual_study`.
    floor : float, default=1e-13
        Values below it are raised to it before taking logs: ``1 - |u . u~|`` of a converged
        answer is rounding noise (about ``r * eps``), and the estimate of such an answer can
        be far smaller still, so comparisons below the floor mean nothing.

    Returns
    -------
    summary : list of dict
        Per (dataset, weights): ``n`` (successful runs), ``spearman`` (rank correlation of
        estimate and eta), ``frac_conservative`` (share of runs with estimate >= eta),
        ``median_log10_ratio`` and ``max_log10_ratio`` / ``min_log10_ratio`` of
        estimate / eta (after flooring).
    """
    out = []
    keys = []
    for r in rows:
        k = (r["dataset"], r["weights"])
        if k not in keys:
            keys.append(k)
    for dataset, w in keys:
        sel = [
            r for r in rows if r["dataset"] == dataset and r["weights"] == w and r["error"] is None
        ]
        if not sel:
            out.append(
                {
                    "dataset": dataset,
                    "weights": w,
                    "n": 0,
                    "spearman": math.nan,
                    "frac_conservative": math.nan,
                    "median_log10_ratio": math.nan,
                    "min_log10_ratio": math.nan,
                    "max_log10_ratio": math.nan,
                }
            )
            continue
        e = np.maximum([r["eta"] for r in sel], floor)
        est = np.maximum([r["residual_estimate"] for r in sel], floor)
        lr = np.log10(est) - np.log10(e)
        if len(sel) > 1 and np.ptp(e) > 0 and np.ptp(est) > 0:
            spearman = float(np.corrcoef(_rank(np.log10(e)), _rank(np.log10(est)))[0, 1])
        else:
            spearman = math.nan
        out.append(
            {
                "dataset": dataset,
                "weights": w,
                "n": len(sel),
                "spearman": spearman,
                "frac_conservative": float(np.mean(est >= e)),
                "median_log10_ratio": float(np.median(lr)),
                "min_log10_ratio": float(lr.min()),
                "max_log10_ratio": float(lr.max()),
            }
        )
    return out


def summarize_error_estimates(rows, *, band=ESTIMATE_BAND):
    """How well the error estimates track the true low-rank error, per dataset.

    Parameters
    ----------
    rows : list of dict
        Output of :func:`run_residual_study`; each cell (dataset, method, value) is counted
        once, whatever the number of weightings.
    band : (float, float), default=ESTIMATE_BAND
        The accepted range of estimate / true error.

    Returns
    -------
    summary : list of dict
        Per dataset, then ``"all"``: ``n`` (cells), ``within`` (share of cells whose
        driver estimate lies in ``band`` times the true error), ``min_ratio``,
        ``median_ratio``, ``max_ratio`` of it, ``n_gap`` (cells where the estimate was the
        exact Frobenius gap), and the same for the probes alone: ``probe_within``,
        ``probe_min``, ``probe_max``.
    """
    lo, hi = band
    cells = {}
    for r in rows:
        if r.get("error") is None:
            cells.setdefault((r["dataset"], r["method"], r["value"]), r)
    out = []
    names = list(dict.fromkeys(k[0] for k in cells))
    for name in [*names, "all"]:
        sel = [r for k, r in cells.items() if name == "all" or k[0] == name]
        if not sel:
            continue
        est = np.array([r["estimate_ratio"] for r in sel], dtype=float)
        probe = np.array([r["probe_ratio"] for r in sel], dtype=float)
        out.append(
            {
                "dataset": name,
                "n": len(sel),
                "within": float(np.mean((est >= lo) & (est <= hi))),
                "min_ratio": float(est.min()),
                "median_ratio": float(np.median(est)),
                "max_ratio": float(est.max()),
                "n_gap": sum(r["estimate_kind"] == "gap" for r in sel),
                "probe_within": float(np.mean((probe >= lo) & (probe <= hi))),
                "probe_min": float(probe.min()),
                "probe_max": float(probe.max()),
            }
        )
    return out
