"""Performance profiles (Dolan & Moré 2002) and data profiles (Moré & Wild 2009)."""

import math

import numpy as np
import pytest
from _report_pages import sample_records

from ksvd_bench.report import data_profile, performance_profile, profile_tables

INF = math.inf


def _rho_by_definition(times, tau):
    """rho_s(tau) straight from the paper's definition, one problem at a time."""
    solvers = list(times)
    n = len(next(iter(times.values())))
    out = {}
    for s in solvers:
        count = 0
        for p in range(n):
            best = min(times[t][p] for t in solvers)
            t = times[s][p]
            if math.isfinite(t) and math.isfinite(best) and t / best <= tau:
                count += 1
        out[s] = count / n
    return out


def test_performance_profile_by_hand():
    times = {"a": [1.0, 2.0, INF, 8.0], "b": [2.0, 1.0, 3.0, INF], "c": [4.0, INF, INF, INF]}
    tau, rho = performance_profile(times)
    assert tau.tolist() == [1.0, 2.0, 4.0, 100.0]
    assert rho["a"].tolist() == [0.5, 0.75, 0.75, 0.75]
    assert rho["b"].tolist() == [0.5, 0.75, 0.75, 0.75]
    assert rho["c"].tolist() == [0.0, 0.0, 0.25, 0.25]


def test_performance_profile_matches_the_definition_on_random_data():
    rng = np.random.default_rng(3)
    times = {
        s: np.where(rng.random(30) < 0.2, INF, rng.lognormal(0, 1.5, 30)).tolist() for s in "abcd"
    }
    tau, rho = performance_profile(times, tau_max=50.0)
    assert tau[0] == 1.0 and tau[-1] == 50.0 and np.all(np.diff(tau) > 0)
    for i in range(0, tau.size, 7):
        expect = _rho_by_definition(times, tau[i])
        assert {s: rho[s][i] for s in times} == pytest.approx(expect)
    # between breakpoints the profile is flat: a ratio just below the next tau adds nothing
    mid = np.sqrt(tau[3] * tau[4])
    assert _rho_by_definition(times, mid) == pytest.approx({s: rho[s][3] for s in times})
    for s in times:
        assert np.all(np.diff(rho[s]) >= 0)
        solved = np.mean(np.isfinite(times[s]))
        assert rho[s][-1] <= solved + 1e-12


def test_unsolved_never_counts_and_stays_in_the_denominator():
    # problem 2 solved by nobody: nobody reaches 1, whatever tau
    tau, rho = performance_profile({"a": [1.0, None], "b": [3.0, float("nan")]})
    assert rho["a"][-1] == 0.5 and rho["b"][-1] == 0.5
    assert rho["b"][0] == 0.0


def test_ties_all_win_and_zero_time_is_the_best():
    tau, rho = performance_profile({"a": [1.0, 0.0], "b": [1.0, 2.0]})
    assert rho["a"][0] == 1.0  # tie on problem 1, only finite zero on problem 2
    assert rho["b"][0] == 0.5 and rho["b"][-1] == 0.5  # 2 / 0 is infinitely slower


@pytest.mark.parametrize(
    "times, tau_max, match",
    [
        ({}, 100.0, "non-empty mapping"),
        ({"a": [1.0], "b": [1.0, 2.0]}, 100.0, "one cost per problem"),
        ({"a": [-1.0]}, 100.0, "negative"),
        ({"a": 3.0}, 100.0, "sequence over problems"),
        ({"a": [[1.0, 2.0]]}, 100.0, "1-D"),
        ({"a": []}, 100.0, "no problems"),
        ({"a": [1.0]}, 1.0, "tau_max"),
        ({"a": [1.0]}, float("inf"), "tau_max"),
    ],
)
def test_performance_profile_refuses_bad_input(times, tau_max, match):
    with pytest.raises(ValueError, match=match):
        performance_profile(times, tau_max=tau_max)


def test_data_profile_by_hand_and_scaled():
    budget, d = data_profile({"a": [2, 4, INF, 16], "b": [4, 2, 6, None]})
    assert budget.tolist() == [2.0, 4.0, 6.0, 16.0]
    assert d["a"].tolist() == [0.25, 0.5, 0.5, 0.75]
    assert d["b"].tolist() == [0.25, 0.5, 0.75, 0.75]
    # one unit per problem: problem 2 is twice as large, so its cost counts half
    budget, d = data_profile({"a": [2, 4]}, scale=[1, 2])
    assert budget.tolist() == [2.0] and d["a"].tolist() == [1.0]
    budget, d = data_profile({"a": [INF, None]})
    assert budget.tolist() == [1.0] and d["a"].tolist() == [0.0]
    with pytest.raises(ValueError, match="scale"):
        data_profile({"a": [1, 2]}, scale=[1, 0])
    with pytest.raises(ValueError, match="scale"):
        data_profile({"a": [1, 2]}, scale=[1])


def test_profile_tables_from_suite_records():
    tables = profile_tables(sample_records())
    assert list(tables) == [("eta[uniform]", 0.01)]
    t = tables[("eta[uniform]", 0.01)]
    assert t["problems"] == ["p1", "p2", "p3", "p4"]
    # block_krylov's p4 has a finite time but an unreliable answer: unsolved
    assert t["seconds"]["block_krylov"].tolist() == [2.0, 1.0, 3.0, INF]
    assert t["passes"]["rsvd"].tolist() == [2.0, 4.0, INF, 16.0]
    assert t["entries_scale"].tolist() == [5000.0] * 4
    tau, rho = performance_profile(t["seconds"])
    assert rho["rsvd"].tolist() == [0.5, 0.75, 0.75, 0.75]
    assert rho["asym_nystrom"].tolist() == [0.0, 0.0, 0.25, 0.25]
    budget, d = data_profile(t["entries"], scale=t["entries_scale"])
    assert budget.tolist() == pytest.approx([0.2, 0.4, 0.6, 0.8, 1.6])
    assert d["block_krylov"].tolist() == [0.25, 0.5, 0.75, 0.75, 0.75]


def test_profile_tables_missing_pair_is_unsolved_and_bad_record_refused():
    recs = [
        {
            "problem": "p1",
            "solver": "a",
            "measure": "m",
            "eps": 0.1,
            "seconds": 1.0,
            "status": "converged",
        },
        {
            "problem": "p2",
            "solver": "b",
            "measure": "m",
            "eps": 0.1,
            "seconds": 2.0,
            "status": "converged",
        },
    ]
    t = profile_tables(recs)[("m", 0.1)]
    assert t["seconds"]["a"].tolist() == [1.0, INF]
    assert t["seconds"]["b"].tolist() == [INF, 2.0]
    assert t["entries_scale"] is None
    with pytest.raises(ValueError, match="lacks"):
        profile_tables([{"problem": "p1", "solver": "a", "eps": 0.1}])
