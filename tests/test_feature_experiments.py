"""Metric helpers on hand-made cases and smoke tests of every feature-learning experiment."""

import json
import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import make_classification, make_regression
from sklearn.decomposition import KernelPCA
from sklearn.neighbors import KernelDensity

from ksvd_bench.datasets import Graph, make_directed_graph
from ksvd_bench.paper import paper_numbers
from ksvd_bench.paper._result import ExperimentResult
from ksvd_bench.paper.ablation import poly_svd_features, run_ablation
from ksvd_bench.paper.asymmetry import NOT_COMPARABLE, kde_kl, run_asymmetry
from ksvd_bench.paper.cli import EXPERIMENTS, add_parser, main
from ksvd_bench.paper.graph_reconstruction import (
    reconstruct_adjacency,
    reconstruction_errors,
    run_graph_reconstruction,
)
from ksvd_bench.paper.node_classification import (
    combine_features,
    format_chance_levels,
    majority_baseline,
    make_splits,
    protocol_probe,
    run_node_classification,
    structured_rbf_kpca,
)
from ksvd_bench.paper.nystrom_f1 import nystrom_features, plot_f1_vs_m, run_nystrom_f1
from ksvd_bench.paper.uci import run_uci, uci_methods


def _graph_loader(name):
    return make_directed_graph(120, n_communities=3, avg_degree=4.0, random_state=0)


def _table_loader(name):
    if name == "reg":
        X, y = make_regression(80, 6, noise=1.0, random_state=0)
        return X, y, "regression"
    X, y = make_classification(90, 7, n_informative=4, random_state=0)
    return X, y, "classification"


# --------------------------------------------------------------------- metric helpers
def test_reconstruct_adjacency_hand_case():
    # 1-D embeddings: node positions 0, 1, 3, 10; targets shifted so node 0 is nearest to 1
    source = np.array([[0.0], [1.0], [3.0], [10.0]])
    target = np.array([[0.0], [0.9], [2.5], [9.0]])
    A_hat = reconstruct_adjacency(source, target, [2, 1, 0, 1]).toarray()
    expected = np.array(
        [
            [0, 1, 1, 0],  # from 0: itself excluded, then 0.9 (d .9) and 2.5 (d 2.5)
            [1, 0, 0, 0],  # from 1: 0.9 is itself, next 0.0 (d 1.0) beats 2.5 (d 1.5)
            [0, 0, 0, 0],  # out-degree 0
            [0, 0, 1, 0],  # from 10: 9.0 is itself, next 2.5
        ]
    )
    np.testing.assert_array_equal(A_hat, expected)


def test_reconstruction_errors_hand_case():
    A = np.array([[0, 1, 1], [0, 0, 1], [1, 0, 0]], dtype=float)
    A_hat = np.array([[0, 0, 1], [1, 0, 1], [0, 1, 0]], dtype=float)
    # D = A - A_hat = [[0, 1, 0], [-1, 0, 0], [1, -1, 0]]
    err = reconstruction_errors(sp.csr_matrix(A), A_hat)
    assert err["l1"] == 2.0  # columns: |0|+|-1|+|1| = 2, 1+0+1 = 2, 0
    D = A - A_hat
    assert err["l2"] == pytest.approx(np.linalg.svd(D, compute_uv=False)[0])
    assert err["missing"] == 2 and err["spurious"] == 2 and err["n_diff"] == 4
    assert err["frobenius"] == pytest.approx(2.0)


def test_reconstruction_errors_large_uses_sparse_norm():
    rng = np.random.default_rng(0)
    A = sp.random(600, 600, density=0.01, random_state=1, format="csr")
    A.data[:] = 1
    # same row sums as A (as in a reconstruction): D @ 1 = 0 must not break the norm
    B = A[:, rng.permutation(600)].tocsr()
    err = reconstruction_errors(A, B)
    D = (A - B).toarray()
    assert err["l2"] == pytest.approx(np.linalg.norm(D, 2), rel=1e-6)
    assert err["l1"] == np.abs(D).sum(axis=0).max()


def test_identical_reconstruction_is_zero_error():
    A = sp.csr_matrix(np.array([[0, 1.0], [1.0, 0]]))
    assert reconstruction_errors(A, A) == dict(
        l1=0.0, l2=0.0, missing=0, spurious=0, n_diff=0, frobenius=0.0
    )


def test_combine_features_modes():
    left, right, s = np.ones((4, 2)), 2 * np.ones((4, 2)), np.array([3.0, 0.5])
    emb = dict(left=left, right=right, s=s)
    np.testing.assert_array_equal(combine_features(emb, "u"), left)
    np.testing.assert_array_equal(combine_features(emb, "us"), left * s)
    np.testing.assert_array_equal(combine_features(emb, "uv"), np.hstack([left, right]))
    np.testing.assert_array_equal(combine_features(emb, "usvs"), np.hstack([left * s, right * s]))
    sym = dict(left=left, right=left, s=s)
    assert combine_features(sym, "uv").shape == (4, 2)
    with pytest.raises(ValueError, match="mode"):
        combine_features(emb, "vu")


def test_structured_kpca_matches_sklearn():
    A = make_directed_graph(120, random_state=1).adjacency
    for gamma in (1.5, 20.0):
        ours = structured_rbf_kpca(A, gamma, 5, random_state=0)
        ref = KernelPCA(5, kernel="rbf", gamma=1 / gamma**2, eigen_solver="dense").fit_transform(
            A.toarray()
        )
        # eigenvalues (squared score norms) and the rotation-invariant Gram matrix of the scores
        np.testing.assert_allclose(
            np.linalg.norm(ours, axis=0), np.linalg.norm(ref, axis=0), rtol=1e-8
        )
        np.testing.assert_allclose(ours @ ours.T, ref @ ref.T, atol=1e-8)


def test_make_splits_stratified_and_skips_unlabelled():
    labels = np.array([0] * 20 + [1] * 20 + [-1] * 5)
    splits = make_splits(labels, 3, test_size=0.1, random_state=0)
    for train, test in splits:
        assert set(train).isdisjoint(test)
        assert np.all(labels[np.concatenate([train, test])] >= 0)
        assert np.bincount(labels[test]).tolist() == [2, 2]


def test_poly_svd_features_project_training_rows_onto_themselves():
    X = np.random.default_rng(0).standard_normal((30, 3))
    Ftr, Fte = poly_svd_features(X, X, n_components=4)
    np.testing.assert_allclose(Fte, Ftr, atol=1e-10)


def test_kde_kl_properties():
    rng = np.random.default_rng(0)
    P = rng.standard_normal((200, 2))
    same = kde_kl(P, P, bandwidth=0.5)
    assert same["kl_pq"] == pytest.approx(0.0, abs=1e-12)
    far = kde_kl(P, P + 3.0, bandwidth=0.5)
    kp = KernelDensity(bandwidth=0.5).fit(P)
    kq = KernelDensity(bandwidth=0.5).fit(P + 3.0)
    manual = np.mean(kp.score_samples(P) - kq.score_samples(P))
    assert far["kl_pq"] == pytest.approx(manual)
    assert far["kl_pq_sum"] == pytest.approx(200 * manual)
    assert far["kl_pq"] > 1.0


# --------------------------------------------------------------------- smoke tests
def test_node_classification_smoke():
    res = run_node_classification(
        ("synthetic",),
        n_components=6,
        n_runs=2,
        bandwidth_grid=(0.5, 1.0),
        cv_folds=3,
        graph_loader=_graph_loader,
        progress=False,
    )
    assert [r["method"] for r in res["rows"]] == ["pca", "kpca", "svd", "ksvd"]
    for row in res["rows"]:
        assert 0.0 <= row["micro"] <= 1.0 and 0.0 <= row["macro"] <= 1.0
        assert row["n_features"] == 12
    # planted communities are visible in the directed structure
    assert max(r["micro"] for r in res["rows"]) > 0.5
    assert len(res["runs"]) == 8
    base = res["chance"]["synthetic"]
    for row in res["rows"]:
        assert ("chance level" in row["note"]) == (row["micro"] <= base["threshold"])
    with pytest.raises(ValueError, match="subsample=5 is too small"):
        run_node_classification(
            ("synthetic",), subsample=5, graph_loader=_graph_loader, progress=False
        )


def test_protocol_probe_smoke():
    variants = [
        dict(method="svd", n_components=5, mode="uv", standardize=False),
        dict(
            method="ksvd",
            n_components=5,
            mode="us",
            standardize=True,
            bandwidth_factor=4.0,
            self_loops=True,
        ),
    ]
    rows = protocol_probe(_graph_loader("x"), variants=variants, n_runs=2, progress=False)
    assert [r["n_features"] for r in rows] == [10, 5]
    assert all(0.0 <= r["micro"] <= 1.0 for r in rows)
    assert rows[1]["self_loops"] is True


def test_graph_reconstruction_smoke():
    res = run_graph_reconstruction(
        ("synthetic",), n_components=6, graph_loader=_graph_loader, progress=False
    )
    for row in res["rows"]:
        assert row["missing"] == row["spurious"]  # each node predicts exactly its out-degree
        assert row["l2"] <= row["l1"] + 1e-9 or row["l2"] <= np.sqrt(row["n_diff"])
        assert row["n_diff"] == row["missing"] + row["spurious"]


def test_uci_smoke():
    methods = ["kpca", "ksvd-rbf-a0", "ksvd-sne-a2"]
    res = run_uci(
        ("cls", "reg"), methods=methods, n_runs=2, table_loader=_table_loader, progress=False
    )
    assert len(res["rows"]) == 2 * len(methods) + len(methods)
    for row in res["rows"]:
        assert np.isfinite(row["value"])
        if row["metric"] in ("acc", "auroc"):
            assert 0.0 <= row["value"] <= 1.0
    assert uci_methods()[0] == "kpca" and len(uci_methods()) == 7


def test_ablation_smoke():
    res = run_ablation(("cls", "reg"), n_runs=2, table_loader=_table_loader, progress=False)
    assert [r["method"] for r in res["rows"]] == ["poly+svd", "ksvd-poly"] * 2
    assert all(np.isfinite(r["value"]) for r in res["rows"])


def test_asymmetry_smoke():
    res = run_asymmetry(("cls", "reg"), table_loader=_table_loader, progress=False)
    assert [r["n_cols"] for r in res["rows"]] == [7, 6]
    assert all(np.isfinite(r["kl_rows"]) for r in res["rows"])


def test_nystrom_f1_smoke(tmp_path):
    res = run_nystrom_f1(
        ("synthetic",),
        m_grid=(20, 60),
        n_components=5,
        n_runs=2,
        graph_loader=_graph_loader,
        progress=False,
    )
    assert [(r["method"], r["m"]) for r in res["rows"]] == [
        ("ksvd-asym-nystrom", 20),
        ("ksvd-asym-nystrom", 60),
        ("kpca-sym-nystrom", 20),
        ("kpca-sym-nystrom", 60),
    ]
    path = plot_f1_vs_m(res, tmp_path / "f1.png")
    assert path.stat().st_size > 1000


def test_cli_parses_every_experiment_and_runs_asymmetry(tmp_path, capsys):
    import argparse

    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers(dest="command"))
    for name in EXPERIMENTS + ("all",):
        args = parser.parse_args(["reproduce", name, "--quick", "--out", str(tmp_path)])
        assert callable(args.func)
    assert (
        main(
            [
                "reproduce",
                "asymmetry",
                "--out",
                str(tmp_path),
                "--no-progress",
                "--datasets",
                "yacht,liver",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "yacht" in out and "paper" in out
    payload = json.loads((tmp_path / "asymmetry.json").read_text())
    assert payload["rows"][0]["paper"] == paper_numbers.ASYMMETRY_KL["yacht"]
    assert (tmp_path / "asymmetry.csv").exists()


# --------------------------------------------------------------------- issue 11 fixes
def _imbalanced_noise_loader(name):
    # labels drawn independently of the graph, 80 % one class: no feature can beat chance
    graph = _graph_loader(name)
    rng = np.random.default_rng(1)
    labels = rng.choice(3, size=graph.n_nodes, p=[0.8, 0.1, 0.1])
    return Graph(graph.name, graph.adjacency, labels, graph.class_names, graph.node_ids)


def test_majority_baseline_hand_case():
    labels = np.array([0, 0, 0, 1, 2, 0, 0, 1, 2])
    splits = [(np.arange(5), np.array([5, 6, 7, 8]))]  # train majority 0; test 0, 0, 1, 2
    base = majority_baseline(labels, splits)
    assert base["micro"] == pytest.approx(0.5)
    # class 0: precision 1/2, recall 1 -> F1 2/3; classes 1 and 2 never predicted -> 0
    assert base["macro"] == pytest.approx((2 / 3) / 3)
    assert base["threshold"] == pytest.approx(0.5 + 2 * np.sqrt(0.25 / 4))


def test_nystrom_f1_marks_chance_level_from_the_label_distribution():
    res = run_nystrom_f1(
        ("noise",),
        m_grid=(20, 60),
        n_components=5,
        n_runs=3,
        graph_loader=_imbalanced_noise_loader,
        progress=False,
    )
    base = res["chance"]["noise"]
    assert 0.7 < base["micro"] < 0.9  # the majority share of the drawn labels, not a constant
    for row in res["rows"]:
        assert ("chance level" in row["note"]) == (row["micro"] <= base["threshold"])
    assert any("chance level" in row["note"] for row in res["rows"])
    line = format_chance_levels(res)[0]
    assert f"micro-F1 {base['micro']:.3f}" in line and f"macro-F1 {base['macro']:.3f}" in line


def test_nystrom_f1_gives_both_methods_the_same_number_of_features():
    A = _graph_loader("x").adjacency
    for m, expected in [(10, 10), (11, 10), (60, 16)]:
        widths = {
            method: nystrom_features(A, method, m, 8, random_state=0)[0].shape[1]
            for method in ("ksvd-asym-nystrom", "kpca-sym-nystrom")
        }
        assert widths == {"ksvd-asym-nystrom": expected, "kpca-sym-nystrom": expected}
    with pytest.raises(ValueError, match="m must be"):
        nystrom_features(A, "kpca-sym-nystrom", 500, 8)


def test_nystrom_f1_runs_an_m_above_n_at_n_with_a_note():
    res = run_nystrom_f1(
        ("synthetic",),
        m_grid=(20, 500, 900),
        n_components=4,
        n_runs=2,
        graph_loader=_graph_loader,
        progress=False,
    )
    assert [(r["method"], r["m"]) for r in res["rows"]] == [
        ("ksvd-asym-nystrom", 20),
        ("ksvd-asym-nystrom", 120),
        ("kpca-sym-nystrom", 20),
        ("kpca-sym-nystrom", 120),
    ]
    assert "m=500,900 > N: ran at m = N" in res["rows"][1]["note"]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(n_runs=0), "n_runs"),
        (dict(n_runs=-1), "n_runs"),
        (dict(n_components=0), "n_components"),
        (dict(m_grid=(10, 1)), "m_grid"),
        (dict(m_grid=()), "m_grid"),
        (dict(subsample=3), "subsample"),
        (dict(subsample=6), "subsample=6 is too small"),
    ],
)
def test_run_nystrom_f1_rejects_bad_settings_up_front(kwargs, match):
    with pytest.raises(ValueError, match=match):
        run_nystrom_f1(
            ("synthetic",),
            **{"m_grid": (20,), "n_runs": 2, **kwargs},
            graph_loader=_graph_loader,
            progress=False,
        )


def test_experiment_results_have_a_short_repr():
    res = run_asymmetry(("cls", "reg"), table_loader=_table_loader, progress=False)
    assert isinstance(res, ExperimentResult) and isinstance(res, dict)
    text = repr(res)
    assert text.startswith("ExperimentResult('asymmetry', rows=<2 rows: dataset, n_rows")
    assert "\n" not in text and len(text) < 200
    copy = pickle.loads(pickle.dumps(res))
    assert copy == res and repr(copy) == text
    big = ExperimentResult(
        "x",
        rows=[dict(a=1.0)] * 10_000,
        runs=list(range(10_000)),
        features=np.zeros((3000, 100)),
        seconds=12.345,
    )
    assert repr(big) == (
        "ExperimentResult('x', rows=<10000 rows: a>, runs=<list of 10000>, "
        "features=<array (3000, 100) float64>, seconds=12.3)"
    )


def test_asymmetry_says_the_paper_values_are_not_comparable(tmp_path, capsys):
    assert (
        main(
            [
                "reproduce",
                "asymmetry",
                "--out",
                str(tmp_path),
                "--no-progress",
                "--datasets",
                "yacht",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "paper (not comparable)" in out and NOT_COMPARABLE in out
    payload = json.loads((tmp_path / "asymmetry.json").read_text())
    assert payload["protocol"]["paper_values"] == NOT_COMPARABLE


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["nystrom-f1", "--runs", "-1"], "--runs"),
        (["uci", "--runs", "0"], "--runs"),
        (["node-classification", "--n-components", "0"], "--n-components"),
        (["nystrom-f1", "--n-components", "0"], "--n-components"),
        (["nystrom-f1", "--m-grid", "10,x"], "--m-grid"),
        (["nystrom-f1", "--m-grid", "1"], "--m-grid"),
        (["node-classification", "--grid", "0,1"], "--grid"),
        (["node-classification", "--subsample", "3"], "--subsample"),
        (["node-classification", "--subsample", "5", "--datasets", "cora"], "--subsample"),
        (["nystrom-f1", "--subsample", "5", "--datasets", "cora"], "--subsample"),
        (["all", "--subsample", "5"], "--subsample"),
        # the first 4 nodes of Cora share no edge: nothing to embed
        (["graph-reconstruction", "--subsample", "4", "--datasets", "cora"], "--subsample"),
        (["uci", "--datasets", "cora"], "--datasets"),
        (["asymmetry", "--seed", "-1"], "--seed"),
        (["asymmetry", "--out", ""], "--out"),
    ],
)
def test_cli_refuses_bad_values_naming_the_flag(argv, flag, tmp_path, capsys):
    out = [] if "--out" in argv else ["--out", str(tmp_path / "o")]
    with pytest.raises(SystemExit) as exc:
        main(["reproduce", *argv, *out, "--no-progress"])
    assert exc.value.code == 2
    assert f"argument {flag}:" in capsys.readouterr().err
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())


def test_cli_refuses_an_out_under_a_file_before_any_work(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(SystemExit) as exc:
        main(["reproduce", "uci", "--out", str(blocker / "sub"), "--no-progress"])
    assert exc.value.code == 2
    assert "argument --out: cannot create directory" in capsys.readouterr().err


def test_cli_keeps_a_large_m_and_validated_lists():
    import argparse

    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(
        ["reproduce", "nystrom-f1", "--m-grid", "10,5000", "--datasets", "Cora, pubmed"]
    )
    assert args.m_grid == (10, 5000) and args.datasets == ("cora", "pubmed")


def test_graph_reconstruction_refuses_a_graph_without_edges():
    def empty_loader(name):
        graph = _graph_loader(name)
        return Graph(
            graph.name,
            sp.diags(np.ones(graph.n_nodes), format="csr"),
            graph.labels,
            graph.class_names,
            graph.node_ids,
        )

    with pytest.raises(ValueError, match="no edge between two different nodes"):
        run_graph_reconstruction(
            ("loops-only",), n_components=4, graph_loader=empty_loader, progress=False
        )
