"""End-to-end checks of the solver race (ksvd_bench.race.compare) on small problems."""

import csv
import json
import math
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from ksvd_bench.datasets import make_directed_graph
from ksvd_bench.driver import definition_key, reference_svd
from ksvd_bench.race.compare import (
    DEFAULT_METHODS,
    ROW_FIELDS,
    STRUCTURED_NAME,
    format_compare,
    run_compare,
)
from ksvd_bench.race.compare import run as compare_run
from ksvd_bench.race.compare.cells import first_hit
from ksvd_bench.race.compare.table import display_row as _display_row
from ksvd_bench.race.paper_runtime import paper_runtime, paper_speedup
from ksvd_bench.race.problems import (
    DATASET_SHAPES,
    build_problem,
    problem_data,
    problem_from_data,
)
from ksvd_bench.report import atomic_path, check_out_dir, write_csv
from ksvd_bench.threads import max_threads

RANK = 4
METHODS = ("tsvd", "rsvd", "block_krylov", "generalized_nystrom", "sym_nystrom", "asym_nystrom")
SYNTH = {"shape": (120, 90), "synthetic_options": {"rank": 6, "noise": 1e-2}}


@pytest.fixture(scope="module")
def synthetic_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("compare")
    # eps=1e-9 cannot be met by Nystrom at m <= 24 on a noisy matrix: a forced miss.
    result = run_compare(
        "synthetic",
        rank=RANK,
        eps=(0.1, 1e-9),
        weights=("singular_values", "uniform", "lowrank"),
        seeds=2,
        methods=METHODS,
        max_effort={
            "rsvd": 40,
            "generalized_nystrom": 40,
            "block_krylov": 3,
            "sym_nystrom": 24,
            "asym_nystrom": 24,
        },
        budget_seconds=None,
        problem_options=SYNTH,
        out=out,
        progress=False,
        random_state=3,
    )
    return result, out


def test_rows_have_every_field_and_one_row_per_cell(synthetic_run):
    result, _ = synthetic_run
    for row in result.rows:
        assert set(row) == set(ROW_FIELDS)
    ref_rows = [r for r in result.rows if r["stop"] == "reference"]
    assert len(ref_rows) == 2 * 3 * len(METHODS)
    # residual-stopped rows exist for the eta measures only (the estimate is of eta)
    res_rows = [r for r in result.rows if r["stop"] == "residual"]
    assert len(res_rows) == 2 * 2 * len(METHODS)
    assert {r["measure"] for r in res_rows} == {"eta"}
    assert {r["method"] for r in res_rows} == {m + " [stop=residual]" for m in METHODS}
    # No structure to exploit in a given dense matrix: no exact structured row.
    assert not [r for r in result.rows if r["method"] == STRUCTURED_NAME]


def test_reference_matches_numpy_svd(synthetic_run):
    result, _ = synthetic_run
    problem = build_problem("synthetic", random_state=3, **SYNTH)
    s = np.linalg.svd(problem.G, compute_uv=False)[:RANK]
    np.testing.assert_allclose(result.meta["reference"]["synthetic"]["s"], s, rtol=1e-10)


def test_converged_rows_are_timed_and_met_eps(synthetic_run):
    result, _ = synthetic_run
    conv = [r for r in result.rows if r["stop"] == "reference" and r["converged"]]
    assert conv, "TSVD at least must converge at eps=0.1"
    for r in conv:
        assert r["value"] <= r["eps"] and r["value_worst"] <= r["eps"]
        assert r["seconds"] > 0 and r["e2e_seconds"] >= r["seconds"]
        assert r["n_converged"] == r["n_seeds"] == 2
    tsvd = [r for r in conv if r["method"] == "tsvd"]
    assert len(tsvd) == 6  # exact to rounding at every eps and measure
    for r in conv:
        if r["method"] == "rsvd":
            assert r["speedup_vs_rsvd"] == pytest.approx(1.0)


def test_lowrank_rows_score_the_exact_answer_zero(synthetic_run):
    result, _ = synthetic_run
    low = [r for r in result.rows if r["measure"] == "lowrank"]
    assert low and all(r["weights"] is None for r in low)
    tsvd = [r for r in low if r["method"] == "tsvd"]
    assert all(r["value"] < 1e-8 for r in tsvd)
    # the vacuity bound of lowrank is ||G||_F / ||G - G_r||_F - 1
    G = build_problem("synthetic", random_state=3, **SYNTH).G
    s = np.linalg.svd(G, compute_uv=False)
    fro = np.sqrt(np.sum(s**2))
    bound = fro / np.sqrt(np.sum(s[RANK:] ** 2)) - 1
    assert result.meta["reference"]["synthetic"]["value_max"]["lowrank"] == pytest.approx(bound)


def test_passes_column(synthetic_run):
    result, _ = synthetic_run
    by = {(r["method"], r["eps"], r["weights"]): r for r in result.rows if r["stop"] == "reference"}
    # RSVD with n_iter=4: one sketch, then 2 passes per power iteration, one to project,
    # and the 2 passes of its certificate
    assert by[("rsvd", 0.1, "uniform")]["n_passes"] == pytest.approx(10 + 2)
    # Nystrom reads m rows and m columns of a 120 x 90 matrix (well under one pass), plus at
    # most two passes of its certificate
    nys = by[("asym_nystrom", 0.1, "uniform")]
    assert 0 < nys["n_passes"] < 3
    # generalized Nystrom reads G once (a sketch pass) plus at most a pass to finish, and
    # the 2 passes of its certificate
    assert by[("generalized_nystrom", 0.1, "uniform")]["n_passes"] <= 2 + 2
    assert by[("block_krylov", 1e-9, "uniform")]["effort_param"] == "n_iter"


def test_rows_show_the_certificates_share_of_the_solve(synthetic_run):
    """Issue 32: a reader sees what the certificate costs. Each converged row of a certified
    solver carries the median share of its solve time spent in the certificate; tsvd has
    none, and a row that missed eps has no time to share."""
    result, out = synthetic_run
    by = {(r["method"], r["eps"], r["weights"]): r for r in result.rows if r["stop"] == "reference"}
    for method in ("rsvd", "block_krylov", "generalized_nystrom"):
        share = by[(method, 0.1, "uniform")]["cert_share"]
        assert share is not None and 0 < share < 1, (method, share)
    assert by[("tsvd", 0.1, "uniform")]["cert_share"] is None
    missed = [r for r in result.rows if r["stop"] == "reference" and not r["converged"]]
    assert missed and all(r["cert_share"] is None for r in missed)
    runs = [r for r in result.runs if r["method"] == "rsvd" and r["converged"]]
    assert runs and all(0 < r["cert_seconds"] < r["seconds"] for r in runs)
    assert "certificate share" in (out / "report.html").read_text()


def test_non_converged_rows_are_flagged_and_untimed(synthetic_run):
    result, _ = synthetic_run
    missed = [
        r
        for r in result.rows
        if r["stop"] == "reference"
        and r["eps"] == 1e-9
        and r["method"] in ("sym_nystrom", "asym_nystrom")
    ]
    assert len(missed) == 6
    for r in missed:
        assert r["converged"] is False
        assert r["seconds"] is None and r["e2e_seconds"] is None
        assert r["speedup_vs_rsvd"] is None
        assert r["value"] is None and r["best_value"] > r["eps"]
        assert r["effort"] <= 24
        assert "not converged" in r["note"]
    text = format_compare(result)
    assert "eps=1e-09" in text and "0/2" in text


def test_runs_record_every_seed(synthetic_run):
    result, _ = synthetic_run
    seeds = result.meta["seeds"]
    assert len(seeds) == 2 and len(set(seeds)) == 2
    nys = [
        r
        for r in result.runs
        if r["method"] == "asym_nystrom" and r["eps"] == 0.1 and r["weights"] == "uniform"
    ]
    assert sorted(r["seed"] for r in nys) == sorted(seeds)
    for r in result.runs:
        assert r["converged"] == (r["value"] <= r["eps"])


def test_json_and_csv_written(synthetic_run):
    result, out = synthetic_run
    payload = json.loads((out / "compare.json").read_text())
    assert payload["meta"]["seeds"] == result.meta["seeds"]
    assert payload["meta"]["dtype"] == "float64"
    for key in ("numpy", "scipy", "numba", "blas", "numba_threads"):
        assert key in payload["meta"]["machine"]
    assert len(payload["rows"]) == len(result.rows)
    with open(out / "compare.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == len(result.rows)
    assert list(rows[0]) == [f for f in ROW_FIELDS if f != "history"]  # sweeps: JSON only
    with open(out / "compare_runs.csv", newline="") as fh:
        assert len(list(csv.DictReader(fh))) == len(result.runs)
    assert not list(out.glob(".*.tmp")), "no temporary files may be left behind"


def test_threads_recorded_as_used(synthetic_run):
    result, _ = synthetic_run
    meta = result.meta
    # threads=1 on a machine whose default is larger: the record must say 1, not the default
    assert meta["threads"] == 1 and meta["machine"]["numba_threads"] == 1
    assert all(b["num_threads"] == 1 for b in meta["machine"]["blas"])


def test_table_fits_100_columns_and_wide_shows_more(synthetic_run):
    result, _ = synthetic_run
    narrow = format_compare(result)
    assert max(len(line) for line in narrow.splitlines()) <= 100
    wide = format_compare(result, wide=True)
    assert max(len(line) for line in wide.splitlines()) > 100
    assert "resid est" in wide and "resid est" not in narrow
    assert "-- lowrank (gap-robust)" in narrow and "-- eta, uniform weights" in narrow


def test_result_repr_is_short(synthetic_run):
    result, _ = synthetic_run
    text = repr(result)
    assert len(text) < 300 and "array" not in text and "synthetic" in text
    problem = build_problem("synthetic", random_state=3, **SYNTH)
    assert repr(problem) == "Problem(name='synthetic', shape=120x90, kernel='given')"


def test_default_race_has_the_new_methods():
    assert {"block_krylov", "generalized_nystrom"} <= set(DEFAULT_METHODS)


def test_structured_exact_row_on_a_sparse_graph():
    graph = make_directed_graph(150, n_communities=3, avg_degree=4.0, random_state=0)
    problem = problem_from_data(graph.adjacency, name="tiny-graph", kernel="sne")
    assert problem.supports_structured
    result = run_compare(
        [problem],
        rank=RANK,
        eps=(0.1,),
        weights=("uniform", "lowrank"),
        seeds=1,
        methods=("tsvd", "rsvd"),
        residual=False,
        progress=False,
    )
    exact = [r for r in result.rows if r["method"] == STRUCTURED_NAME]
    assert len(exact) == 2
    for row in exact:
        assert row["converged"] and row["value"] < 1e-8
        assert row["e2e_seconds"] == pytest.approx(row["kernel_seconds"] + row["seconds"], rel=0.5)
        assert row["speedup_vs_rsvd"] is not None and row["speedup_vs_rsvd"] > 0
    s_dense = np.linalg.svd(problem.G, compute_uv=False)[:RANK]
    np.testing.assert_allclose(result.meta["reference"]["tiny-graph"]["s"], s_dense, rtol=1e-10)


def test_reference_cache_is_keyed_by_the_definition(tmp_path):
    """A kernel that differs in the last bit (fresh vs cached Numba) still hits the cache."""
    graph = make_directed_graph(120, n_communities=3, avg_degree=4.0, random_state=0)
    first = problem_from_data(graph.adjacency, name="g", kernel="sne")
    second = problem_from_data(graph.adjacency, name="g", kernel="sne")
    second.G = np.nextafter(second.G, np.inf)  # one ulp everywhere
    assert definition_key(first.definition) == definition_key(second.definition)
    ref = reference_svd(first.G, RANK, cache_dir=tmp_path, key=first.definition)
    again = reference_svd(second.G, RANK, cache_dir=tmp_path, key=second.definition)
    assert not ref.info["cached"] and again.info["cached"]
    other = problem_from_data(graph.adjacency, name="g", kernel="sne", bandwidth_factor=2.0)
    assert definition_key(other.definition) != definition_key(first.definition)


def test_paper_numbers_lookup():
    assert paper_runtime("cora", 0.1, "asym_nystrom") == 0.160
    assert paper_runtime("pubmed", 1e-2, "tsvd") == 9.223
    assert paper_runtime("synthetic", 0.1, "tsvd") is None
    assert paper_runtime("cora", 0.5, "tsvd") is None
    assert paper_runtime("cora", 0.1, "block_krylov") is None
    # the printed speedups are RSVD / ours, to the paper's rounding
    for ds in ("cora", "citeseer", "pubmed"):
        for e in (0.1, 0.01):
            ratio = paper_runtime(ds, e, "rsvd") / paper_runtime(ds, e, "asym_nystrom")
            assert math.isclose(ratio, paper_speedup(ds, e), rel_tol=0.02)


def test_methods_not_in_the_paper_show_na():
    base = {f: None for f in ROW_FIELDS}
    base.update(
        method="block_krylov",
        stop="reference",
        n_converged=5,
        n_seeds=5,
        effort=2,
        effort_param="n_iter",
        converged=True,
    )
    assert _display_row(base, paper_key_known=True)["paper"] == "n/a"
    assert _display_row(base, paper_key_known=True)["effort_label"] == "q=2"
    assert _display_row(base, paper_key_known=False)["paper"] == "-"
    base.update(method="asym_nystrom_paper", paper_speedup=1.71)
    assert _display_row(base, paper_key_known=True)["paper"] == "1.71x"


def test_dataset_shapes_match_the_data():
    for name in ("cora", "citeseer-features"):
        assert problem_data(name).shape == DATASET_SHAPES[name]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"rank": 0}, "rank"),
        ({"eps": (0.1, -1.0)}, "eps"),
        ({"weights": ("l2",)}, "weights"),
        ({"methods": ("svd",)}, "methods"),
        ({"seeds": 0}, "seeds"),
        ({"budget_seconds": -1.0}, "budget_seconds"),
        ({"max_effort": "lots"}, "max_effort"),
        ({"threads": 10_000}, "threads must be at most"),
        ({"rank": 1201, "problem_options": {"shape": (1500, 1200)}}, "rank must be at most"),
    ],
)
def test_bad_arguments_name_the_parameter(kwargs, match, monkeypatch):
    def no_work(*args, **kwargs):
        raise AssertionError("the problem was built before the arguments were checked")

    monkeypatch.setattr(compare_run, "build_problem", no_work)
    with pytest.raises(ValueError, match=match):
        run_compare("synthetic", progress=False, **kwargs)


def test_unknown_dataset():
    with pytest.raises(ValueError, match="datasets"):
        run_compare("mnist", progress=False)


def test_threads_bound_is_numbas_pool():
    assert max_threads() >= 1
    with pytest.raises(ValueError, match="threads"):
        run_compare("synthetic", threads=max_threads() + 1, progress=False)


def test_bad_out_is_found_before_any_work(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")

    def no_work(*args, **kwargs):
        raise AssertionError("work started before --out was checked")

    monkeypatch.setattr(compare_run, "build_problem", no_work)
    with pytest.raises(ValueError, match="out="):
        run_compare("synthetic", out=blocker / "results", progress=False)
    with pytest.raises(ValueError, match="out must name a directory"):
        run_compare("synthetic", out="", progress=False)


def test_check_out_dir(tmp_path):
    target = tmp_path / "new" / "dir"
    assert check_out_dir(target) == target and target.is_dir()
    assert list(target.iterdir()) == []  # the probe file is removed
    (tmp_path / "f").write_text("x")
    with pytest.raises(ValueError, match=r"--out='.*f' exists and is not a directory"):
        check_out_dir(tmp_path / "f", "--out")
    with pytest.raises(ValueError, match="--out=.*not a writable directory"):
        check_out_dir(tmp_path / "f" / "sub", "--out")


def test_writes_are_atomic(tmp_path):
    path = tmp_path / "rows.csv"
    write_csv(path, [{"a": 1}])
    before = path.read_text()

    class Boom:
        def __str__(self):
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        write_csv(path, [{"a": 2}, {"a": Boom()}])
    assert path.read_text() == before  # the old file is intact, not truncated
    with pytest.raises(KeyError), atomic_path(tmp_path / "fig.png") as tmp:
        tmp.write_text("half")
        raise KeyError("fail")
    assert not (tmp_path / "fig.png").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows.csv"]


def test_vacuous_tolerance_is_flagged():
    """The low-rank excess is at most ||G||_F / ||G - G_r||_F - 1 (0.82 here at rank 3); a
    tolerance above that bound (eps >= 1 is refused outright) is met by any answer."""
    result = run_compare(
        "synthetic",
        rank=3,
        eps=(0.9,),
        weights=("lowrank",),
        seeds=1,
        methods=("rsvd", "asym_nystrom"),
        residual=False,
        problem_options={"shape": (60, 50)},
        progress=False,
    )
    bound = result.meta["reference"]["synthetic"]["value_max"]["lowrank"]
    assert bound == pytest.approx(0.823, abs=1e-3)
    text = format_compare(result)
    assert "VACUOUS" in text and "vacuous" in text
    assert max(len(line) for line in text.splitlines()) <= 100


_JIT_PROBE = textwrap.dedent("""
    import gc, json
    from numba.core.dispatcher import Dispatcher
    import ksvd_bench.race.problems as problems  # the kernel builds are its calls
    from ksvd_bench.datasets import make_directed_graph
    from ksvd_bench.race.problems import problem_from_data

    def n_overloads():
        return sum(len(d.overloads) for d in gc.get_objects() if isinstance(d, Dispatcher))

    calls = []
    inner = problems.ksvd_kernel
    def counting(*args, **kwargs):
        before = n_overloads()
        out = inner(*args, **kwargs)
        calls.append(n_overloads() - before)
        return out
    problems.ksvd_kernel = counting
    A = make_directed_graph(400, n_communities=3, avg_degree=4.0, random_state=0).adjacency
    problem_from_data(A, name="g", kernel="sne")
    print(json.dumps(calls))
""")


def test_timed_kernel_build_compiles_nothing():
    """The warm-up reaches every compile the timed build needs (serial and parallel).

    Run in a fresh interpreter, where nothing is compiled or loaded yet: the kernel builders
    have a serial compile for small outputs and a parallel one for large ones, and a warm-up
    on a small slice alone left the parallel one to the timed build (3-7 s of "kernel s" on
    a first run). Every Numba dispatcher's overloads are counted around each build.
    """
    proc = subprocess.run(
        [sys.executable, "-c", _JIT_PROBE], capture_output=True, text=True, timeout=600, check=True
    )
    calls = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(calls) >= 2 and sum(calls[:-1]) > 0, calls  # the warm-ups loaded something
    assert calls[-1] == 0, f"the timed build compiled or loaded {calls[-1]} functions"


def _entry(**kw):
    """A driver history entry with the whole-triplet fields (exact unless overridden)."""
    return {
        "value": 0.05,
        "residual_estimate": 0.01,
        "sv_error": 0.01,
        "triplet_residual": 0.02,
        "n_warnings": 0,
        "warnings": [],
        "reliable": True,
        **kw,
    }


def test_an_answer_meets_eps_only_as_a_whole_triplet():
    from ksvd_bench.race.common import meets

    assert meets(_entry(), 0.1)
    # the reproducer: the measure is met (lowrank 0.099) while s is 30-42% of the truth
    assert not meets(_entry(value=0.099, sv_error=0.7), 0.1)
    assert not meets(_entry(triplet_residual=0.5), 0.1)
    assert not meets(_entry(reliable=False), 0.1)
    assert not meets(_entry(value=0.2), 0.1)
    # a check not computed (no reference: NaN) does not block
    assert meets(_entry(sv_error=math.nan), 0.1)
    # the reference-free stop reads its own key
    assert meets(_entry(residual_estimate=0.5), 0.1, "residual_estimate") is False
    assert meets(_entry(), 0.1, "residual_estimate")


def test_first_hit_skips_answers_with_wrong_values():
    history = [
        _entry(sv_error=0.4),
        _entry(value=0.04, sv_error=0.05, reliable=False),
        _entry(value=0.03, sv_error=0.02),
    ]
    assert first_hit(history, 0.1, "value") == 2
    # the residual stop cannot see the singular-value error, but refuses unreliable answers
    assert first_hit(history, 0.1, "residual_estimate", whole=False) == 0
    history[0]["reliable"] = False
    assert first_hit(history, 0.1, "residual_estimate", whole=False) == 2


def test_rows_carry_the_verdict_and_the_table_shows_it(synthetic_run):
    result, out = synthetic_run
    tsvd = [r for r in result.rows if r["method"] == "tsvd"]
    assert all(r["sv_error"] < 1e-12 and r["triplet_residual"] < 1e-10 for r in tsvd)
    for r in result.rows:
        assert r["n_warnings"] >= 0 and isinstance(r["warnings"], list)
        if r["converged"] and r["stop"] == "reference":
            assert r["reliable"] and not r["sv_error"] > r["eps"]
    text = format_compare(result)
    assert "sv err" in text and "warn" in text
    with open(out / "compare.csv", newline="") as fh:
        assert {"sv_error", "n_warnings", "warnings", "reliable"} <= set(next(csv.reader(fh)))


def test_readme_table_is_rendered_from_a_record(synthetic_run, tmp_path, capsys):
    from ksvd_bench.cli import main
    from ksvd_bench.race.compare.files import readme_table, write_record

    result, _ = synthetic_run
    result.meta["command_line"] = "ksvd-bench compare --dataset synthetic"
    path = write_record(result, tmp_path / "race.json")
    text = readme_table(path)
    assert "| method | singular_values | uniform | lowrank |" in text
    assert "Regenerate: `ksvd-bench compare --dataset synthetic`" in text
    assert "load" in text and "eps = 1e-09" in text
    rsvd = next(line for line in text.splitlines() if line.startswith("| rsvd |"))
    assert "1.00x" in rsvd
    assert main(["compare", "--readme-table", str(path)]) == 0
    assert capsys.readouterr().out == text


def test_the_recorded_race_behind_the_readme_renders():
    """The README's race tables come from a record kept in the repository."""
    from pathlib import Path

    from ksvd_bench.race.compare.files import load_record, readme_table

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "recorded" / "race_cora.json"
    record = load_record(path)
    meta = record["meta"]
    assert meta["datasets"] == ["cora"] and meta["rank"] == 20
    assert meta["command_line"].startswith("ksvd-bench compare")
    assert {"cpu_count", "numpy", "numba"} <= set(meta["machine"])
    assert len(meta["load_average"]["before"]) == 3
    text = readme_table(record)
    assert "**cora 2708x2708, r = 20, eps = 0.1**" in text
    assert "| tsvd (structured) |" in text and "Regenerate: `ksvd-bench compare" in text


def test_result_files_get_the_ordinary_mode(tmp_path):
    """A result file is readable by the group and others (mkstemp alone makes it 0600)."""
    import os
    import stat

    mask = os.umask(0o022)
    try:
        path = write_csv(tmp_path / "rows.csv", [{"a": 1}])
    finally:
        os.umask(mask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


# --------------------------------------------------------------------------- issue 15, part 3

RARE = {"shape": (200, 160)}


def test_rare_clusters_problem_keeps_its_points_and_a_lazy_source_equal_to_G():
    problem = build_problem("rare-clusters", random_state=0, **RARE)
    assert problem.G.shape == (200, 160) and problem.kernel == "sne"
    assert problem.params["center"] is False and len(problem.params["rare"]) == 6
    X, Z = problem.points
    assert X.shape == (200, 64) and Z.shape == (160, 64)
    src = problem.lazy_source()
    assert hasattr(src, "joint_psd")
    np.testing.assert_allclose(src.rows(np.arange(7)), problem.G[:7], rtol=1e-10, atol=1e-14)
    # the same seed rebuilds the same problem, and keys the reference cache by its points
    again = build_problem("rare-clusters", random_state=0, **RARE)
    assert definition_key(again.definition) == definition_key(problem.definition)
    other = build_problem("rare-clusters", random_state=1, **RARE)
    assert definition_key(other.definition) != definition_key(problem.definition)


def test_shape_applies_to_the_shaped_datasets_only():
    with pytest.raises(ValueError, match="shape applies only"):
        build_problem("cora", shape=(50, 50))
    with pytest.raises(ValueError, match=r"n_clusters must be <= min\(n, m\)"):
        build_problem("rare-clusters", shape=(10, 10))


def test_new_entries_are_raced_by_default_and_say_what_they_run():
    from ksvd_bench.race.compare.settings import VARIANTS, entry_options

    for name in (
        "asym_nystrom_paper",
        "asym_nystrom_arp",
        "asym_nystrom_rpcholesky",
        "asym_nystrom_aca",
    ):
        assert name in DEFAULT_METHODS
    assert VARIANTS["asym_nystrom_paper"] == ("asym_nystrom", {"core": "paper", "check_passes": 0})
    # the default entry is the solvers' stable core with its check, not the paper's method
    assert entry_options("asym_nystrom") == {
        "solver": "asym_nystrom",
        "sampling": "uniform",
        "core": "stable",
        "check_passes": 1,  # one pass, started from the sample (issue 32)
    }
    assert entry_options("asym_nystrom_arp")["sampling"] == "arp"
    assert "core" not in entry_options("asym_nystrom_rpcholesky")


def test_paper_numbers_go_beside_the_papers_method_only():
    from ksvd_bench.race.compare.cells import _paper_fields
    from ksvd_bench.race.paper_runtime import paper_entry_key

    assert _paper_fields("cora", 0.1, "asym_nystrom_paper") == {
        "paper_seconds": 0.160,
        "paper_speedup": 1.71,
    }
    assert _paper_fields("cora", 0.1, "asym_nystrom") == {}
    assert _paper_fields("cora", 0.1, "rsvd")["paper_seconds"] == 0.274
    assert paper_entry_key("asym_nystrom") is None
    assert paper_entry_key("asym_nystrom_paper") == "asym_nystrom"


def test_rpcholesky_is_na_on_a_graph_and_nothing_runs():
    graph = make_directed_graph(150, n_communities=3, avg_degree=4.0, random_state=0)
    problem = problem_from_data(graph.adjacency, name="tiny-graph", kernel="sne")
    result = run_compare(
        [problem],
        rank=RANK,
        eps=(0.1, 0.01),
        weights=("uniform", "lowrank"),
        seeds=2,
        methods=("rsvd", "asym_nystrom_rpcholesky"),
        residual=False,
        structured=False,
        progress=False,
    )
    na = [r for r in result.rows if r["method"] == "asym_nystrom_rpcholesky"]
    assert len(na) == 4
    for r in na:
        assert r["stop"] == "n/a" and r["n_seeds"] == 0 and not r["converged"]
        assert r["seconds"] is None and "joint PSD" in r["note"]
        assert r["speedup_vs_rsvd"] is None
    assert not [r for r in result.runs if r["method"] == "asym_nystrom_rpcholesky"]
    text = format_compare(result)
    assert "asym_nys_rpcholesky   n/a" in text
    assert "n/a: asym_nys_rpcholesky on tiny-graph" in text
    assert max(len(line) for line in text.splitlines()) <= 100


@pytest.fixture(scope="module")
def rare_run():
    methods = (
        "rsvd",
        "asym_nystrom",
        "asym_nystrom_paper",
        "asym_nystrom_arp",
        "asym_nystrom_rpcholesky",
        "asym_nystrom_aca",
    )
    return run_compare(
        "rare-clusters",
        rank=RANK,
        eps=(0.1,),
        weights=("lowrank",),
        seeds=1,
        methods=methods,
        residual=False,
        problem_options=RARE,
        progress=False,
        random_state=0,
    )


def test_rare_clusters_race_runs_every_sampler(rare_run):
    rows = {r["method"]: r for r in rare_run.rows}
    assert set(rows) == set(rare_run.meta["methods"])
    assert all(r["stop"] == "reference" and r["n_seeds"] == 1 for r in rows.values())
    # RPCholesky solves the lazy point source; two whole passes (its check) at most, no more
    rp = rows["asym_nystrom_rpcholesky"]
    assert rp["converged"] and rp["value"] <= 0.1
    assert rp["e2e_source"] == "KernelSource" and rp["n_passes"] <= 2.5
    assert rare_run.meta["method_options"]["asym_nystrom_paper"] == {
        "solver": "asym_nystrom",
        "core": "paper",
        "check_passes": 0,
        "sampling": "uniform",
    }
    text = format_compare(rare_run)
    assert (
        "asym_nystrom_paper: sampling=uniform, core=paper, check_passes=0 (the paper's"
        in " ".join(text.split())
    )
    assert max(len(line) for line in text.splitlines()) <= 100
    # no paper numbers off the paper's datasets
    assert all(r["paper_seconds"] is None for r in rows.values())


def test_na_rows_render_in_the_readme_table():
    from ksvd_bench.race.compare.files import _cell

    assert _cell({"stop": "n/a", "converged": False}) == "n/a"
    base = {f: None for f in ROW_FIELDS}
    base.update(
        method="asym_nystrom_rpcholesky",
        stop="n/a",
        n_converged=0,
        n_seeds=0,
        effort_param="n_samples",
        converged=False,
    )
    shown = _display_row(base, paper_key_known=True)
    assert shown["conv"] == "n/a" and shown["name"] == "asym_nys_rpcholesky"
    assert shown["seconds"] == "-" and shown["paper"] == "n/a"


def test_rows_record_every_seed_they_ran(synthetic_run):
    result, _ = synthetic_run
    ref = [r for r in result.rows if r["stop"] == "reference"]
    assert {(r["n_seeds"], r["n_seeds_asked"]) for r in ref} == {(2, 2)}
    assert result.meta["seeds_run"]["synthetic"]["rsvd"] == {
        "eta[singular_values]": 2,
        "eta[uniform]": 2,
        "lowrank": 2,
    }
    assert not any("budget ran out" in (r["note"] or "") for r in result.rows)


def test_rows_cut_short_by_the_budget_say_so_everywhere(tmp_path):
    """A budget below one seed's sweep: every raced cell runs 1 of its 2 seeds, and the
    record (rows, meta, JSON), the table, the README cell and the headline say so."""
    import re

    from ksvd_bench.race.compare.files import _cell
    from ksvd_bench.report import headline

    result = run_compare(
        "synthetic",
        rank=RANK,
        eps=0.1,
        weights=("uniform",),
        seeds=2,
        methods=("tsvd", "rsvd"),
        budget_seconds=1e-9,
        problem_options=SYNTH,
        out=tmp_path,
        progress=False,
        random_state=3,
    )
    ref = [r for r in result.rows if r["stop"] == "reference"]
    assert {(r["n_seeds"], r["n_seeds_asked"]) for r in ref} == {(1, 2)}
    assert all("1 of 2 seeds: the cell's 1e-09 s budget ran out first" in r["note"] for r in ref)
    # the residual stop runs seed 1 by design: it asked 1
    res = [r for r in result.rows if r["stop"] == "residual"]
    assert res and {(r["n_seeds"], r["n_seeds_asked"]) for r in res} == {(1, 1)}
    assert result.meta["n_seeds"] == 2
    assert result.meta["seeds_run"] == {
        "synthetic": {"tsvd": {"eta[uniform]": 1}, "rsvd": {"eta[uniform]": 1}}
    }
    saved = json.loads((tmp_path / "compare.json").read_text())
    assert saved["meta"]["seeds_run"] == result.meta["seeds_run"]
    assert [(r["n_seeds"], r["n_seeds_asked"]) for r in saved["rows"]] == [
        (r["n_seeds"], r["n_seeds_asked"]) for r in result.rows
    ]
    assert re.search(r"^\s*rsvd\s+[01]/1\* ", format_compare(result), re.MULTILINE)
    rsvd = next(r for r in ref if r["method"] == "rsvd")
    assert _cell(rsvd).endswith(", 1 of 2 seeds)" if not rsvd["converged"] else ", 1 of 2 seeds")
    head = headline(result.rows)
    assert head[0].endswith("median over 2 seeds unless marked):")
    assert "on 1 of 2 seeds" in " ".join(head)
    page = (tmp_path / "report.html").read_text()
    assert "<td class='num s-short'>1 of 2</td>" in page


@pytest.mark.parametrize("route_limit", [10**9, 0])  # the pass over G, then products
def test_race_measures_lowrank_with_the_drivers_code(monkeypatch, route_limit):
    """One Scorer (issue 34): the race's measure of an answer is the driver's low-rank code."""
    import ksvd_bench.scoring as scoring
    import solvers
    from ksvd_bench.metrics import eta
    from ksvd_bench.race.compare import cells

    monkeypatch.setattr(scoring, "LOWRANK_PASS_MAX_ENTRIES", route_limit)
    assert not hasattr(cells, "Scorer")
    rng = np.random.default_rng(3)
    G = rng.standard_normal((40, 6)) @ rng.standard_normal((6, 30))
    G += 0.01 * rng.standard_normal(G.shape)
    ref = reference_svd(G, 4)
    ans = solvers.svd(G, 4, method="rsvd", n_iter=0, random_state=0, check_passes=0)
    measure = cells.AnswerMeasure(G, G, ref, 4)
    value = measure("lowrank", ans)
    expected, fro2 = scoring.lowrank_score(G, G, ref, ans, rank=4)
    assert value == expected and 0 < value < 1
    assert (measure.fro2 is None) == (route_limit > 0)  # ||G||_F only on the products route
    assert fro2 == measure.fro2 and (fro2 is None or fro2 == pytest.approx(np.sum(G * G)))
    assert measure("uniform", ans) == float(eta(ref, ans, weights="uniform", rank=4))
