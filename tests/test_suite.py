"""``ksvd-bench suite``: the fixed, versioned collection, its records (the data of the
performance and data profiles) and the failures table (issue 19, section 3)."""

import json
import math

import numpy as np
import pytest

from ksvd_bench.cli import main
from ksvd_bench.race import suite as suite_module
from ksvd_bench.race.compare import DEFAULT_METHODS
from ksvd_bench.race.suite import (
    COLLECTIONS,
    Collection,
    ProblemSpec,
    get_collection,
    records_from_rows,
    run_suite,
    write_record,
)
from ksvd_bench.race.suite.collection import LAZY_SIZES, QUICK_SKIPS
from ksvd_bench.report import STATUSES, performance_profile, profile_tables

COLL = {"name": "test", "version": 7}


def _row(
    method,
    *,
    converged=True,
    seconds=0.5,
    passes=2.0,
    sv_error=0.0,
    reliable=True,
    eps=0.1,
    stop="reference",
    note=None,
    status=None,
):
    row = {
        "dataset": "p",
        "shape": [10, 20],
        "method": method,
        "measure": "eta",
        "weights": "uniform",
        "eps": eps,
        "stop": stop,
        "converged": converged,
        "seconds": seconds if converged else None,
        "n_passes": passes,
        "sv_error": sv_error,
        "reliable": reliable,
        "note": note,
        "n_seeds": 3,
    }
    if status is not None:
        row["status"] = status
    return row


def test_records_carry_time_budget_and_verdict():
    rows = [
        _row("rsvd", seconds=0.25, passes=4.0),
        _row("asym_nystrom", converged=False, passes=0.5, note="not converged: 0/3"),
        _row("sym_nystrom", reliable=False, converged=False),
        _row("rsvd [stop=residual]", stop="residual", sv_error=0.3, status="stopped early, wrong"),
        _row("asym_nystrom_rpcholesky", converged=False, stop="n/a", note="n/a: no points"),
    ]
    recs = records_from_rows(rows, COLL, skipped=["tsvd"], skip_reason="too slow here")
    by = {r["solver"]: r for r in recs}
    assert by["rsvd"]["seconds"] == 0.25 and by["rsvd"]["status"] == "converged"
    assert by["rsvd"]["passes"] == 4.0 and by["rsvd"]["entries_read"] == 4.0 * 10 * 20
    assert by["rsvd"]["measure"] == "eta[uniform]" and by["rsvd"]["reason"] is None
    assert by["asym_nystrom"]["seconds"] == math.inf
    assert by["asym_nystrom"]["status"] == "not converged"
    assert by["asym_nystrom"]["reason"] == "not converged: 0/3"
    assert by["sym_nystrom"]["status"] == "unreliable"
    wrong = by["rsvd [stop=residual]"]
    assert wrong["status"] == "stopped early, wrong" and wrong["seconds"] == math.inf
    assert "sv error 0.3" in wrong["reason"]
    assert by["asym_nystrom_rpcholesky"]["reason"] == "n/a: no points"
    assert by["tsvd"]["status"] == "not converged" and by["tsvd"]["reason"] == "too slow here"
    assert all(r["status"] in STATUSES for r in recs)
    assert all(r["collection"] == "test" and r["collection_version"] == 7 for r in recs)


def test_records_feed_the_dolan_more_profile():
    """r_ps = t_ps / min_s t_ps; an unsolved problem never counts."""
    rows = [_row("a", seconds=1.0), _row("b", seconds=3.0), _row("c", converged=False)]
    rows += [
        {**_row("a", seconds=2.0), "dataset": "q"},
        {**_row("b", seconds=1.0), "dataset": "q"},
        {**_row("c", seconds=8.0), "dataset": "q"},
    ]
    table = profile_tables(records_from_rows(rows, COLL))[("eta[uniform]", 0.1)]
    tau, rho = performance_profile(table["seconds"])
    at = {t: i for i, t in enumerate(tau)}
    assert rho["a"][at[1.0]] == 0.5 and rho["a"][at[2.0]] == 1.0
    assert rho["b"][at[1.0]] == 0.5 and rho["b"][at[3.0]] == 1.0
    assert rho["c"][at[8.0]] == 0.5 and rho["c"][-1] == 0.5  # p unsolved: never counts


def test_default_collection_holds_what_the_issue_asks():
    coll = get_collection("default")
    names = [p.name for p in coll.problems]
    assert len(names) >= 8 and len(set(names)) == len(names)
    for name in (
        "cora",
        "citeseer",
        "pubmed",
        "ionosphere",
        "rare-clusters",
        "digits-by-class",
        "synthetic-fast",
        "synthetic-poly",
        "synthetic-flat",
        "lazy-points",
        "attention",
        "lazy-attention",
    ):
        assert name in names
    assert coll.version == 2  # version 2: the attention problems (issue 33)
    assert LAZY_SIZES[0] >= 20_000
    assert coll.settings["methods"] == DEFAULT_METHODS
    assert set(QUICK_SKIPS) <= set(names)
    assert [p.name for p in coll.problems_for(True)] == [n for n in names if n not in QUICK_SKIPS]
    with pytest.raises(ValueError, match="collection must be one of"):
        get_collection("nope")


def test_digits_problem_is_two_point_sets_by_class():
    spec = next(p for p in get_collection("default").problems if p.name == "digits-by-class")
    problem = spec.build(True, 0)
    assert problem.points is not None and problem.shape == (901, 896)
    assert problem.points[0].shape[1] == 64


def test_attention_problems_are_softmax_of_queries_and_keys():
    """The attention builders: softmax of seeded low-rank-plus-noise queries and keys, lazy
    above the memory limit (sizes shrunk here; the collection's are 4096 and 20000)."""
    from scipy.special import softmax

    from ksvd_bench.datasets import make_attention_points
    from ksvd_bench.race.suite.collection import (
        ATTENTION_SIZES,
        LAZY_ATTENTION_SIZE,
        _attention,
    )

    assert ATTENTION_SIZES == (4096, 2048) and LAZY_ATTENTION_SIZE == 20_000
    problem = _attention(lambda quick: 150, "attention")(True, 3)
    assert problem.kernel == "softmax" and problem.gamma == 8.0 and not problem.is_lazy
    Q, K = make_attention_points(150, d=64, rank=96, random_state=3)
    np.testing.assert_array_equal(problem.points[0], Q)
    np.testing.assert_allclose(problem.G, softmax(Q @ K.T / 8.0, axis=1), rtol=0, atol=1e-14)
    lazy = _attention(lambda quick: 150, "lazy-attention", 1000.0)(False, 3)
    assert lazy.is_lazy and lazy.G.kernel == "softmax"
    V = np.random.default_rng(0).normal(size=(150, 2))
    np.testing.assert_allclose(lazy.G.matmat(V), problem.G @ V, rtol=0, atol=1e-13)


def _smoke(name, renamed):
    """A problem of the ``smoke`` collection under another name."""
    spec = next(p for p in get_collection("smoke").problems if p.name == name)

    def build(quick, seed):
        problem = spec.build(quick, seed)
        problem.name = renamed
        return problem

    return build


_tiny = _smoke("smoke-synthetic", "tiny-synthetic")
_tiny_lazy = _smoke("smoke-points", "tiny-lazy")


@pytest.fixture
def tiny_collection(monkeypatch):
    settings = {
        "rank": 4,
        "eps": (0.1,),
        "weights": ("uniform", "lowrank"),
        "seeds": 1,
        "methods": ("tsvd", "rsvd", "asym_nystrom_rpcholesky"),
        "budget_seconds": 2.0,
        "sweep_limit": 5.0,
        "random_state": 0,
    }
    coll = Collection(
        name="tiny",
        version=3,
        description="two tiny problems",
        problems=(
            ProblemSpec("tiny-synthetic", "synthetic", _tiny),
            ProblemSpec(
                "tiny-lazy",
                "lazy points",
                _tiny_lazy,
                methods=("rsvd", "asym_nystrom_rpcholesky"),
                skip_reason="not raced here",
            ),
        ),
        settings=settings,
        quick_settings=settings,
    )
    monkeypatch.setitem(COLLECTIONS, "tiny", coll)
    return coll


def test_suite_run_writes_records_failures_and_profiles(tmp_path, tiny_collection):
    result = run_suite("tiny", out=tmp_path, progress=False, command_line="test")
    saved = json.loads((tmp_path / "suite.json").read_text())
    assert saved["collection"]["name"] == "tiny" and saved["collection"]["version"] == 3
    # the collection is in every result: records and compare rows
    assert all(
        r["collection"] == "tiny" and r["collection_version"] == 3
        for r in saved["records"] + saved["rows"]
    )
    problems = {r["problem"] for r in saved["records"]}
    assert problems == {"tiny-synthetic", "tiny-lazy"}
    cells = {(r["problem"], r["solver"]) for r in saved["records"]}
    for p in problems:  # every solver of the collection has a record on every problem
        assert {(p, m) for m in ("tsvd", "rsvd", "asym_nystrom_rpcholesky")} <= cells
    by = {(r["problem"], r["solver"]): r for r in result.records}
    assert by[("tiny-lazy", "tsvd")]["reason"] == "not raced here"
    assert by[("tiny-synthetic", "asym_nystrom_rpcholesky")]["reason"].startswith("n/a")
    # rpcholesky runs on the lazy point problem and reaches 0.1 on four separated clusters
    assert by[("tiny-lazy", "asym_nystrom_rpcholesky")]["stop"] == "reference"
    assert by[("tiny-synthetic", "rsvd")]["status"] == "converged"
    # unsolved times are null in the JSON (inf in memory), solved ones finite
    for rec in saved["records"]:
        assert (rec["seconds"] is not None) == (rec["status"] == "converged")
    assert saved["failures"] == [
        {k: r[k] for k in ("problem", "solver", "measure", "eps", "status", "reason")}
        for r in saved["records"]
        if r["status"] != "converged"
    ]
    # the lazy problem's rows say their reference is not exact
    lazy_rows = [r for r in saved["rows"] if r["dataset"] == "tiny-lazy"]
    assert lazy_rows and all("block Krylov" in r["note"] for r in lazy_rows)
    lazy_info = next(p for p in saved["collection"]["problems"] if p["name"] == "tiny-lazy")
    assert lazy_info["lazy"] and lazy_info["reference"]["method"] == "block_krylov"
    assert (tmp_path / "profiles_eta_uniform_0.1.png").stat().st_size > 5000
    per_problem = json.loads((tmp_path / "problems" / "tiny-lazy" / "compare.json").read_text())
    assert per_problem["meta"]["collection"] == {"name": "tiny", "version": 3, "quick": False}
    assert all(r["collection_version"] == 3 for r in per_problem["rows"])
    assert saved["meta"]["command_line"] == "test"
    assert set(saved["meta"]["wall_seconds_per_problem"]) == problems
    kept = json.loads(write_record(result, tmp_path / "rec" / "suite.json").read_text())
    assert kept["collection"] == saved["collection"] and kept["records"] == saved["records"]
    assert kept["recorded_at"] and all("history" not in r for r in kept["rows"])


def test_cli_suite_refuses_unknown_problem_before_any_work(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        main(["suite", "--problems", "nope", "--out", str(tmp_path)])
    assert info.value.code == 2
    assert "'nope' is not a problem of collection 'default'" in capsys.readouterr().err


def test_cli_suite_list_names_collection_and_version(capsys):
    assert main(["suite", "--list"]) == 0
    out = capsys.readouterr().out
    assert "collection 'default' version 2" in out and "lazy-points" in out
    assert "lazy-attention" in out
    assert suite_module.DEFAULT_COLLECTION == "default"
