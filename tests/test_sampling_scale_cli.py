"""``ksvd-bench sampling --scale``: the RPCholesky answer at scale, uncertified and certified
beside each other (issue 32 section 5), on tiny sizes."""

import json
import math

import numpy as np
import pytest

from ksvd_bench.cli import main
from ksvd_bench.race.sampling import (
    SCALE_MIN_N,
    format_scale,
    rpcholesky_at_scale,
    scale_study,
)


def _interval_holds(cert):
    low, est, high = cert["fro_error_low"], cert["fro_error"], cert["fro_error_high"]
    return all(math.isfinite(v) for v in (low, est, high)) and 0 <= low <= est <= high


def test_scale_cli_runs_both_answers(tmp_path, capsys):
    status = main(
        ["sampling", "--scale", "3000", "--rank", "5", "--no-progress", "--out", str(tmp_path)]
    )
    assert status == 0
    data = json.loads((tmp_path / "scale.json").read_text())
    assert data["params"]["n"] == 3000 and data["params"]["rank"] == 5
    assert data["params"]["n_pivots"] == 20
    # the warm-up ran, untimed, before both runs; the points were timed apart
    assert data["params"]["warm_up_n"] == 2000 and data["warm_up_seconds"] > 0
    assert data["points_seconds"] > 0
    un, ce = data["runs"]
    assert (un["kind"], ce["kind"]) == ("uncertified", "certified")
    # uncertified: a budget of 0, no certificate
    assert un["certificate_budget"] == 0 and un["certified"] is False
    assert un["certificate"] is None and un["certificate_seconds"] is None
    # certified: the solver's default budget, an interval around its estimate
    assert ce["certificate_budget"] is None and ce["certified"] is True
    assert _interval_holds(ce["certificate"])
    assert ce["certificate"]["rows"] >= 2
    assert 0 < ce["certificate_seconds"] < ce["seconds"]
    # the same points and seed: the same answer; the certificate's rows are read on top
    assert np.allclose(un["s"], ce["s"], rtol=1e-12, atol=0)
    assert 0 < un["entries"] < ce["entries"]
    for run in (un, ce):
        assert run["n"] == 3000 and not run["setup_pass_ran"]
        assert 0 <= run["rare_found"] <= run["n_rare"] == len(data["rare"]) >= 1
        assert run["reliable"] is None and run["verified"] == "unverified"
    assert data["summary"]["uncertified"]["runs"] == data["summary"]["certified"]["runs"] == 1
    price = data["summary"]["certified"]["seconds"] - data["summary"]["uncertified"]["seconds"]
    assert data["summary"]["certificate_price"] == pytest.approx(price)
    assert data["params"]["command"].startswith("ksvd-bench sampling --scale 3000")
    out = capsys.readouterr().out
    assert "uncertified" in out and "certified" in out and "scale.json" in out
    assert max(len(line) for line in out.splitlines()) <= 100


def test_scale_study_repeats_interleaved():
    result = scale_study(SCALE_MIN_N, rank=4, repeat=2, warm_up=0)
    assert [(r["round"], r["kind"]) for r in result["runs"]] == [
        (1, "uncertified"),
        (1, "certified"),
        (2, "uncertified"),
        (2, "certified"),
    ]
    assert result["warm_up_seconds"] is None and result["params"]["warm_up_n"] == 0
    assert result["summary"]["certified"]["runs"] == 2
    certified = [r for r in result["runs"] if r["certified"]]
    assert [r["kind"] for r in certified] == ["certified", "certified"]
    assert all(_interval_holds(r["certificate"]) for r in certified)
    assert "median seconds" in format_scale(result)
    with pytest.raises(ValueError, match="n must be >= 1000"):
        scale_study(SCALE_MIN_N - 1, rank=4)
    with pytest.raises(ValueError, match="repeat must be >= 1"):
        scale_study(SCALE_MIN_N, rank=4, repeat=0)


def test_rpcholesky_at_scale_budget_passes_through():
    off = rpcholesky_at_scale(1200, rank=4, certificate_budget=0)
    on = rpcholesky_at_scale(1200, rank=4)
    assert off["certified"] is False and off["certificate"] is None
    assert on["certified"] is True and _interval_holds(on["certificate"])
    assert off["points_seconds"] > 0 and on["certificate_seconds"] > 0
    assert off["entries"] < on["entries"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--quick"], "drop --quick"),
        (["--families", "rare"], "drop --families"),
        (["--samplings", "uniform"], "drop --samplings"),
        (["--baselines", "none"], "drop --baselines"),
        (["--n", "4000"], "drop --n"),
        (["--time-limit", "5"], "drop --time-limit"),
        (["--rank", "1"], "--rank: must be >= 2 for the rare family"),
        (["--rank", "800"], "--rank: must be <= --scale / 4 = 750"),
    ],
)
def test_scale_refuses_the_race_flags(extra, message, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["sampling", "--scale", "3000", *extra, "--out", str(tmp_path / "out")])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # refused before any work


def test_scale_size_and_repeat_are_checked(tmp_path, capsys):
    out = str(tmp_path)
    with pytest.raises(SystemExit):
        main(["sampling", "--scale", "999", "--out", out])
    assert "--scale: must be >= 1000" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["sampling", "--scale", "lots", "--out", out])
    assert "--scale: expected a positive integer, got 'lots'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["sampling", "--repeat", "2", "--out", out])
    assert "--repeat: applies to the scale run only" in capsys.readouterr().err
    assert not (tmp_path / "scale.json").exists()
