"""Time to tolerance on Cora: each solver at the smallest effort of its schedule whose answer
meets eps, with the effort, the value reached and the speedup over RSVD as tracks.

The measures (:data:`common.MEASURES`): eta under the paper's and the strict (uniform)
weighting, and the gap-robust low-rank error. The search runs once in ``setup_cache`` (seed 0,
the driver's effort schedule, Nystrom capped at m = 1000, oversampling at p = 640 and block
Krylov at q = 8 to bound the suite's run time). A solver that misses eps at its cap is not
timed: ``TimeToTolerance.setup`` raises ``NotImplementedError`` (asv shows it as skipped,
n/a), and the tracks report its best value with effort and speedup as NaN.
"""

from __future__ import annotations

import math
import statistics
import time

from .common import (
    MEASURES,
    RANK,
    accuracy,
    as_reference,
    check_accuracy,
    cora_dense,
    reference_triplets,
    solve,
    warm_up_solvers,
)

METHODS = ["tsvd", "rsvd", "block_krylov", "generalized_nystrom", "sym_nystrom",
           "asym_nystrom"]
EPS = [0.1, 0.01]
WEIGHTS = list(MEASURES)
CAPS = {"tsvd": None, "rsvd": 640, "block_krylov": 8, "generalized_nystrom": 640,
        "sym_nystrom": 1000, "asym_nystrom": 1000}


def _search(G, reference, method, weights):
    """Walk the effort schedule once; for each eps the first effort meeting it (seed 0)."""
    from ksvd_bench.driver import effort_schedule

    found = {e: None for e in EPS}
    best = math.inf
    for effort in effort_schedule(method, RANK, G.shape, max_effort=CAPS[method]):
        value = accuracy(G, reference, solve(G, method, effort), weights)
        best = min(best, value)
        for e in EPS:
            if found[e] is None and value <= e:
                found[e] = (effort, value)
        if all(v is not None for v in found.values()):
            break
    return {e: {"converged": found[e] is not None,
                "effort": found[e][0] if found[e] else None,
                "eta": found[e][1] if found[e] else best} for e in EPS}


def _median_time(G, method, effort, repeats=3):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        solve(G, method, effort)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _setup_cache(self):
    """Cora, its reference and the search results; shared by both classes (run once)."""
    G, _ = cora_dense()
    ref = reference_triplets(G)
    reference = as_reference(ref)
    warm_up_solvers()
    found = {}
    for method in METHODS:
        for w in WEIGHTS:
            for e, r in _search(G, reference, method, w).items():
                if r["converged"]:
                    r["seconds"] = _median_time(G, method, r["effort"])
                found[(method, e, w)] = r
    return {"G": G, "reference": ref, "found": found}


_setup_cache.timeout = 1800


class _AtTolerance:
    """Parameters and the cached search shared by the two suites below."""

    params = (METHODS, EPS, WEIGHTS)
    param_names = ["method", "eps", "weights"]
    timeout = 600
    setup_cache = _setup_cache


class TimeToTolerance(_AtTolerance):
    """The solve at the found effort; refuses (skips) a solver that missed eps."""

    def setup(self, cache, method, eps, weights):
        r = cache["found"][(method, eps, weights)]
        if not r["converged"]:
            raise NotImplementedError(
                f"{method} did not reach {weights} <= {eps:g} up to its cap; best value "
                f"{r['eta']:.3g}: no time reported")
        self.G, self.effort = cache["G"], r["effort"]
        warm_up_solvers([method])
        # The timed call is deterministic: verify the very answer it produces.
        check_accuracy(as_reference(cache["reference"]), solve(self.G, method, self.effort),
                       eps, weights, f"{method} at effort {self.effort}", G=self.G)

    def time_solve_at_tolerance(self, cache, method, eps, weights):
        solve(self.G, method, self.effort)


class TrackTolerance(_AtTolerance):
    """Effort found, value reached (best value when missed) and speedup over RSVD.

    ``track_eta`` keeps its name (asv history) but reports the value of the measure in
    ``weights``: eta, or the low-rank excess for ``"lowrank"``.
    """

    def setup(self, cache, method, eps, weights):
        self.r = cache["found"][(method, eps, weights)]
        self.rsvd = cache["found"][("rsvd", eps, weights)]

    def track_effort(self, cache, method, eps, weights):
        return float("nan") if self.r["effort"] is None else float(self.r["effort"])

    def track_eta(self, cache, method, eps, weights):
        return float(self.r["eta"])

    def track_speedup_vs_rsvd(self, cache, method, eps, weights):
        if not (self.r["converged"] and self.rsvd["converged"]):
            return float("nan")
        return self.rsvd["seconds"] / self.r["seconds"]

    track_effort.unit = "effort"
    track_eta.unit = "eta"
    track_speedup_vs_rsvd.unit = "x"
