"""The scale study (``ksvd-bench scale``): cells, references, exponents, files and the CLI."""

import json

import numpy as np
import pytest

from ksvd_bench.cli import main
from ksvd_bench.race import scale
from ksvd_bench.race.scale import (
    MethodRunner,
    ProblemSpec,
    SolverCall,
    compute_reference,
    fit_exponent,
    format_scale,
    register_runner,
    run_isolated,
    run_scale,
)


def _by(rows, **match):
    return [r for r in rows if all(r[k] == v for k, v in match.items())]


# --------------------------------------------------------------------------- the CLI smoke test


def test_scale_quick_cli_smoke(tmp_path, capsys):
    # the quick configuration of part a, cut to two sizes of the exact method: each cell and
    # each reference in its own process (a few seconds each, mostly Numba loading its cache)
    out = tmp_path / "scale"
    status = main(["scale", "--quick", "--part", "a", "--sizes", "1000,2000", "--methods",
                   "tsvd", "--threads", "1", "--out", str(out), "--no-progress"])
    assert status == 0
    text = capsys.readouterr().out
    assert "growth exponents" in text and "exact (structured operator)" in text
    for name in ("scale.csv", "scale.json", "scale_exponents.csv", "scale.png"):
        assert (out / name).stat().st_size > 0
    payload = json.loads((out / "scale.json").read_text())
    rows = payload["rows"]
    assert [(r["n"], r["status"]) for r in rows] == [(1000, "ok"), (2000, "ok")]
    for r in rows:
        assert r["seconds"] > 0 and r["passes"] > 0
        # the structured operator's set-up is sparse work, and its exact path evaluates no
        # entry of G
        assert r["setup_passes"] == 0 and r["entries"] == 0
        # the cell's own process: its peak is at least what it held once its data existed
        assert r["peak_rss_mb"] >= r["base_rss_mb"] > 10
        # the exact method against the exact reference
        assert r["subspace_error"] < 1e-8 and r["sv_error"] < 1e-10
    (fit,) = payload["exponents"]
    assert fit["method"] == "tsvd" and fit["n_points"] == 2 and np.isfinite(fit["exponent"])
    assert all(ref["kind"] == "exact" for ref in payload["references"])
    assert payload["meta"]["threads"] == 1 and payload["meta"]["isolate"] is True
    assert (out / "scale.csv").read_text().splitlines()[0].startswith("part,n,m,method")


# --------------------------------------------------------------------------- part b, in process


@pytest.fixture(scope="module")
def part_b(tmp_path_factory):
    """Part b at two small sizes in process; the larger one gets a block Krylov reference."""
    out = tmp_path_factory.mktemp("scale_b")
    result = run_scale("b", sizes={"b": (400, 800)}, rank=5,
                       methods={"b": ("block_krylov", "generalized_nystrom", "asym_nystrom")},
                       threads=1, isolate=False, dense_reference_max_entries=400 * 400,
                       out=out, progress=False)
    return result, out


def test_part_b_accuracy_at_the_fixed_efforts(part_b):
    result, _ = part_b
    rows = result.rows
    assert len(rows) == 6 and all(r["status"] == "ok" for r in rows)
    # the generator's gap at r: one-pass and Krylov methods meet 1e-2 at their fixed efforts
    assert all(r["subspace_error"] < 1e-4 for r in _by(rows, method="block_krylov"))
    assert all(r["subspace_error"] < 1e-2 for r in _by(rows, method="generalized_nystrom"))
    assert {r["passes"] for r in _by(rows, method="generalized_nystrom")} == {1.0}
    # SNE from points: one set-up pass (the row normalisers), counted into entries read
    for r in rows:
        assert r["setup_passes"] == 1
        assert r["entries"] == round((r["passes"] + 1) * r["n"] * r["m"])
        assert r["peak_rss_mb"] is None  # in process: not measured


def test_part_b_references_exact_then_labelled_krylov(part_b):
    result, _ = part_b
    small, large = sorted(result.references, key=lambda r: r["n"])
    assert small["kind"] == "exact" and small["label"] == "exact (dense LAPACK)"
    assert large["kind"] == "block_krylov" and large["label"].startswith("block_krylov p=10 q=2")
    assert "not exact" in large["label"] and large["estimated_error"] < 1e-8
    assert all(r["reference"] == large["label"] for r in _by(result.rows, n=800))


def test_block_krylov_reference_agrees_with_dense():
    from types import SimpleNamespace

    from ksvd_bench.metrics import subspace_error

    spec = ProblemSpec("b", 500, 500, 5, 3)
    dense = compute_reference(spec, dense_max_entries=10**9)
    krylov = compute_reference(spec, dense_max_entries=0)
    a = SimpleNamespace(**dict(zip("UsV", dense["answer"], strict=True)))
    b = SimpleNamespace(**dict(zip("UsV", krylov["answer"], strict=True)))
    assert max(subspace_error(a, b, rank=5)) < 1e-10
    np.testing.assert_allclose(a.s[:5], b.s[:5], rtol=1e-10)
    # and the dense route (eigh of the Gram matrix) equals a full SVD of the same G, to
    # rounding relative to s_1 (squaring costs the small values relative accuracy)
    G = scale.make_source(spec, scale.make_data(spec)).dense()
    s = np.linalg.svd(G, compute_uv=False)[:a.s.size]
    np.testing.assert_allclose(a.s, s, rtol=0, atol=1e-12 * s[0])


def test_part_b_files_and_merge(part_b, tmp_path):
    result, out = part_b
    assert set(result.paths) == {"csv", "exponents_csv", "json", "png"}
    # a later run of one cell, merged: the other cells stay, the redone one is replaced
    import shutil

    merged_dir = tmp_path / "merged"
    shutil.copytree(out, merged_dir)
    again = run_scale("b", sizes={"b": (800,)}, rank=5, methods={"b": ("block_krylov",)},
                      threads=1, isolate=False, out=merged_dir, merge=True, progress=False)
    assert len(again.rows) == 6
    assert len(_by(again.rows, n=800, method="block_krylov")) == 1
    assert {f["method"]: f["n_points"] for f in again.exponents}["block_krylov"] == 2
    payload = json.loads((merged_dir / "scale.json").read_text())
    assert len(payload["rows"]) == 6 and payload["meta"]["merged"] is True


def test_format_scale_shows_every_cell(part_b):
    text = format_scale(part_b[0])
    assert "fastest cell with subspace error <= 0.01" in text
    assert text.count("generalized_nystrom") >= 3  # two cells and one exponent row
    assert "block_krylov p=10 q=2 (not exact" in text


# --------------------------------------------------------------------------- isolation


def test_timeout_stops_the_cell_and_skips_larger_sizes():
    # a limit far below a process start: the first cell times out, the next is skipped
    result = run_scale("b", sizes={"b": (400, 800)}, rank=5, methods={"b": ("rsvd",)},
                       threads=1, time_limit=0.05, reference="none", progress=False)
    first, second = sorted(result.rows, key=lambda r: r["n"])
    assert first["status"] == "timeout" and "time limit" in first["error"]
    assert second["status"] == "skipped"
    assert result.exponents[0]["exponent"] is None


def test_memory_limit_stops_the_cell_and_skips_larger_sizes():
    # 64 MB is below what a process holding numpy, scipy and numba needs: stopped at once
    result = run_scale("b", sizes={"b": (400, 800)}, rank=5, methods={"b": ("rsvd",)},
                       threads=1, memory_limit=64 * 2**20, reference="none", progress=False)
    first, second = sorted(result.rows, key=lambda r: r["n"])
    assert first["status"] == "memory" and "over the memory limit of 0.1 GiB" in first["error"]
    assert second["status"] == "skipped" and second["error"] == "memory at a smaller size"


def test_isolated_error_comes_back_as_a_message():
    status, message = run_isolated(scale.run_cell, {"spec": ProblemSpec("b", 400, 400, 5, 0),
                                                   "runner": "no_such_method"})
    assert status == "error" and "no_such_method" in message


# --------------------------------------------------------------------------- runners, fits


def test_register_runner_adds_a_method(monkeypatch):
    monkeypatch.setattr(scale, "RUNNERS", dict(scale.RUNNERS))
    runner = MethodRunner("rsvd_q1", SolverCall("rsvd"),
                          scale._effort_block_krylov, ("b",), "rsvd with one power iteration")
    register_runner(runner)
    with pytest.raises(ValueError, match="a runner named 'rsvd_q1' exists"):
        register_runner(runner)
    with pytest.raises(ValueError, match="runner.parts must be"):
        register_runner(MethodRunner("x", SolverCall("rsvd"), scale._effort_rsvd, ("c",)),
                        replace=True)
    result = run_scale("b", sizes={"b": (400,)}, rank=5, methods={"b": ("rsvd_q1",)},
                       threads=1, isolate=False, reference="none", progress=False)
    (row,) = result.rows
    assert row["method"] == "rsvd_q1" and row["effort"] == "p=10 q=1" and row["passes"] == 4.0
    with pytest.raises(ValueError, match=r"methods \['rsvd_q1'\] do not apply to part a"):
        run_scale("a", methods={"a": ("rsvd_q1",)}, isolate=False)


def test_best_cells_picks_the_fastest_accurate_cell():
    rows = [
        {"part": "b", "n": 10, "method": "x", "status": "ok", "seconds": 1.0,
         "subspace_error": 0.5},
        {"part": "b", "n": 10, "method": "y", "status": "ok", "seconds": 3.0,
         "subspace_error": 1e-3},
        {"part": "b", "n": 10, "method": "z", "status": "ok", "seconds": 2.0,
         "subspace_error": 5e-3},
        {"part": "b", "n": 20, "method": "x", "status": "timeout"},
        {"part": "b", "n": 20, "method": "y", "status": "ok", "seconds": 1.0,
         "subspace_error": 0.2},
    ]
    small, large = scale.best_cells(rows)
    assert (small["n"], small["method"], small["seconds"]) == (10, "z", 2.0)
    assert (large["n"], large["method"]) == (20, None)


def test_fit_exponent():
    n = np.array([1e3, 2e3, 4e3, 8e3])
    assert fit_exponent(n, 3e-6 * n ** 1.5) == pytest.approx(1.5, abs=1e-12)
    assert fit_exponent([1000], [1.0]) is None
    assert fit_exponent([1000, 1000], [1.0, 2.0]) is None


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(parts="c"), "parts must be a non-empty list"),
        (dict(parts="b", sizes={"b": (30,)}, rank=10), r"sizes of part b must be >= 4 \* rank"),
        (dict(parts="b", methods={"b": ("qr",)}), "methods must be a non-empty list"),
        (dict(parts="b", rank=0), "rank must be a positive int"),
        (dict(parts="b", time_limit=-1.0), "time_limit must be a finite positive"),
        (dict(parts="b", reference="exact"), "reference must be 'auto' or 'none'"),
        (dict(parts="b", dtype="int8"), "dtype must be float32 or float64"),
        (dict(parts="b", memory_limit=0), "memory_limit must be a positive number of bytes"),
    ],
)
def test_run_scale_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        run_scale(**kwargs, progress=False)


@pytest.mark.parametrize(
    "argv, match",
    [
        (["--sizes", "1000"], "argument --sizes: needs --part a or --part b"),
        (["--part", "b", "--sizes", "100,abc"], "argument --sizes: expected comma-separated"),
        (["--part", "b", "--sizes", "2000.5"], "argument --sizes: expected comma-separated"),
        (["--part", "b", "--sizes", "40"], r"argument --sizes: every size must be >= 4 \* "
                                            r"--rank = 80"),
        (["--methods", "qr"], "argument --methods: unknown qr"),
        (["--time-limit", "-1"], "argument --time-limit"),
        (["--part", "c"], "argument --part: invalid choice"),
        (["--rank", "0"], "argument --rank"),
        (["--memory-limit", "0"], "argument --memory-limit"),
    ],
)
def test_cli_flags_are_checked_before_any_work(argv, match, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["scale", *argv, "--out", str(tmp_path)])
    assert exc.value.code == 2
    import re

    assert re.search(match, capsys.readouterr().err)
