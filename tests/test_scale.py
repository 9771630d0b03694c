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
    runners,
)
from ksvd_bench.race.scale.cells import CellRunner


def _by(rows, **match):
    return [r for r in rows if all(r[k] == v for k, v in match.items())]


# --------------------------------------------------------------------------- the CLI smoke test


def test_scale_quick_cli_smoke(tmp_path, capsys):
    # the quick configuration of part a, cut to two sizes of the exact method: each cell and
    # each reference in its own process (a few seconds each, mostly Numba loading its cache)
    out = tmp_path / "scale"
    status = main(
        [
            "scale",
            "--quick",
            "--part",
            "a",
            "--sizes",
            "1000,2000",
            "--methods",
            "tsvd",
            "--threads",
            "1",
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    assert status == 0
    text = capsys.readouterr().out
    assert "growth exponents" in text and "exact (structured operator)" in text
    assert max(len(line) for line in text.splitlines() if not line.startswith("wrote")) <= 100
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
        # every row carries its problem, and its solve's warnings (none here)
        assert (r["rank"], r["seed"], r["dtype"], r["device"]) == (20, 0, "float64", "cpu")
        assert r["n_warnings"] == 0 and r["warnings"] == [] and r["reliable"] is True
    (fit,) = payload["exponents"]
    # two sub-second sizes cannot support a growth exponent: none is fitted, and it says so
    assert fit["method"] == "tsvd" and fit["n_points"] == 2 and fit["exponent"] is None
    assert fit["fit_note"].startswith("not fitted") and "not fitted" in text
    assert all(ref["kind"] == "exact" for ref in payload["references"])
    assert payload["meta"]["threads"] == 1 and payload["meta"]["isolate"] is True
    header = (out / "scale.csv").read_text().splitlines()[0]
    assert header.startswith("part,n,m,rank,seed,dtype,device,method")
    # issue 19 section 1: no row claims converged beside a failed part of the rule
    from ksvd_bench.race.common import audit_rows

    assert audit_rows(rows) == []


# --------------------------------------------------------------------------- part b, in process


@pytest.fixture(scope="module")
def part_b(tmp_path_factory):
    """Part b at two small sizes in process; the larger one gets a block Krylov reference."""
    out = tmp_path_factory.mktemp("scale_b")
    result = run_scale(
        "b",
        sizes={"b": (400, 800)},
        rank=5,
        methods={"b": ("block_krylov", "generalized_nystrom", "asym_nystrom")},
        threads=1,
        isolate=False,
        dense_reference_max_entries=400 * 400,
        out=out,
        progress=False,
    )
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
    s = np.linalg.svd(G, compute_uv=False)[: a.s.size]
    np.testing.assert_allclose(a.s, s, rtol=0, atol=1e-12 * s[0])


def test_part_b_files_and_merge(part_b, tmp_path):
    result, out = part_b
    assert set(result.paths) == {"csv", "exponents_csv", "json", "png"}
    # a later run of one cell, merged: the other cells stay, the redone one is replaced
    import shutil

    merged_dir = tmp_path / "merged"
    shutil.copytree(out, merged_dir)
    again = run_scale(
        "b",
        sizes={"b": (800,)},
        rank=5,
        methods={"b": ("block_krylov",)},
        threads=1,
        isolate=False,
        out=merged_dir,
        merge=True,
        progress=False,
    )
    assert len(again.rows) == 6
    assert len(_by(again.rows, n=800, method="block_krylov")) == 1
    assert {f["method"]: f["n_points"] for f in again.exponents}["block_krylov"] == 2
    payload = json.loads((merged_dir / "scale.json").read_text())
    assert len(payload["rows"]) == 6 and payload["meta"]["merged"] is True


def test_format_scale_shows_every_cell(part_b):
    text = format_scale(part_b[0])
    assert "fastest cell with subspace and singular-value errors <= 0.01" in text
    assert max(len(line) for line in text.splitlines()) <= 100
    assert "entries" not in text and "entries" in format_scale(part_b[0], wide=True)
    assert text.count("generalized_nystrom") >= 3  # two cells and one exponent row
    assert "block_krylov p=10 q=2 (not exact" in text


# --------------------------------------------------------------------------- isolation


def test_timeout_stops_the_cell_and_skips_larger_sizes():
    # a limit far below a process start: the first cell times out, the next is skipped
    result = run_scale(
        "b",
        sizes={"b": (400, 800)},
        rank=5,
        methods={"b": ("rsvd",)},
        threads=1,
        time_limit=0.05,
        reference="none",
        progress=False,
    )
    first, second = sorted(result.rows, key=lambda r: r["n"])
    assert first["status"] == "timeout" and "time limit" in first["error"]
    assert second["status"] == "skipped"
    assert result.exponents[0]["exponent"] is None


def test_memory_limit_stops_the_cell_and_skips_larger_sizes():
    # 64 MB is below what a process holding numpy, scipy and numba needs: stopped at once
    result = run_scale(
        "b",
        sizes={"b": (400, 800)},
        rank=5,
        methods={"b": ("rsvd",)},
        threads=1,
        memory_limit=64 * 2**20,
        reference="none",
        progress=False,
    )
    first, second = sorted(result.rows, key=lambda r: r["n"])
    assert first["status"] == "memory" and "over the memory limit of 0.1 GiB" in first["error"]
    assert second["status"] == "skipped" and second["error"] == "memory at a smaller size"


def test_isolated_error_comes_back_as_a_message():
    status, message = run_isolated(
        scale.run_cell, {"spec": ProblemSpec("b", 400, 400, 5, 0), "runner": "no_such_method"}
    )
    assert status == "error" and "no_such_method" in message


# --------------------------------------------------------------------------- runners, fits


@pytest.fixture
def own_runners():
    """Runners registered by a test are removed after it (RUNNERS is the one shared table)."""
    saved = dict(runners.RUNNERS)
    yield runners.RUNNERS
    runners.RUNNERS.clear()
    runners.RUNNERS.update(saved)


def test_register_runner_adds_a_method(own_runners):
    runner = MethodRunner(
        "rsvd_q1",
        SolverCall("rsvd"),
        runners._effort_block_krylov,
        ("b",),
        "rsvd with one power iteration",
    )
    register_runner(runner)
    with pytest.raises(ValueError, match="a runner named 'rsvd_q1' exists"):
        register_runner(runner)
    with pytest.raises(ValueError, match="runner.parts must be"):
        register_runner(
            MethodRunner("x", SolverCall("rsvd"), runners._effort_rsvd, ("d",)), replace=True
        )
    result = run_scale(
        "b",
        sizes={"b": (400,)},
        rank=5,
        methods={"b": ("rsvd_q1",)},
        threads=1,
        isolate=False,
        reference="none",
        progress=False,
    )
    (row,) = result.rows
    # 2 q + 2 = 4 passes and the 2 of the certificate
    assert row["method"] == "rsvd_q1" and row["effort"] == "p=10 q=1" and row["passes"] == 6.0
    with pytest.raises(ValueError, match=r"methods \['rsvd_q1'\] do not apply to part a"):
        run_scale("a", methods={"a": ("rsvd_q1",)}, isolate=False)


def test_best_cells_picks_the_fastest_accurate_cell():
    rows = [
        {
            "part": "b",
            "n": 10,
            "method": "x",
            "status": "ok",
            "seconds": 1.0,
            "subspace_error": 0.5,
        },
        {
            "part": "b",
            "n": 10,
            "method": "y",
            "status": "ok",
            "seconds": 3.0,
            "subspace_error": 1e-3,
        },
        {
            "part": "b",
            "n": 10,
            "method": "z",
            "status": "ok",
            "seconds": 2.0,
            "subspace_error": 5e-3,
        },
        {"part": "b", "n": 20, "method": "x", "status": "timeout"},
        {
            "part": "b",
            "n": 20,
            "method": "y",
            "status": "ok",
            "seconds": 1.0,
            "subspace_error": 0.2,
        },
    ]
    small, large = scale.best_cells(rows)
    assert (small["n"], small["method"], small["seconds"]) == (10, "z", 2.0)
    assert (large["n"], large["method"]) == (20, None)


def test_fit_exponent():
    n = np.array([1e3, 2e3, 4e3, 8e3])
    assert fit_exponent(n, 3e-6 * n**1.5) == pytest.approx(1.5, abs=1e-12)
    assert fit_exponent([1000], [1.0]) is None
    assert fit_exponent([1000, 1000], [1.0, 2.0]) is None


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(parts="d"), "parts must be a non-empty list"),
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
        (["--sizes", "1000"], "argument --sizes: needs --part a, b or c"),
        (["--part", "all", "--sizes", "1000"], "argument --sizes: needs --part a, b or c"),
        (
            ["--part", "a", "--methods", "asym_nystrom_rpcholesky"],
            "argument --methods: asym_nystrom_rpcholesky do not apply to part a",
        ),
        (["--part", "b", "--sizes", "100,abc"], "argument --sizes: expected comma-separated"),
        (["--part", "b", "--sizes", "2000.5"], "argument --sizes: expected comma-separated"),
        (
            ["--part", "b", "--sizes", "40"],
            r"argument --sizes: every size must be >= 4 \* "
            r"--rank = 80",
        ),
        (["--methods", "qr"], "argument --methods: unknown qr"),
        (["--time-limit", "-1"], "argument --time-limit"),
        (["--part", "d"], "argument --part: invalid choice"),
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


# --------------------------------------------------------------------------- merge, fits, table


def _fake_scale_json(path, rank=5, rows=None):
    rows = (
        rows
        if rows is not None
        else [{"part": "b", "n": 400, "m": 400, "method": "rsvd", "status": "ok", "seconds": 1.0}]
    )
    path.write_text(
        json.dumps(
            {"meta": {"rank": rank, "seed": 0, "dtype": "float64"}, "rows": rows, "references": []}
        )
    )


@pytest.mark.parametrize(
    "content, match",
    [
        ("{not json", "not readable JSON"),
        ('{"rows": 3}', "not a scale result"),
        ("[1, 2]", "not a scale result"),
    ],
)
def test_merge_onto_a_corrupt_file_fails_before_any_cell(
    content, match, tmp_path, monkeypatch, capsys
):
    (tmp_path / "scale.json").write_text(content)

    def no_work(*args, **kwargs):
        raise AssertionError("a cell was computed before the merge file was checked")

    monkeypatch.setattr(CellRunner, "cell", no_work)
    monkeypatch.setattr(CellRunner, "reference_for", no_work)
    with pytest.raises(ValueError, match=match):
        run_scale(
            "b",
            sizes={"b": (400,)},
            rank=5,
            methods={"b": ("rsvd",)},
            isolate=False,
            out=tmp_path,
            merge=True,
            progress=False,
        )
    with pytest.raises(SystemExit) as exc:
        main(
            [
                "scale",
                "--part",
                "b",
                "--sizes",
                "400",
                "--rank",
                "5",
                "--methods",
                "rsvd",
                "--merge",
                "--out",
                str(tmp_path),
            ]
        )
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "argument --merge" in err and match in err


def test_merge_refuses_another_rank(tmp_path, monkeypatch, capsys):
    _fake_scale_json(tmp_path / "scale.json", rank=5)
    monkeypatch.setattr(CellRunner, "cell", None)  # never reached
    with pytest.raises(ValueError, match="made with rank=5, this run has rank=6"):
        run_scale(
            "b",
            sizes={"b": (400,)},
            rank=6,
            methods={"b": ("rsvd",)},
            isolate=False,
            out=tmp_path,
            merge=True,
            progress=False,
        )
    with pytest.raises(SystemExit):
        main(
            [
                "scale",
                "--part",
                "b",
                "--sizes",
                "400",
                "--rank",
                "6",
                "--merge",
                "--out",
                str(tmp_path),
            ]
        )
    assert "merging different problems is refused" in capsys.readouterr().err
    # the same problem merges (an older file's rows get their parameters from its meta)
    from ksvd_bench.race.scale.files import load_merge_base

    old = load_merge_base(tmp_path, {"rank": 5, "seed": 0, "dtype": "float64", "device": "cpu"})
    assert old["rows"][0]["rank"] == 5 and old["rows"][0]["device"] == "cpu"


def test_exponents_are_fitted_only_where_the_cells_support_them():
    from ksvd_bench.race.scale.fit import fit_all

    def rows(sizes, seconds, method="x"):
        return [
            {
                "part": "b",
                "n": n,
                "method": method,
                "status": "ok",
                "seconds": t,
                "solve_seconds": t,
            }
            for n, t in zip(sizes, seconds, strict=True)
        ]

    n = [1000, 2000, 4000, 8000]
    good = rows(n, [0.5 * (k / 1000) ** 1.5 for k in n], "long")
    # the --quick failure: sub-second, noisy cells gave N^-0.91
    quick = rows(n[:3], [0.20, 0.12, 0.11], "quick")
    narrow = rows([1000, 1500, 2000], [1.0, 1.8, 2.9], "narrow")
    fits = {f["method"]: f for f in fit_all(good + quick + narrow)}
    assert fits["long"]["exponent"] == pytest.approx(1.5, abs=1e-9)
    assert fits["long"]["fit_note"].startswith("fitted on N = 1000-8000")
    assert fits["quick"]["exponent"] is None and "0 size(s) >= 0.5 s" in fits["quick"]["fit_note"]
    assert fits["narrow"]["exponent"] is None and "spans x2" in fits["narrow"]["fit_note"]


def test_best_cells_never_picks_an_unreliable_or_wrong_valued_cell():
    rows = [
        {
            "part": "b",
            "n": 10,
            "method": "fast",
            "status": "ok",
            "seconds": 1.0,
            "subspace_error": 1e-4,
            "sv_error": 1e-4,
            "reliable": False,
        },
        {
            "part": "b",
            "n": 10,
            "method": "wrong_s",
            "status": "ok",
            "seconds": 1.5,
            "subspace_error": 1e-4,
            "sv_error": 0.5,
            "reliable": True,
        },
        {
            "part": "b",
            "n": 10,
            "method": "good",
            "status": "ok",
            "seconds": 2.0,
            "subspace_error": 1e-3,
            "sv_error": 1e-3,
            "reliable": True,
        },
    ]
    (best,) = scale.best_cells(rows)
    assert best["method"] == "good"


def _warning_solve(problem, rank, options, random_state):
    import warnings

    import solvers

    warnings.warn("core looks odd", RuntimeWarning, stacklevel=1)
    return solvers.svd(problem.source(), rank, method="rsvd", random_state=random_state, **options)


def test_cell_counts_the_warnings_of_its_solve(own_runners):
    register_runner(MethodRunner("warns", _warning_solve, runners._effort_rsvd, ("b",)))
    # recorded in the row, and issued once more to the caller: never dropped
    with pytest.warns(RuntimeWarning, match="core looks odd"):
        result = run_scale(
            "b",
            sizes={"b": (400,)},
            rank=5,
            methods={"b": ("warns",)},
            threads=1,
            isolate=False,
            reference="none",
            progress=False,
        )
    (row,) = result.rows
    assert row["n_warnings"] == 1 and row["warnings"] == ["core looks odd"]
    assert row["warm_up_warnings"] == 1  # the warm-up's, counted apart
    line = next(x for x in format_scale(result).splitlines() if x.startswith("400   warns"))
    assert line.split()[-1] == "1"


def test_device_is_passed_to_the_lazy_source(monkeypatch):
    from ksvd_bench.kernels import KernelSource

    seen = {}
    original = KernelSource.from_points.__func__

    def spy(cls, *args, **kwargs):
        seen.update(kwargs)
        kwargs.pop("device", None)
        return original(cls, *args, **kwargs)

    monkeypatch.setattr(KernelSource, "from_points", classmethod(spy))
    spec = ProblemSpec("b", 100, 100, 3, 0, device="cuda")
    scale.make_source(spec, scale.make_data(spec))
    assert seen["device"] == "cuda"
    seen.clear()
    cpu = ProblemSpec("b", 100, 100, 3, 0)
    scale.make_source(cpu, scale.make_data(cpu))
    assert seen["device"] == "cpu"
    assert spec.key == cpu.key  # the same problem: one reference for both devices


def test_device_cuda_is_refused_for_part_a_and_checked_before_work(tmp_path, capsys, monkeypatch):
    with pytest.raises(SystemExit):
        main(["scale", "--part", "a", "--device", "cuda", "--out", str(tmp_path)])
    assert "argument --device: applies to parts b and c" in capsys.readouterr().err
    # without a usable GPU (or numba-cuda) the backend's own reason, before any cell
    from ksvd_bench.race.scale import cli as scale_cli

    def unavailable(device):
        raise RuntimeError("device='cuda' found no usable GPU (test)")

    monkeypatch.setattr(scale_cli, "backend_class", unavailable)  # where --device is checked
    with pytest.raises(SystemExit):
        main(["scale", "--part", "b", "--device", "cuda", "--out", str(tmp_path)])
    assert "argument --device: device='cuda' found no usable GPU" in capsys.readouterr().err


# --------------------------------------------------------------------------- part c (issue 15)


def test_part_c_is_the_rare_cluster_family():
    from ksvd_bench.race.scale.problems import make_data, n_rare

    # the family's one rule (as the sampling study): rare at every rank, never all rare
    assert n_rare(20) == 6 and n_rare(5) == 2 and n_rare(2) == 1 and n_rare(3) == 1
    with pytest.raises(ValueError, match="n_clusters >= 2"):
        n_rare(1)
    with pytest.raises(ValueError, match="rank must be >= 2 for part c"):
        run_scale("c", rank=1, isolate=False)
    spec = ProblemSpec("c", 300, 300, 5, 0)
    data = make_data(spec)
    assert data["X"].shape == (300, 64) and data["rare"] == [3, 4]
    # the same points as the family itself draws
    from ksvd_bench.datasets import make_rare_clusters

    P = make_rare_clusters(300, 300, 64, n_clusters=5, n_rare=2, random_state=0)
    np.testing.assert_array_equal(data["X"], P.X)
    assert scale.RUNNERS["asym_nystrom_rpcholesky"].parts == ("b", "c")
    assert set(scale.SAMPLING_METHODS) <= set(scale.DEFAULT_METHODS["c"])
    # "both" stays a and b; "all" adds c
    assert scale.run._check_settings("both", None, None, 5, 10.0, "float64")[0] == ("a", "b")
    assert scale.run._check_settings("all", None, None, 5, 10.0, "float64")[0] == ("a", "b", "c")
    with pytest.raises(ValueError, match=r"\['asym_nystrom_rpcholesky'\] do not apply to part a"):
        run_scale("a", methods={"a": ("asym_nystrom_rpcholesky",)}, isolate=False)


def test_block_krylov_is_described_with_its_passes():
    assert "2 q + 2 passes" in scale.RUNNERS["block_krylov"].description
    assert "2 q + 1" not in " ".join(r.description for r in scale.RUNNERS.values())


@pytest.fixture(scope="module")
def part_c():
    methods = ("block_krylov", "asym_nystrom_arp", "asym_nystrom_rpcholesky", "asym_nystrom_aca")
    return run_scale(
        "c",
        sizes={"c": (400,)},
        rank=5,
        methods={"c": methods},
        threads=1,
        isolate=False,
        progress=False,
    )


def test_part_c_cells_race_the_samplers(part_c):
    rows = {r["method"]: r for r in part_c.rows}
    assert all(r["status"] == "ok" and r["part"] == "c" for r in rows.values())
    # block Krylov at q = 1: 2 q + 2 = 4 passes (Musco & Musco Alg. 2), 2 for its certificate
    assert rows["block_krylov"]["passes"] == 4.0 + 2
    # RPCholesky: no pass (8 r = 40 pivots read (k + 1)(N + M) entries, under 0.3 N M), and
    # it finds the rare clusters; ARP: one pass plus 2 m rows and m columns (m = 2 r)
    rp = rows["asym_nystrom_rpcholesky"]
    assert rp["effort"] == "m=40 chk=0" and rp["passes"] < 0.3 and rp["setup_passes"] == 1
    assert rp["subspace_error"] <= 1e-2
    arp = rows["asym_nystrom_arp"]
    assert arp["effort"] == "m=10 chk=0" and 1.0 <= arp["passes"] <= 1.0 + 30 * 800 / 400**2
    assert (
        "rare clusters" in part_c.meta["kernels"]["c"] or "30% rare" in part_c.meta["kernels"]["c"]
    )
    text = format_scale(part_c)
    assert "(c) rare clusters" in text
    assert max(len(line) for line in text.splitlines()) <= 100
