"""One error policy at every public entry point (issue 34 section 2).

An integer argument of the wrong type (``2.0``, ``True``, ``"2"``) raises ``TypeError``; one of
the right type but out of range raises ``ValueError``; both name the argument. One checker,
``solvers.check_int``, says so for every entry point (``solve_to_tolerance(repeats=2.0)``
raised ValueError while ``svd(G, 2.0)`` raised TypeError).
"""

import numpy as np
import pytest

import solvers
from ksvd_bench import KSVD
from ksvd_bench.datasets import make_directed_graph, make_kernel_problem, make_rare_clusters
from ksvd_bench.driver import effort_schedule, reference_svd, solve_to_tolerance
from ksvd_bench.race.spectrum import run_spectrum

G = np.random.default_rng(0).normal(size=(30, 20))

#: entry point -> a call with the integer argument set to ``value``
CALLS = {
    **{
        f"svd[{method}] rank": (
            lambda v, m=method: solvers.svd(
                G, v, method=m, random_state=0, **({"n_samples": 10} if "nystrom" in m else {})
            )
        )
        for method in solvers.METHODS
        if method != "generalized_nystrom"
    },
    "solve_to_tolerance repeats": lambda v: solve_to_tolerance(
        G, 2, "rsvd", 0.1, reference=reference_svd(G, 2), repeats=v
    ),
    "solve_to_tolerance rank": lambda v: solve_to_tolerance(G, v, "rsvd", 0.1),
    "reference_svd rank": lambda v: reference_svd(G, v),
    "effort_schedule rank": lambda v: effort_schedule("rsvd", v, G.shape),
    "KSVD n_components": lambda v: KSVD(n_components=v).fit(G),
    "make_directed_graph n_nodes": lambda v: make_directed_graph(v),
    "make_kernel_problem rank": lambda v: make_kernel_problem(30, 20, rank=v),
    "make_rare_clusters n": lambda v: make_rare_clusters(v, 20, 4),
    "spectrum seeds": lambda v: run_spectrum("cora", seeds=v, progress=False),
}


@pytest.mark.parametrize("entry", sorted(CALLS))
@pytest.mark.parametrize("value", [2.0, True, "2"])
def test_an_integer_of_the_wrong_type_is_a_type_error(entry, value):
    name = entry.split()[-1]
    with pytest.raises(TypeError, match=name):
        CALLS[entry](value)


@pytest.mark.parametrize("entry", sorted(CALLS))
def test_an_integer_out_of_range_is_a_value_error(entry):
    name = entry.split()[-1]
    low = -1
    with pytest.raises(ValueError, match=name):
        CALLS[entry](low)
