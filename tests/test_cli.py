"""The ``ksvd-bench`` command line: help texts, argument checks, tiny runs of each study."""

import csv
import json
import re

import numpy as np
import pytest

from ksvd_bench.cli import build_parser, main
from ksvd_bench.datasets import make_directed_graph
from ksvd_bench.race.compare import cli as compare_cli
from ksvd_bench.race.spectrum import _draw_spectrum, format_spectrum, run_spectrum
from ksvd_bench.threads import max_threads


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["compare", "--help"], ["spectrum", "--help"], ["residual-study", "--help"]],
)
def test_help_exits_cleanly(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "usage: ksvd-bench" in out
    if argv[0] == "compare":
        for option in (
            "--dataset",
            "--eps",
            "--measures",
            "--seeds",
            "--no-center",
            "--out",
            "--wide",
            "--planted-rank",
        ):
            assert option in out


def test_subcommands_are_registered():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert {"compare", "spectrum", "residual-study", "reproduce"} <= set(sub.choices)


def _compare_args(*argv):
    """``compare``'s arguments as its run sees them (defaults that depend on other flags
    resolved, as ``check`` does before any work)."""
    from ksvd_bench.race.compare.cli import _resolve_defaults

    args = build_parser().parse_args(["compare", *argv])
    _resolve_defaults(args)
    return args


def test_compare_defaults_match_the_issue():
    # issue 19: the default race is the strict measures at 0.1 and 0.01 with 3 seeds
    args = _compare_args()
    assert args.dataset == ["cora"] and args.kernel == "sne" and args.rank == 20
    assert args.eps == [0.1, 0.01] and args.seeds == 3 and args.center is True
    assert args.weights == ["uniform", "lowrank"]
    assert args.threads == 1 and args.wide is False and args.table is False
    # today's full grid behind --full; explicit flags still win
    full = _compare_args("--full")
    assert full.weights == ["singular_values", "relative", "uniform", "lowrank"]
    assert full.seeds == 5
    assert _compare_args("--full", "--seeds", "2").seeds == 2
    assert _compare_args("--wide").table is True
    assert _compare_args("--no-center").center is False
    # --weights stays an alias of --measures
    assert _compare_args("--weights", "uniform").weights == ["uniform"]


@pytest.mark.parametrize(
    ("argv", "flag", "message"),
    [
        (["compare", "--rank", "0"], "--rank", "positive integer"),
        (["compare", "--eps", "-1"], "--eps", "positive number"),
        (["compare", "--dataset", "mnist"], "--dataset", "invalid choice"),
        (["compare", "--threads", "64"], "--threads", "at most"),
        (["compare", "--out", ""], "--out", "empty string"),
        (["compare", "--seed", "-1"], "--seed", ">= 0"),
        (["compare", "--max-effort", "0"], "--max-effort", "positive integer"),
        (
            ["compare", "--size", "100", "80"],
            "--size",
            "the only dataset is one of synthetic, rare-clusters",
        ),
        (
            ["compare", "--dataset", "rare-clusters", "--size", "10", "30"],
            "--size",
            "each be >= its 20 clusters",
        ),
        (
            ["compare", "--dataset", "rare-clusters", "--size", "100", "80", "--rank", "90"],
            "--rank",
            "at most min(N, M) = 80",
        ),
        (
            ["compare", "--dataset", "rare-clusters", "--rank", "7000"],
            "--rank",
            "at most min(N, M) = 6000",
        ),
        (
            ["compare", "--dataset", "synthetic", "cora", "--noise", "0.1"],
            "--noise",
            "the only dataset",
        ),
        (["compare", "--dataset", "synthetic", "--coherence", "2"], "--coherence", "[0, 1]"),
        (["compare", "--dataset", "synthetic", "--noise", "-1"], "--noise", ">= 0"),
        (
            ["compare", "--dataset", "synthetic", "--size", "20", "20", "--rank", "30"],
            "--rank",
            "at most min(N, M) = 20",
        ),
        (
            ["compare", "--dataset", "synthetic", "--size", "20", "20", "--planted-rank", "50"],
            "--planted-rank",
            "at most min(N, M) = 20",
        ),
        (["compare", "--rank", "5000"], "--rank", "2708"),
        (["spectrum", "--threads", "64"], "--threads", "at most"),
        (["spectrum", "--factors", "0"], "--factors", "positive number"),
        (["residual-study", "--max-samples", "10"], "--max-samples", "at least --rank=20"),
        (["residual-study", "--kernel", "t"], "--kernel", "invalid choice"),
        (["compare", "--weights", "lowrank"], "--weights", "use --measures lowrank"),
        (["spectrum", "--weights", "lowrank"], "--weights", "--measure lowrank"),
        (
            ["compare", "--readme-table", "no-such-record.json"],
            "--readme-table",
            "not a readable compare record",
        ),
        (["bogus"], "command", "invalid choice"),
    ],
)
def test_bad_arguments_exit_with_a_message_naming_the_flag(
    argv, flag, message, capsys, monkeypatch, tmp_path
):
    if max_threads() >= 64 and "64" in argv:
        argv = [a if a != "64" else str(max_threads() + 1) for a in argv]
    monkeypatch.chdir(tmp_path)  # a valid default --out must not litter the repository
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}" in err and message in err, err
    # issue 33: the error leads, and a pointer to --help replaces argparse's usage block
    lines = err.splitlines()
    assert lines[0].startswith("ksvd-bench") and ": error: " in lines[0], err
    assert f"argument {flag}" in lines[0] and len(lines) == 2, err
    assert lines[1].endswith("--help' for the options)"), err


def test_unrecognized_arguments_are_named_by_the_sub_command(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["scale", "--bogus"])
    assert exc.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        "ksvd-bench scale: error: unrecognized arguments: --bogus",
        "(run 'ksvd-bench scale --help' for the options)",
    ]


def test_bad_out_is_reported_before_any_work(tmp_path, capsys, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")

    def no_work(*args, **kwargs):
        raise AssertionError("the race started before --out was checked")

    monkeypatch.setattr(compare_cli, "run_compare", no_work)  # where the command uses it
    for argv in (
        ["compare", "--out", str(blocker / "results")],
        ["spectrum", "--out", str(blocker)],
        ["residual-study", "--out", str(blocker / "x")],
    ):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
        assert "--out=" in capsys.readouterr().err


def test_tiny_compare_run(tmp_path, capsys):
    out = tmp_path / "res"
    code = main(
        [
            "compare",
            "--dataset",
            "synthetic",
            "--size",
            "90",
            "70",
            "--rank",
            "3",
            "--eps",
            "0.1",
            "--measures",
            "uniform",
            "lowrank",
            "--seeds",
            "2",
            "--max-effort",
            "30",
            "--out",
            str(out),
            "--no-progress",
            "--threads",
            "1",
            "--methods",
            "tsvd",
            "rsvd",
            "asym_nystrom",
            "asym_nystrom_norm",
            "--table",
            "--record",
            str(tmp_path / "kept" / "race.json"),
        ]
    )
    assert code == 0
    text = capsys.readouterr().out
    assert "synthetic 90x70" in text and "eps=0.1" in text
    assert max(len(line) for line in text.splitlines()) <= 100
    for method in ("tsvd", "rsvd", "asym_nystrom", "asym_nystrom_norm"):
        assert method in text
    payload = json.loads((out / "compare.json").read_text())
    meta = payload["meta"]
    assert meta["rank"] == 3 and meta["datasets"] == ["synthetic"]
    # the thread counts in force while the solvers ran, not the machine's defaults
    assert meta["threads"] == 1 and meta["machine"]["numba_threads"] == 1
    assert all(b["num_threads"] == 1 for b in meta["machine"]["blas"])
    with open(out / "compare.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 4 * 2 + 4  # 4 entries x 2 measures + residual rows (eta only)
    assert (out / "reference_cache").is_dir()
    # the record kept for the README: rows, machine, load, and the command that remakes it
    record = json.loads((tmp_path / "kept" / "race.json").read_text())
    assert "runs" not in record and len(record["rows"]) == len(rows)
    assert record["meta"]["command_line"].startswith("ksvd-bench compare --dataset synthetic")
    assert len(record["meta"]["load_average"]["before"]) == 3
    assert "cpu_count" in record["meta"]["machine"]


def test_rank_one_on_a_small_synthetic_problem(tmp_path, capsys):
    """``--rank 1 --size 10 10`` plants min(max(1, 20), 10) triplets instead of failing."""
    code = main(
        [
            "compare",
            "--dataset",
            "synthetic",
            "--size",
            "12",
            "10",
            "--rank",
            "1",
            "--eps",
            "0.1",
            "--measures",
            "uniform",
            "--seeds",
            "1",
            "--methods",
            "tsvd",
            "rsvd",
            "--no-residual",
            "--out",
            str(tmp_path),
            "--no-progress",
            "--table",
        ]
    )
    assert code == 0
    assert "r=1" in capsys.readouterr().out
    payload = json.loads((tmp_path / "compare.json").read_text())
    assert payload["meta"]["rank"] == 1
    assert {r["method"] for r in payload["rows"]} == {"tsvd", "rsvd"}


def test_compare_ends_with_the_headline(tmp_path, capsys):
    # issue 19 section 5: no table unless asked; the headline last, then the page's path;
    # one line per distinct warning message on stderr, none of Python's own warning lines
    out = tmp_path / "res"
    code = main(
        [
            "compare",
            "--dataset",
            "synthetic",
            "--size",
            "60",
            "50",
            "--rank",
            "8",
            "--planted-rank",
            "4",
            "--seeds",
            "2",
            "--methods",
            "rsvd",
            "asym_nystrom",
            "sym_nystrom",
            "--max-effort",
            "12",
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    assert code == 0
    captured = capsys.readouterr()
    lines = captured.out.rstrip("\n").splitlines()
    assert lines[-1] == f"report: {out / 'report.html'}"
    assert (out / "report.html").stat().st_size > 0
    start = next(i for i, line in enumerate(lines) if line.startswith("Fastest right answer"))
    assert len(lines) - start <= 30
    assert "synthetic 60x50" not in captured.out  # the table stays behind --table
    assert "eta[uniform], eps 1e-1" in captured.out and "lowrank, eps 1e-2" in captured.out
    err = [line for line in captured.err.splitlines() if line.strip()]
    assert not [line for line in err if re.search(r"\.py:\d+: \w*Warning", line)], err
    assert len(err) == len(set(err)) and len(err) <= 12
    payload = json.loads((out / "compare.json").read_text())
    n_rows = sum(r["n_warnings"] for r in payload["rows"])
    if n_rows:  # the rank-deficient samples warn: counted per solver in the headline
        assert any(line.startswith("warnings") and "nystrom" in line for line in lines)
        # issue 33: the terminal's per-solver counts are the headline's
        assert err[0].startswith(f"warnings of the answers returned: {n_rows} (")
        said = next(line for line in lines if line.startswith("warnings (messages"))
        pairs = dict(re.findall(r"(\w+) (\d+)", said.split(": ", 1)[1]))
        assert pairs and all(f"{s} {n}" in " ".join(err[:3]) for s, n in pairs.items())


def test_wide_table(tmp_path, capsys):
    main(
        [
            "compare",
            "--dataset",
            "synthetic",
            "--size",
            "60",
            "50",
            "--rank",
            "2",
            "--eps",
            "0.1",
            "--measures",
            "uniform",
            "--seeds",
            "1",
            "--methods",
            "rsvd",
            "--wide",
            "--out",
            str(tmp_path),
            "--no-progress",
        ]
    )
    text = capsys.readouterr().out
    assert "resid est" in text and "paper s" in text


def test_progress_bar_shows_no_eta_or_rate(tmp_path, capsys):
    main(
        [
            "compare",
            "--dataset",
            "synthetic",
            "--size",
            "60",
            "50",
            "--rank",
            "2",
            "--eps",
            "0.1",
            "--measures",
            "uniform",
            "--seeds",
            "2",
            "--methods",
            "rsvd",
            "tsvd",
            "--out",
            str(tmp_path),
        ]
    )
    err = capsys.readouterr().err
    assert "compare:" in err and "elapsed" in err
    assert not re.search(r"<\d+:\d\d", err), err  # tqdm's "elapsed<remaining"
    assert "/s]" not in err and "s/run" not in err


@pytest.fixture(scope="module")
def small_graph():
    return make_directed_graph(160, n_communities=3, avg_degree=4.0, random_state=1).adjacency


def test_spectrum_on_a_small_graph(tmp_path, small_graph):
    result = run_spectrum(
        "tiny",
        data=small_graph,
        factors=(0.5, 2.0),
        rank=4,
        eps=0.1,
        weights="uniform",
        seeds=1,
        out=tmp_path,
        progress=False,
    )
    assert [r["factor"] for r in result.rows] == [0.5, 2.0]
    assert result.rows[0]["gamma"] < result.rows[1]["gamma"]
    for r in result.rows:
        s = np.asarray(result.singular_values[r["factor"]])
        assert np.all(np.diff(s) <= 1e-12) and s.size == 4
        assert r["vacuous"] is False and r["value_max"] == pytest.approx(2.0)
        assert r["asym_nystrom_lowrank"] >= 0 and r["rsvd_lowrank"] >= 0
        if r["speedup"] is not None:
            assert r["speedup"] == pytest.approx(r["rsvd_seconds"] / r["asym_nystrom_seconds"])
    for name in ("spectrum.csv", "spectrum.json", "spectrum.png"):
        assert (tmp_path / name).stat().st_size > 0
    assert (tmp_path / "spectrum.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = format_spectrum(result)
    assert "leading singular values" in text and "sv err" not in text
    assert max(len(line) for line in text.splitlines()) <= 100
    assert "asym sv" in text and "warn" in text
    for r in result.rows:  # the whole-triplet fields of both solvers, in the JSON/CSV too
        for m in ("asym_nystrom", "rsvd"):
            assert r[f"{m}_sv_error"] >= 0 and r[f"{m}_n_warnings"] >= 0
            assert isinstance(r[f"{m}_warnings"], list) and r[f"{m}_reliable"] in (True, False)
    assert result.meta["threads"] == 1
    text = repr(result)
    assert len(text) < 300 and "array" not in text
    # issue 19 section 1: a converged method meets every part of the rule, in the JSON too
    from ksvd_bench.race.common import audit_rows

    payload = json.loads((tmp_path / "spectrum.json").read_text())
    assert audit_rows(payload["rows"]) == []
    for r in payload["rows"]:
        for m in ("asym_nystrom", "rsvd"):
            assert r[f"{m}_status"] in ("converged", "not converged", "unreliable")
            assert (r[f"{m}_status"] == "converged") == r[f"{m}_converged"]
            assert r[f"{m}_triplet_residual"] >= 0 and r["eps"] == 0.1


def test_spectrum_marks_vacuous_tolerances(small_graph):
    # The paper's weighting on a centred SNE kernel: eta <= 2 mean(sigma) << 0.5.
    result = run_spectrum(
        "tiny",
        data=small_graph,
        factors=(1.0, 4.0),
        rank=4,
        eps=0.5,
        weights="singular_values",
        seeds=1,
        progress=False,
    )
    assert all(r["vacuous"] and r["value_max"] <= 0.5 for r in result.rows)
    text = format_spectrum(result)
    assert "vacuous" in text and "NOTE" in text
    if any(r["speedup"] is not None for r in result.rows):
        assert re.search(r"\d(\.\d+)?x\*", text)  # the speedup cells carry the mark
    fig = _draw_spectrum(result)
    labels = [t.get_text() for t in fig.axes[1].texts]
    assert labels.count("vacuous") == 2


def test_spectrum_defaults_to_a_measure_that_is_never_vacuous():
    """Issue 33: spectrum's default measure (the paper's weighting) was one it then called
    vacuous at its own default eps on the centred SNE kernel."""
    import inspect

    from ksvd_bench.race.common import measure_bound

    default = inspect.signature(run_spectrum).parameters["weights"].default
    args = build_parser().parse_args(["spectrum"])
    assert args.weights == default == "uniform"
    # whatever the spectrum: the bound any answer can score stays above the default eps
    for s in (np.full(20, 1e-3), np.logspace(0, -8, 20)):
        assert measure_bound(default, s, float(np.linalg.norm(s)) * 2, 20) > 10 * args.eps


def test_spectrum_says_when_nothing_converged(small_graph):
    result = run_spectrum(
        "tiny",
        data=small_graph,
        factors=(0.5, 2.0),
        rank=4,
        eps=1e-12,
        weights="uniform",
        seeds=1,
        max_effort=8,
        progress=False,
    )
    assert not any(r["asym_nystrom_converged"] or r["rsvd_converged"] for r in result.rows)
    fig = _draw_spectrum(result)
    assert any("nothing converged" in t.get_text() for t in fig.axes[1].texts)
    assert "neither method reached eps" in format_spectrum(result)


def test_tiny_residual_study_run(tmp_path, capsys):
    code = main(
        [
            "residual-study",
            "--dataset",
            "cora",
            "--methods",
            "rsvd",
            "--rank",
            "3",
            "--out",
            str(tmp_path),
            "--threads",
            "1",
        ]
    )
    assert code == 0
    assert "residual estimate vs eta" in capsys.readouterr().out
    payload = json.loads((tmp_path / "residual_study.json").read_text())
    assert {r["weights"] for r in payload["summary"]} == {"singular_values", "relative", "uniform"}
    assert all(r["method"] == "rsvd" for r in payload["rows"])
    assert payload["meta"]["threads"] == 1
    assert all(r["n_passes"] > 0 for r in payload["rows"])


def test_weights_takes_weightings_and_measures_take_lowrank():
    parse = build_parser().parse_args
    assert parse(["compare", "--weights", "uniform", "relative"]).weights == ["uniform", "relative"]
    assert parse(["compare", "--measures", "lowrank"]).weights == ["lowrank"]
    assert parse(["spectrum", "--measure", "lowrank"]).weights == "lowrank"
    assert parse(["spectrum", "--weights", "uniform"]).weights == "uniform"


def test_one_default_thread_rule_for_every_study():
    parse = build_parser().parse_args
    assert {parse([c]).threads for c in ("compare", "spectrum", "scale")} == {1}
    for command in ("compare", "spectrum", "scale"):
        sub = build_parser()._subparsers._group_actions[0].choices[command]
        (action,) = [a for a in sub._actions if a.dest == "threads"]
        assert "default: 1 in every study" in action.help


def test_reproduce_help_describes_every_experiment(capsys):
    rep = build_parser()._subparsers._group_actions[0].choices["reproduce"]
    experiments = rep._subparsers._group_actions[0].choices
    assert set(experiments) >= {
        "node-classification",
        "graph-reconstruction",
        "uci",
        "ablation",
        "nystrom-f1",
        "asymmetry",
        "all",
    }
    for name, parser in experiments.items():
        assert parser.description and len(parser.description) > 40, name
        for action in parser._actions:
            if action.option_strings and action.dest != "help":
                assert action.help, (name, action.option_strings)


def test_tiny_rare_clusters_compare_run(tmp_path, capsys):
    """--dataset rare-clusters with its shape: the samplers race; RPCholesky is not n/a."""
    out = tmp_path / "rare"
    status = main(
        [
            "compare",
            "--dataset",
            "rare-clusters",
            "--size",
            "120",
            "100",
            "--rank",
            "3",
            "--seeds",
            "1",
            "--eps",
            "0.1",
            "--measures",
            "lowrank",
            "--methods",
            "rsvd",
            "asym_nystrom_paper",
            "asym_nystrom_rpcholesky",
            "--no-residual",
            "--out",
            str(out),
            "--no-progress",
            "--table",
        ]
    )
    assert status == 0
    text = capsys.readouterr().out
    assert "rare-clusters 120x100, sne kernel" in text
    assert "asym_nys_rpcholesky" in text and "asym_nys_rpcholesky   n/a" not in text
    assert "\nn/a: " not in text
    assert max(len(line) for line in text.splitlines() if not line.startswith("wrote")) <= 100
    meta = json.loads((out / "compare.json").read_text())["meta"]
    assert meta["method_options"]["asym_nystrom_paper"]["core"] == "paper"
    with (out / "compare.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert {r["method"] for r in rows} == {"rsvd", "asym_nystrom_paper", "asym_nystrom_rpcholesky"}
    assert all(r["stop"] == "reference" for r in rows)
