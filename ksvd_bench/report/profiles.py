"""Performance profiles (Dolan & Moré) and data profiles (Moré & Wild) of a solver collection.

**Input shape.** Both profiles take one mapping ``{solver name: costs over problems}``: for
each solver a 1-D sequence with one entry per problem, the problems in the same order for every
solver. An entry is the cost the solver needed to solve that problem (seconds for a performance
profile; passes over G or entries read for a data profile). An unsolved problem is ``inf``;
``None`` and ``nan`` count as unsolved too (a cost that was not measured is no success).
Negative costs are refused.

:func:`profile_tables` turns the flat records of a suite (one dict per problem, solver, measure
and tolerance, see its docstring) into these mappings, one set per (measure, tolerance).

The papers: E. D. Dolan and J. J. Moré, "Benchmarking optimization software with performance
profiles", Math. Program. 91 (2002), pp. 201-213; J. J. Moré and S. M. Wild, "Benchmarking
derivative-free optimization algorithms", SIAM J. Optim. 20 (2009), pp. 172-191.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

__all__ = ["performance_profile", "data_profile", "profile_tables", "SUITE_RECORD_FIELDS"]

#: the fields of one suite record (see :func:`profile_tables`)
SUITE_RECORD_FIELDS = (
    "problem",
    "solver",
    "measure",
    "eps",
    "seconds",
    "passes",
    "entries_read",
    "status",
    "reason",
)


def _cost_table(costs, name):
    """Validate ``{solver: costs over problems}``: (solvers, 2-D float array, inf unsolved)."""
    if not isinstance(costs, Mapping) or not costs:
        raise ValueError(f"{name} must be a non-empty mapping {{solver: costs over problems}}")
    solvers = [str(s) for s in costs]
    table = []
    for solver, values in costs.items():
        if np.isscalar(values) or values is None:
            raise ValueError(
                f"{name}[{solver!r}] must be a sequence over problems, got {type(values).__name__}"
            )
        row = np.array([np.inf if v is None else v for v in values], dtype=float)
        if row.ndim != 1:
            raise ValueError(
                f"{name}[{solver!r}] must be 1-D (one cost per problem), got shape {row.shape}"
            )
        table.append(row)
    sizes = {row.size for row in table}
    if len(sizes) != 1:
        raise ValueError(
            f"{name}: every solver needs one cost per problem; got lengths "
            + ", ".join(f"{s}={r.size}" for s, r in zip(solvers, table, strict=True))
        )
    table = np.vstack(table)
    if table.shape[1] == 0:
        raise ValueError(f"{name}: no problems")
    table[np.isnan(table)] = np.inf
    if np.any(table < 0):
        bad = solvers[int(np.argwhere(table < 0)[0, 0])]
        raise ValueError(f"{name}[{bad!r}] holds a negative cost; costs are times or counts >= 0")
    return solvers, table


def performance_profile(times, *, tau_max=100.0):
    """Dolan–Moré performance profile: for each solver, the fraction of problems it solves
    within a factor ``tau`` of the fastest solver on that problem.

    With ``t[p, s]`` the time of solver ``s`` on problem ``p`` and
    ``r[p, s] = t[p, s] / min_s t[p, s]`` the performance ratio,
    ``rho_s(tau) = #{p : r[p, s] <= tau} / n_problems`` [1]_. An unsolved problem never counts
    (its ratio is infinite), and a problem that no solver solves stays in the denominator, so
    ``rho_s(tau_max)`` is at most the fraction of problems ``s`` solves.

    Parameters
    ----------
    times : mapping of str to sequence of float
        ``{solver: time over problems}`` (same problem order for every solver); ``inf``,
        ``nan`` or ``None`` for an unsolved problem.
    tau_max : float, default=100.0
        The largest ratio shown; the profile is a step function on ``[1, tau_max]``.

    Returns
    -------
    tau : ndarray of shape (n_tau,)
        Increasing ratios from 1 to ``tau_max``: 1, every finite ratio in between, and
        ``tau_max``. ``rho`` is constant from one ``tau`` to the next (draw it with
        ``step(..., where="post")`` on a log axis).
    rho : dict of str to ndarray of shape (n_tau,)
        For each solver, the fraction of problems with ratio ``<= tau``.

    References
    ----------
    .. [1] E. D. Dolan and J. J. Moré, "Benchmarking optimization software with performance
       profiles", Math. Program. 91 (2002), pp. 201-213.

    Examples
    --------
    >>> tau, rho = performance_profile({"a": [1.0, 4.0], "b": [2.0, float("inf")]})
    >>> tau.tolist(), rho["a"].tolist(), rho["b"].tolist()
    ([1.0, 2.0, 100.0], [1.0, 1.0, 1.0], [0.0, 0.5, 0.5])
    """
    if not (isinstance(tau_max, (int, float)) and math.isfinite(tau_max) and tau_max > 1):
        raise ValueError(f"tau_max must be a finite number > 1, got {tau_max!r}")
    solvers, t = _cost_table(times, "times")
    best = t.min(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = t / best
    # a time of 0 on the best solver: that solver's ratio is 1, every other finite time is
    # infinitely slower; a problem nobody solved has ratio inf for all
    ratio[(t == best) & np.isfinite(t)] = 1.0
    ratio[~np.isfinite(ratio)] = np.inf
    finite = ratio[np.isfinite(ratio) & (ratio <= tau_max)]
    tau = np.unique(np.concatenate([[1.0], finite, [float(tau_max)]]))
    n = t.shape[1]
    rho = {s: (ratio[i][None, :] <= tau[:, None]).sum(axis=1) / n for i, s in enumerate(solvers)}
    return tau, rho


def data_profile(costs, *, scale=None):
    """Moré–Wild data profile: for each solver, the fraction of problems solved within a
    budget.

    ``d_s(kappa) = #{p : c[p, s] / scale[p] <= kappa} / n_problems`` [1]_, with ``c[p, s]``
    the cost solver ``s`` needed to solve problem ``p`` (passes over G, or entries read) and
    ``scale[p]`` the unit of problem ``p`` (for entries read, ``N * M``: the budget is then
    in reads of the whole of G, comparable across problem sizes). Unlike a performance
    profile, the budget is absolute, not relative to the best solver.

    Parameters
    ----------
    costs : mapping of str to sequence of float
        ``{solver: cost over problems}``; ``inf``, ``nan`` or ``None`` for unsolved.
    scale : sequence of float, optional
        One positive unit per problem; default 1 (the costs as given).

    Returns
    -------
    budget : ndarray of shape (n_budget,)
        Increasing budgets: every finite scaled cost (at least one value; ``[1.0]`` when no
        solver solved anything). ``d`` is constant from one budget to the next.
    fraction : dict of str to ndarray of shape (n_budget,)
        For each solver, the fraction of problems solved within each budget.

    References
    ----------
    .. [1] J. J. Moré and S. M. Wild, "Benchmarking derivative-free optimization
       algorithms", SIAM J. Optim. 20 (2009), pp. 172-191.

    Examples
    --------
    >>> budget, d = data_profile({"a": [2, 8], "b": [4, None]})
    >>> budget.tolist(), d["a"].tolist(), d["b"].tolist()
    ([2.0, 4.0, 8.0], [0.5, 0.5, 1.0], [0.0, 0.5, 0.5])
    """
    solvers, c = _cost_table(costs, "costs")
    if scale is not None:
        scale = np.asarray(scale, dtype=float)
        if scale.shape != (c.shape[1],) or not np.all(np.isfinite(scale) & (scale > 0)):
            raise ValueError(
                f"scale must hold one finite positive unit per problem "
                f"({c.shape[1]}), got {scale.tolist()!r}"
            )
        c = c / scale
    finite = c[np.isfinite(c)]
    budget = np.unique(finite) if finite.size else np.array([1.0])
    n = c.shape[1]
    fraction = {
        s: (c[i][None, :] <= budget[:, None]).sum(axis=1) / n for i, s in enumerate(solvers)
    }
    return budget, fraction


def profile_tables(records):
    """Group a suite's flat records into the inputs of the two profiles.

    Parameters
    ----------
    records : iterable of dict
        One record per (problem, solver, measure, tolerance), with the fields of
        :data:`SUITE_RECORD_FIELDS`:

        - ``problem`` (str), ``solver`` (str), ``measure`` (str), ``eps`` (float);
        - ``seconds``: time to solve, ``inf`` (or ``None``) when unsolved;
        - ``passes``: passes over G to solve; ``entries_read``: entries of G read to solve
          (``None`` where not counted; either counts only when solved);
        - ``status``: ``"converged"``, ``"not converged"``, ``"unreliable"`` or
          ``"stopped early, wrong"``; ``reason`` (str or None): why not, in words.

        Optional: ``shape`` (``[N, M]``), used to put entries read in reads of the whole G.

        A record whose ``status`` is not ``"converged"`` counts as unsolved whatever its
        ``seconds`` say.

    Returns
    -------
    dict of (str, float) to dict
        For each ``(measure, eps)``: ``{"problems": [...], "solvers": [...],
        "seconds": {solver: array}, "passes": {solver: array},
        "entries": {solver: array}, "entries_scale": array or None}``, ready for
        :func:`performance_profile` (``seconds``) and :func:`data_profile` (``passes``;
        ``entries`` with ``scale=entries_scale``). A (problem, solver) pair without a record
        counts as unsolved.
    """
    groups = {}
    for rec in records:
        missing = [k for k in ("problem", "solver", "measure", "eps") if k not in rec]
        if missing:
            raise ValueError(f"suite record lacks {missing}: {rec!r}")
        groups.setdefault((str(rec["measure"]), float(rec["eps"])), []).append(rec)
    tables = {}
    for key, recs in groups.items():
        problems = list(dict.fromkeys(str(r["problem"]) for r in recs))
        solvers = list(dict.fromkeys(str(r["solver"]) for r in recs))
        pidx = {p: i for i, p in enumerate(problems)}
        out = {
            f: {s: np.full(len(problems), np.inf) for s in solvers}
            for f in ("seconds", "passes", "entries")
        }
        sizes = np.full(len(problems), np.nan)
        for r in recs:
            i = pidx[str(r["problem"])]
            if r.get("shape") is not None:
                sizes[i] = float(np.prod(r["shape"]))
            if r.get("status", "converged") != "converged":
                continue
            for field, src in (
                ("seconds", "seconds"),
                ("passes", "passes"),
                ("entries", "entries_read"),
            ):
                v = r.get(src)
                out[field][str(r["solver"])][i] = np.inf if v is None else float(v)
        tables[key] = {
            "problems": problems,
            "solvers": solvers,
            **out,
            "entries_scale": sizes if np.all(np.isfinite(sizes) & (sizes > 0)) else None,
        }
    return tables
