"""The rare-cluster family and the sampling study (issue 15, part 3), on tiny sizes."""

import json

import numpy as np
import pytest

from ksvd_bench.cli import build_parser, main
from ksvd_bench.datasets import make_rare_clusters
from ksvd_bench.race.sampling import (
    ROW_FIELDS,
    format_sampling,
    make_family,
    sampling_study,
    summary,
    write_sampling,
)

#: the study tries samples too small for the rank on purpose: a rank-deficient sample warns
#: (the solver pads it; the row records the warning)
pytestmark = pytest.mark.filterwarnings(
    r"ignore:.* has numerical rank \d+ < rank=\d+:RuntimeWarning"
)


def test_rare_clusters_are_rare_in_both_sets():
    P = make_rare_clusters(2000, 1500, 8, n_clusters=10, n_rare=3, rare_weight=0.02, random_state=0)
    nx, nz = np.bincount(P.labels_x), np.bincount(P.labels_z)
    assert nx.sum() == 2000 and nz.sum() == 1500
    assert P.params["rare"] == [7, 8, 9]
    # weight 0.02 of 7.06: about 5.7 of 2000 and 4.2 of 1500 points
    assert nx[7:].max() <= 7 and nz[7:].max() <= 6 and nx[7:].min() >= 1 and nz[7:].min() >= 1
    assert nx[:7].min() >= 270 and nz[:7].min() >= 200
    assert P.X.shape == (2000, 8) and P.Z.shape == (1500, 8)


def test_rare_clusters_are_seeded():
    a = make_rare_clusters(300, 200, 4, n_clusters=5, n_rare=1, random_state=3)
    b = make_rare_clusters(300, 200, 4, n_clusters=5, n_rare=1, random_state=3)
    c = make_rare_clusters(300, 200, 4, n_clusters=5, n_rare=1, random_state=4)
    np.testing.assert_array_equal(a.X, b.X)
    np.testing.assert_array_equal(a.Z, b.Z)
    assert not np.array_equal(a.Z, c.Z)


def test_rare_clusters_bad_inputs():
    with pytest.raises(ValueError, match="n_rare"):
        make_rare_clusters(100, 100, 4, n_clusters=3, n_rare=4)
    with pytest.raises(ValueError, match="rare_weight"):
        make_rare_clusters(100, 100, 4, n_clusters=3, n_rare=1, rare_weight=0.0)
    with pytest.raises(ValueError, match="weights"):
        make_rare_clusters(100, 100, 4, n_clusters=3, weights=[1.0, 2.0])
    with pytest.raises(ValueError, match="family"):
        make_family("dense", 100)


def test_the_rare_family_is_rare_at_every_rank():
    # one rule (sampling and scale part c alike): 30% of the clusters, at least one, never all
    from ksvd_bench.datasets.synthetic import rare_cluster_count
    from ksvd_bench.race.scale.problems import n_rare

    counts = {k: rare_cluster_count(k) for k in (2, 3, 5, 10, 20, 40)}
    assert counts == {2: 1, 3: 1, 5: 2, 10: 3, 20: 6, 40: 12}
    assert all(n_rare(k) == c for k, c in counts.items())
    with pytest.raises(ValueError, match="n_clusters >= 2"):
        rare_cluster_count(1)
    # issue 19: at rank 5 every cluster was rare, so "rare" was the plain family
    rare, plain = make_family("rare", 600, rank=5), make_family("plain", 600, rank=5)
    assert rare.params["rare"] == [3, 4] and plain.params["rare"] == []
    sizes = np.bincount(rare.labels_x)
    assert sizes[3:].max() * 20 < sizes[:3].min()
    assert not np.array_equal(np.bincount(plain.labels_x), sizes)


@pytest.fixture(scope="module")
def tiny_study():
    return sampling_study(
        n=400,
        rank=5,
        samplings=("uniform", "arp", "rpcholesky", "rpcholesky-plain"),
        baselines=("generalized_nystrom",),
        ladder=(1, 2, 4),
        d=16,
        seed=0,
    )


def test_study_rows_and_costs(tiny_study):
    rows = tiny_study["rows"]
    assert {r["family"] for r in rows} == {"rare", "plain"}
    assert all(set(ROW_FIELDS) <= set(r) for r in rows)
    # every run's warnings are counted and kept: a message per distinct warning
    assert all(r["n_warnings"] >= len(r["warnings"]) for r in rows)
    assert all(r["n_warnings"] == 0 or r["warnings"] for r in rows)
    for r in rows:
        assert 0 <= r["error"] <= 1
        assert r["entries_frac"] == pytest.approx(r["entries"] / 400**2, rel=1e-6)
    assert any(r["method"] == "rpcholesky-plain" for r in rows)
    rp = [r for r in rows if r["method"] == "rpcholesky"]
    assert all(r["n_passes"] < 0.5 for r in rp)  # no pass over G
    arp = [r for r in rows if r["method"] == "arp"]
    assert all(1.0 <= r["n_passes"] < 1.5 for r in arp)  # the sketch + the sample
    # rpcholesky finds every cluster of the rare family and is accurate there
    best = min((r for r in rp if r["family"] == "rare"), key=lambda r: r["error"])
    assert best["error"] < 1e-2 and best["rare_found"] == len(
        tiny_study["families"]["rare"]["rare"]
    )
    assert tiny_study["families"]["rare"]["s_ratio"] < 1e-2


def test_study_table_and_files(tiny_study, tmp_path):
    text = format_sampling(tiny_study)
    assert max(len(line) for line in text.splitlines()) <= 100
    assert "rpcholesky" in text and "rare" in text
    paths = write_sampling(tiny_study, tmp_path)
    data = json.loads((tmp_path / "sampling.json").read_text())
    assert len(data["rows"]) == len(tiny_study["rows"])
    assert data["summary"] == json.loads(json.dumps(summary(tiny_study)))
    assert (tmp_path / "sampling.png").stat().st_size > 1000
    header = (tmp_path / "sampling.csv").read_text().splitlines()[0].split(",")
    assert header[: len(ROW_FIELDS)] == list(ROW_FIELDS)
    assert set(paths) == {"json", "csv", "summary_csv", "png"}
    # issue 19 section 1: no row claims converged beside a failed part of the rule
    from ksvd_bench.race.common import audit_rows

    assert audit_rows(data["rows"]) == []


def test_cli_flags_are_checked(tmp_path, capsys):
    parser = build_parser()
    with pytest.raises(SystemExit):
        parser.parse_args(["sampling", "--samplings", "uniform,leverage"])
    with pytest.raises(SystemExit):
        main(["sampling", "--n", "40", "--rank", "20", "--out", str(tmp_path)])
    assert "--rank" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["sampling", "--rank", "1", "--out", str(tmp_path)])
    assert "must be >= 2 for the rare family" in capsys.readouterr().err
    args = parser.parse_args(["sampling", "--baselines", "none", "--families", "rare"])
    assert args.baselines == ("none",) and args.families == ("rare",)
