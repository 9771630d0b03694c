"""The examples in docstrings run and print what they show (``doctest``).

Only the docstrings listed here: each example is small and runs in about a second.
"""

import doctest

import pytest

import solvers._certificate
import solvers.registry
from ksvd_bench.driver import solve_to_tolerance

DOCSTRINGS = {
    "solve_to_tolerance": solve_to_tolerance,
    "solvers._certificate": solvers._certificate,
    "solvers.registry": solvers.registry,
}


@pytest.mark.parametrize("name", sorted(DOCSTRINGS))
def test_docstring_example_runs(name):
    obj = DOCSTRINGS[name]
    tests = doctest.DocTestFinder(recurse=False).find(obj, name, globs={})
    examples = [t for t in tests if t.examples]
    assert examples, f"{name} has no example"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in examples:
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0
    assert result.attempted >= 3
