"""The ``ksvd-bench`` command line: help texts, a tiny compare run, the spectrum study."""

import csv
import json

import numpy as np
import pytest

from ksvd_bench.cli import build_parser, main
from ksvd_bench.datasets import make_directed_graph
from ksvd_bench.race.spectrum import format_spectrum, run_spectrum


@pytest.mark.parametrize("argv", [["--help"], ["compare", "--help"], ["spectrum", "--help"],
                                  ["residual-study", "--help"]])
def test_help_exits_cleanly(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "usage: ksvd-bench" in out
    if argv[0] == "compare":
        for option in ("--dataset", "--eps", "--weights", "--seeds", "--no-center", "--out"):
            assert option in out


def test_reproduce_subcommand_is_registered():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert {"compare", "spectrum", "residual-study", "reproduce"} <= set(sub.choices)


def test_compare_defaults_match_the_issue():
    args = build_parser().parse_args(["compare"])
    assert args.dataset == ["cora"] and args.kernel == "sne" and args.rank == 20
    assert args.eps == [0.1, 0.01] and args.seeds == 5 and args.center is True
    assert args.weights == ["singular_values", "relative", "uniform"]
    assert build_parser().parse_args(["compare", "--no-center"]).center is False


@pytest.mark.parametrize("argv", [["compare", "--rank", "0"], ["compare", "--eps", "-1"],
                                  ["compare", "--dataset", "mnist"], ["bogus"]])
def test_bad_arguments_exit_with_usage_error(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert "error" in capsys.readouterr().err


def test_tiny_compare_run(tmp_path, capsys):
    out = tmp_path / "res"
    code = main(["compare", "--dataset", "synthetic", "--size", "90", "70", "--rank", "3",
                 "--eps", "0.1", "--weights", "uniform", "--seeds", "2", "--max-effort", "30",
                 "--out", str(out), "--no-progress", "--threads", "1"])
    assert code == 0
    text = capsys.readouterr().out
    assert "synthetic (90x70" in text and "eps=0.1" in text
    for method in ("tsvd", "rsvd", "sym_nystrom", "asym_nystrom", "asym_nystrom_norm"):
        assert method in text
    payload = json.loads((out / "compare.json").read_text())
    assert payload["meta"]["rank"] == 3 and payload["meta"]["threads"] == 1
    assert payload["meta"]["datasets"] == ["synthetic"]
    with open(out / "compare.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 10  # 5 raced entries + their [stop=residual] rows
    assert (out / "reference_cache").is_dir()


def test_spectrum_on_a_small_graph(tmp_path):
    graph = make_directed_graph(160, n_communities=3, avg_degree=4.0, random_state=1)
    result = run_spectrum("tiny", data=graph.adjacency, factors=(0.5, 2.0), rank=4, eps=0.1,
                          seeds=1, out=tmp_path, progress=False)
    assert [r["factor"] for r in result.rows] == [0.5, 2.0]
    dense = result.rows[0]
    assert dense["gamma"] < result.rows[1]["gamma"]
    for r in result.rows:
        s = np.asarray(result.singular_values[r["factor"]])
        assert np.all(np.diff(s) <= 1e-12) and s.size == 4
        if r["speedup"] is not None:
            assert r["speedup"] == pytest.approx(r["rsvd_seconds"] / r["asym_nystrom_seconds"])
    for name in ("spectrum.csv", "spectrum.json", "spectrum.png"):
        assert (tmp_path / name).stat().st_size > 0
    assert (tmp_path / "spectrum.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "leading singular values" in format_spectrum(result)


def test_tiny_residual_study_run(tmp_path, capsys):
    code = main(["residual-study", "--dataset", "cora", "--methods", "rsvd", "--rank", "3",
                 "--out", str(tmp_path), "--threads", "1"])
    assert code == 0
    assert "residual estimate vs eta" in capsys.readouterr().out
    payload = json.loads((tmp_path / "residual_study.json").read_text())
    assert {r["weights"] for r in payload["summary"]} == {"singular_values", "relative",
                                                          "uniform"}
    assert all(r["method"] == "rsvd" for r in payload["rows"])
