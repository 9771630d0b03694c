"""End-to-end checks of the solver race (ksvd_bench.race.compare) on small problems."""

import csv
import json
import math

import numpy as np
import pytest

from ksvd_bench.datasets import make_directed_graph
from ksvd_bench.race.compare import (
    ROW_FIELDS,
    STRUCTURED_NAME,
    format_compare,
    run_compare,
)
from ksvd_bench.race.paper_runtime import paper_runtime, paper_speedup
from ksvd_bench.race.problems import build_problem, problem_from_data

RANK = 4
METHODS = ("tsvd", "rsvd", "sym_nystrom", "asym_nystrom")


@pytest.fixture(scope="module")
def synthetic_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("compare")
    # eps=1e-9 cannot be met by Nystrom at m <= 24 on a noisy matrix: a forced miss.
    result = run_compare(
        "synthetic", rank=RANK, eps=(0.1, 1e-9), weights=("singular_values", "uniform"),
        seeds=2, methods=METHODS, max_effort={"rsvd": 40, "sym_nystrom": 24,
                                              "asym_nystrom": 24},
        budget_seconds=None, problem_options={"shape": (120, 90),
                                              "synthetic_options": {"rank": 6, "noise": 1e-2}},
        out=out, progress=False, random_state=3)
    return result, out


def test_rows_have_every_field_and_one_row_per_cell(synthetic_run):
    result, _ = synthetic_run
    for row in result.rows:
        assert set(row) == set(ROW_FIELDS)
    ref_rows = [r for r in result.rows if r["stop"] == "reference"]
    assert len(ref_rows) == 2 * 2 * len(METHODS)
    res_rows = [r for r in result.rows if r["stop"] == "residual"]
    assert len(res_rows) == 2 * 2 * len(METHODS)
    assert {r["method"] for r in res_rows} == {m + " [stop=residual]" for m in METHODS}
    # No structure to exploit in a given dense matrix: no exact structured row.
    assert not [r for r in result.rows if r["method"] == STRUCTURED_NAME]


def test_reference_matches_numpy_svd(synthetic_run):
    result, _ = synthetic_run
    problem = build_problem("synthetic", shape=(120, 90),
                            synthetic_options={"rank": 6, "noise": 1e-2}, random_state=3)
    s = np.linalg.svd(problem.G, compute_uv=False)[:RANK]
    np.testing.assert_allclose(result.meta["reference"]["synthetic"]["s"], s, rtol=1e-10)


def test_converged_rows_are_timed_and_met_eps(synthetic_run):
    result, _ = synthetic_run
    conv = [r for r in result.rows if r["stop"] == "reference" and r["converged"]]
    assert conv, "TSVD at least must converge at eps=0.1"
    for r in conv:
        assert r["eta"] <= r["eps"] and r["eta_worst"] <= r["eps"]
        assert r["seconds"] > 0 and r["e2e_seconds"] >= r["seconds"]
        assert r["n_converged"] == r["n_seeds"] == 2
    tsvd = [r for r in conv if r["method"] == "tsvd"]
    assert len(tsvd) == 4  # exact to rounding at every eps and weighting
    rsvd = [r for r in conv if r["method"] == "rsvd"]
    for r in rsvd:
        assert r["speedup_vs_rsvd"] == pytest.approx(1.0)


def test_non_converged_rows_are_flagged_and_untimed(synthetic_run):
    result, _ = synthetic_run
    missed = [r for r in result.rows if r["stop"] == "reference" and r["eps"] == 1e-9
              and "nystrom" in r["method"]]
    assert len(missed) == 4
    for r in missed:
        assert r["converged"] is False
        assert r["seconds"] is None and r["e2e_seconds"] is None
        assert r["speedup_vs_rsvd"] is None
        assert r["eta"] is None and r["best_eta"] > r["eps"]
        assert r["effort"] <= 24
        assert "not converged" in r["note"]
    text = format_compare(result)
    assert "eps=1e-09" in text and "not converged" in text


def test_runs_record_every_seed(synthetic_run):
    result, _ = synthetic_run
    seeds = result.meta["seeds"]
    assert len(seeds) == 2 and len(set(seeds)) == 2
    nys = [r for r in result.runs if r["method"] == "asym_nystrom" and r["eps"] == 0.1
           and r["weights"] == "uniform"]
    assert sorted(r["seed"] for r in nys) == sorted(seeds)
    for r in result.runs:
        assert r["converged"] == (r["eta"] <= r["eps"])


def test_json_and_csv_written(synthetic_run):
    result, out = synthetic_run
    payload = json.loads((out / "compare.json").read_text())
    assert payload["meta"]["seeds"] == result.meta["seeds"]
    assert payload["meta"]["dtype"] == "float64"
    assert payload["meta"]["threads"] >= 1
    for key in ("numpy", "scipy", "numba", "blas", "numba_threads"):
        assert key in payload["meta"]["machine"]
    assert len(payload["rows"]) == len(result.rows)
    with open(out / "compare.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == len(result.rows)
    assert list(rows[0]) == list(ROW_FIELDS)
    with open(out / "compare_runs.csv", newline="") as fh:
        assert len(list(csv.DictReader(fh))) == len(result.runs)


def test_structured_exact_row_on_a_sparse_graph():
    graph = make_directed_graph(150, n_communities=3, avg_degree=4.0, random_state=0)
    problem = problem_from_data(graph.adjacency, name="tiny-graph", kernel="sne")
    assert problem.supports_structured
    result = run_compare([problem], rank=RANK, eps=(0.1,), weights=("uniform",), seeds=1,
                         methods=("tsvd", "rsvd"), residual=False, progress=False)
    exact = [r for r in result.rows if r["method"] == STRUCTURED_NAME]
    assert len(exact) == 1
    row = exact[0]
    assert row["converged"] and row["eta"] < 1e-8
    assert row["e2e_seconds"] == pytest.approx(row["kernel_seconds"] + row["seconds"], rel=0.5)
    assert row["speedup_vs_rsvd"] is not None and row["speedup_vs_rsvd"] > 0
    s_dense = np.linalg.svd(problem.G, compute_uv=False)[:RANK]
    np.testing.assert_allclose(result.meta["reference"]["tiny-graph"]["s"], s_dense,
                               rtol=1e-10)


def test_paper_numbers_lookup():
    assert paper_runtime("cora", 0.1, "asym_nystrom") == 0.160
    assert paper_runtime("pubmed", 1e-2, "tsvd") == 9.223
    assert paper_runtime("synthetic", 0.1, "tsvd") is None
    assert paper_runtime("cora", 0.5, "tsvd") is None
    # the printed speedups are RSVD / ours, to the paper's rounding
    for ds in ("cora", "citeseer", "pubmed"):
        for e in (0.1, 0.01):
            ratio = paper_runtime(ds, e, "rsvd") / paper_runtime(ds, e, "asym_nystrom")
            assert math.isclose(ratio, paper_speedup(ds, e), rel_tol=0.02)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"rank": 0}, "rank"), ({"eps": (0.1, -1.0)}, "eps"), ({"weights": ("l2",)}, "weights"),
     ({"methods": ("svd",)}, "methods"), ({"seeds": 0}, "seeds"),
     ({"budget_seconds": -1.0}, "budget_seconds"), ({"max_effort": "lots"}, "max_effort")],
)
def test_bad_arguments_name_the_parameter(kwargs, match):
    with pytest.raises(ValueError, match=match):
        run_compare("synthetic", progress=False, **kwargs)


def test_unknown_dataset():
    with pytest.raises(ValueError, match="datasets"):
        run_compare("mnist", progress=False)


def test_vacuous_tolerance_is_flagged():
    """eta <= 2 mean(w) always; a tolerance above that bound is met by any answer."""
    result = run_compare("synthetic", rank=RANK, eps=(10.0,), weights=("uniform",), seeds=1,
                         methods=("rsvd", "asym_nystrom"), residual=False,
                         problem_options={"shape": (60, 50)}, progress=False)
    assert result.meta["reference"]["synthetic"]["eta_max"]["uniform"] == pytest.approx(2.0)
    assert "vacuous" in format_compare(result)
