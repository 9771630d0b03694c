"""How well does the reference-free residual estimate track eta? (issue 6, "stopping without a
reference").

For each citation graph the exact top-``rank`` SVD of the paper's kernel (SNE, paper bandwidth,
centred) comes cheaply from the structured operator (:func:`structured_svd`), so eta can be
measured exactly while every solver runs at a range of efforts on the same operator. Each row
relates :func:`ksvd_bench.metrics.residual_estimate` to :func:`ksvd_bench.metrics.eta` under one
weighting; :func:`summarize_residual_study` condenses the rows per dataset and weighting.

The functions return data and never print; the CLI (``ksvd-bench residual-study``) formats.
"""

from __future__ import annotations

import math
import numbers
import time

import numpy as np

import solvers
from ksvd_bench.datasets import load_graph
from ksvd_bench.kernels import paper_gamma
from ksvd_bench.kernels.structured import StructuredKernelSource, structured_svd
from ksvd_bench.metrics import WEIGHTS, eta, residual_estimate, residuals
from ksvd_bench.race.paper_runtime import BANDWIDTH_FACTORS
from ksvd_bench.race.problems import quiet_rank_warnings

__all__ = ["DEFAULT_EFFORTS", "default_efforts", "run_residual_study", "summarize_residual_study"]

#: ARPACK tolerances tried for TSVD (its accuracy knob; its effort is reported as n_matvec)
TSVD_TOLS = (1e-1, 1e-2, 1e-3, 1e-4, 1e-6, 1e-8, 0.0)
#: RSVD and generalized Nystrom oversampling values (n_iter stays at the solver's default)
RSVD_OVERSAMPLES = (0, 5, 10, 20, 40, 80)
#: block Krylov depths (its block stays at the solver's default width)
KRYLOV_ITERS = (0, 1, 2, 3, 4, 6)
#: largest Nystrom sample size by default: N x m blocks are read, so keep m moderate
NYSTROM_MAX_SAMPLES = 1000
DEFAULT_EFFORTS = {"tsvd": TSVD_TOLS, "rsvd": RSVD_OVERSAMPLES,
                   "generalized_nystrom": RSVD_OVERSAMPLES, "block_krylov": KRYLOV_ITERS}
_OPTION = {"tsvd": "tol", "rsvd": "n_oversamples", "generalized_nystrom": "n_oversamples",
           "block_krylov": "n_iter", "sym_nystrom": "n_samples", "asym_nystrom": "n_samples"}
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
        from ksvd_bench.driver import effort_schedule

        deepest = effort_schedule(method, rank, (n, n))[-1]
        return tuple(q for q in KRYLOV_ITERS if q <= deepest)
    if method in _SAMPLING:
        if max_samples < rank:
            raise ValueError(f"max_samples must be at least rank={rank} (a Nystrom sample "
                             f"smaller than r gives fewer than r triplets), got {max_samples}")
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
        of the structured operator)
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
        raise ValueError(f"max_samples must be at least rank={rank} (a Nystrom sample smaller "
                         f"than r gives fewer than r triplets), got {max_samples}")
    rng = np.random.default_rng(random_state)

    rows = []
    with quiet_rank_warnings():
        for name in datasets:
            A = load_graph(name).adjacency
            gamma = paper_gamma(A, BANDWIDTH_FACTORS[name])
            src = StructuredKernelSource(A, kernel, gamma=gamma, center=center)
            n = min(src.shape)
            if rank > n:
                raise ValueError(f"rank must be at most {n} for {name}, got {rank}")
            t0 = time.perf_counter()
            ref = structured_svd(src, rank, random_state=rng.integers(2**32))
            ref_seconds = time.perf_counter() - t0
            for method in methods:
                values = efforts.get(method) or default_efforts(
                    method, rank, n, n_points=n_points, max_samples=max_samples
                )
                option = _OPTION[method]
                for value in values:
                    seed = int(rng.integers(2**32))
                    base = {"dataset": name, "N": src.shape[0], "gamma": gamma, "method": method,
                            "option": option, "value": value, "reference_seconds": ref_seconds}
                    try:
                        t1 = time.perf_counter()
                        res = solvers.svd(src, rank, method=method, random_state=seed,
                                          **{option: value})
                        seconds = time.perf_counter() - t1
                    except (ValueError, np.linalg.LinAlgError, ArithmeticError) as exc:
                        # A solver that breaks down at one effort must not end the study.
                        for w in weights:
                            row = dict(base, effort=None, weights=w, eta=math.nan,
                                       residual_estimate=math.nan, ratio=math.nan,
                                       residual_max=math.nan, seconds=math.nan, n_matvec=None,
                                       n_block_entries=None, n_passes=None,
                                       error=f"{type(exc).__name__}: {exc}")
                            rows.append(row)
                            if callback is not None:
                                callback(row)
                        continue
                    rmax = residuals(src, res)["max"]
                    for w in weights:
                        e = eta(ref, res, weights=w)
                        est = residual_estimate(src, res, weights=w, random_state=seed)
                        row = dict(
                            base, effort=int(res.info["effort"]), weights=w, eta=float(e),
                            residual_estimate=float(est),
                            ratio=float(est / e) if e > 0 else math.inf, residual_max=rmax,
                            seconds=seconds, n_matvec=int(res.info["n_matvec"]),
                            n_block_entries=int(res.info["n_block_entries"]),
                            n_passes=res.info.get("n_passes"), error=None,
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
        sel = [r for r in rows if r["dataset"] == dataset and r["weights"] == w
               and r["error"] is None]
        if not sel:
            out.append({"dataset": dataset, "weights": w, "n": 0, "spearman": math.nan,
                        "frac_conservative": math.nan, "median_log10_ratio": math.nan,
                        "min_log10_ratio": math.nan, "max_log10_ratio": math.nan})
            continue
        e = np.maximum([r["eta"] for r in sel], floor)
        est = np.maximum([r["residual_estimate"] for r in sel], floor)
        lr = np.log10(est) - np.log10(e)
        if len(sel) > 1 and np.ptp(e) > 0 and np.ptp(est) > 0:
            spearman = float(np.corrcoef(_rank(np.log10(e)), _rank(np.log10(est)))[0, 1])
        else:
            spearman = math.nan
        out.append({"dataset": dataset, "weights": w, "n": len(sel), "spearman": spearman,
                    "frac_conservative": float(np.mean(est >= e)),
                    "median_log10_ratio": float(np.median(lr)),
                    "min_log10_ratio": float(lr.min()), "max_log10_ratio": float(lr.max())})
    return out
