"""Result rows, suite records and a run record for the report tests: small, hand-made, with
every verdict, a warning, a solver that does not apply, and effort sweeps over three seeds.
"""

import math

PROBLEMS = ("alpha graph", "beta<points>")
SOLVERS = ("rsvd", "block_krylov", "asym_nystrom")


def _history(seconds, passes, value, seeds=(1, 2, 3)):
    """A sweep of 4 efforts per seed whose last point is (seconds, passes, value)."""
    out = []
    for k, seed in enumerate(seeds):
        wobble = 1 + 0.1 * (k - 1)
        for j, effort in enumerate((5, 10, 20, 40)):
            f = (j + 1) / 4
            out.append(
                {
                    "seed": seed,
                    "effort": effort,
                    "seconds": seconds * f * wobble,
                    "passes": passes * f,
                    "entries_read": None,
                    "value": value * 10 ** (3 * (1 - f)) * wobble,
                    "sv_error": None,
                }
            )
    return out


def _row(
    problem,
    method,
    measure,
    weights,
    eps,
    *,
    seconds,
    passes=4.0,
    value=None,
    converged=True,
    sv_error=None,
    reliable=True,
    status=None,
    note=None,
    warnings=(),
    stop="reference",
    history=True,
):
    value = eps / 3 if value is None else value
    row = {
        "dataset": problem,
        "shape": [300, 250],
        "kernel": "sne",
        "method": method,
        "measure": measure,
        "weights": weights,
        "eps": eps,
        "stop": stop,
        "converged": converged,
        "seconds": seconds,
        "n_passes": passes,
        "effort": 40,
        "value": value,
        "sv_error": eps / 5 if sv_error is None else sv_error,
        "reliable": reliable,
        "note": note,
        "n_warnings": len(warnings),
        "warnings": list(warnings),
        "speedup_vs_rsvd": None,
    }
    if status is not None:
        row["status"] = status
    if history and seconds is not None:
        row["history"] = _history(seconds, passes, value)
    return row


def sample_rows():
    """Rows of two problems under two measures and two tolerances.

    On every (problem, measure, eps): rsvd 0.02 s right, block_krylov 0.01 s right (the
    winner), a faster asym_nystrom that stopped early on a wrong answer (0.002 s, sv error
    above eps, no ``status`` field: older rows), and rpcholesky that does not apply. On the
    second problem at eps 0.01 under lowrank, nobody is right.
    """
    rows = []
    for problem in PROBLEMS:
        for measure, weights in (("eta", "uniform"), ("lowrank", None)):
            for eps in (0.1, 0.01):
                nobody = problem == PROBLEMS[1] and measure == "lowrank" and eps == 0.01
                rows.append(
                    _row(
                        problem,
                        "rsvd",
                        measure,
                        weights,
                        eps,
                        seconds=0.02,
                        passes=6.0,
                        converged=not nobody,
                        status="not converged" if nobody else None,
                        note="not converged: 0/3 seeds reached eps" if nobody else None,
                    )
                )
                rows.append(
                    _row(
                        problem,
                        "block_krylov",
                        measure,
                        weights,
                        eps,
                        seconds=0.01,
                        passes=3.0,
                        status="unreliable" if nobody else "converged",
                        reliable=not nobody,
                        warnings=("block_krylov: basis lost rank at effort 5",),
                    )
                )
                rows.append(
                    _row(
                        problem,
                        "asym_nystrom [stop=residual]",
                        measure,
                        weights,
                        eps,
                        seconds=0.002,
                        passes=1.0,
                        sv_error=3 * eps,
                        note="estimate <= eps; singular values off by > eps",
                        stop="residual",
                    )
                )
                rows.append(
                    _row(
                        problem,
                        "asym_nystrom_rpcholesky",
                        measure,
                        weights,
                        eps,
                        seconds=None,
                        converged=False,
                        stop="n/a",
                        history=False,
                        note="n/a: sampling='rpcholesky' needs two point sets",
                    )
                )
    return rows


def sample_records():
    """Suite records: 4 problems x 3 solvers under one measure and tolerance.

    Times (inf = unsolved)::

                  p1    p2    p3    p4
        rsvd      1.0   2.0   inf   8.0
        krylov    2.0   1.0   3.0   inf (status unreliable, finite seconds)
        nystrom   4.0   inf   inf   inf
    """
    times = {
        "rsvd": (1.0, 2.0, math.inf, 8.0),
        "block_krylov": (2.0, 1.0, 3.0, 5.0),
        "asym_nystrom": (4.0, math.inf, math.inf, math.inf),
    }
    records = []
    for solver, ts in times.items():
        for i, t in enumerate(ts):
            status = "converged" if math.isfinite(t) else "not converged"
            if solver == "block_krylov" and i == 3:
                status = "unreliable"
            records.append(
                {
                    "problem": f"p{i + 1}",
                    "solver": solver,
                    "measure": "eta[uniform]",
                    "eps": 0.01,
                    "seconds": t,
                    "passes": 2 * t,
                    "entries_read": 1000 * t if math.isfinite(t) else None,
                    "status": status,
                    "shape": [100, 50],
                    "reason": None if status == "converged" else f"{status} on p{i + 1}",
                }
            )
    return records


def sample_meta():
    return {
        "command": "compare",
        "command_line": "ksvd-bench compare --out results/x "
        "--note see https://example.invalid/page",
        "seeds": [11, 12, 13],
        "threads": 1,
        "load_average": {"before": [0.5, 0.4, 0.3]},
        "machine": {"python": "3.11.7", "numpy": "2.4.6", "cpu_count": 2},
    }
