"""Bundled datasets: counts documented in PROVENANCE.md, edge direction, tables, bad files.

The oracles are the raw files read independently (``np.load`` / ``np.genfromtxt``) and the
facts that ``ksvd_bench/datasets/data/PROVENANCE.md`` records about them.
"""

import dataclasses
import gzip
import shutil

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from ksvd_bench.datasets import (
    DATA_DIR,
    FEATURE_GRAPHS,
    GRAPHS,
    TABLES,
    DatasetError,
    Graph,
    list_datasets,
    load_features,
    load_graph,
    load_table,
)

TABLE_FILES = {
    "diabetes": "pima_indians_diabetes.csv.gz",
    "ionosphere": "ionosphere.csv.gz",
    "liver": "bupa_liver_disorders.csv.gz",
    "cholesterol": "cholesterol.csv.gz",
    "yacht": "yacht_hydrodynamics.csv.gz",
}


def _raw(name):
    with np.load(DATA_DIR / f"{name}.npz", allow_pickle=False) as d:
        return {k: d[k] for k in d.files}


def _genfromtxt(filename):
    with gzip.open(DATA_DIR / filename, "rt") as handle:
        return np.genfromtxt(handle, delimiter=",", skip_header=1)


def _copy(tmp_path, *filenames):
    for filename in filenames:
        shutil.copy(DATA_DIR / filename, tmp_path / filename)
    return tmp_path


# --------------------------------------------------------------------------- registry


def test_list_datasets_names_all_load():
    names = list_datasets()
    assert names == {"graphs": GRAPHS, "tables": TABLES}
    assert set(names["graphs"]) == {"cora", "citeseer", "pubmed"}
    assert set(names["tables"]) == {"diabetes", "ionosphere", "liver", "cholesterol", "yacht"}
    for name in names["graphs"]:
        assert load_graph(name).name == name
    for name in names["tables"]:
        X, y, task = load_table(name)
        assert X.shape[0] == y.shape[0] > 0


@pytest.mark.parametrize(
    ("alias", "name"),
    [
        ("pima_indians_diabetes", "diabetes"),
        ("bupa_liver_disorders", "liver"),
        ("yacht_hydrodynamics", "yacht"),
    ],
)
def test_table_aliases(alias, name):
    Xa, ya, ta = load_table(alias)
    X, y, t = load_table(name)
    np.testing.assert_array_equal(Xa, X)
    np.testing.assert_array_equal(ya, y)
    assert ta == t


@pytest.mark.parametrize("loader", [load_graph, load_table, load_features])
def test_unknown_name_lists_valid_names(loader):
    with pytest.raises(ValueError, match="valid names") as info:
        loader("karate")
    assert "karate" in str(info.value)


def test_features_unknown_for_pubmed():
    with pytest.raises(ValueError, match="'cora', 'citeseer'"):
        load_features("pubmed")


@pytest.mark.parametrize("loader", [load_graph, load_table])
def test_name_must_be_str(loader):
    with pytest.raises(TypeError, match="name"):
        loader(3)


# --------------------------------------------------------------------------- graphs


@pytest.mark.parametrize(
    ("name", "content_only", "n_nodes", "n_edges"),
    [
        ("cora", False, 2708, 5429),
        ("cora", True, 2708, 5429),
        ("citeseer", False, 3327, 4732),
        ("citeseer", True, 3312, 4715),
        ("pubmed", False, 19717, 44338),
        ("pubmed", True, 19717, 44338),
    ],
)
def test_graph_counts_match_provenance(name, content_only, n_nodes, n_edges):
    g = load_graph(name, content_only=content_only)
    assert isinstance(g, Graph)
    assert (g.n_nodes, g.n_edges) == (n_nodes, n_edges)
    A = g.adjacency
    assert sp.isspmatrix_csr(A) and A.dtype == np.float64 and A.shape == (n_nodes, n_nodes)
    assert A.has_sorted_indices
    np.testing.assert_array_equal(A.data, 1.0)
    assert g.labels.dtype == np.int64 and g.labels.shape == (n_nodes,)
    assert g.node_ids.shape == (n_nodes,)


@pytest.mark.parametrize(
    ("name", "self_loops", "reciprocal", "undirected", "n_classes"),
    [("cora", 0, 151, 5278, 7), ("citeseer", 124, 55, 4536, 6), ("pubmed", 3, 11, 44324, 3)],
)
def test_graph_structure_matches_provenance(name, self_loops, reciprocal, undirected, n_classes):
    # PROVENANCE.md reports these among content nodes
    g = load_graph(name, content_only=True)
    A = g.adjacency
    assert int(A.diagonal().sum()) == self_loops
    B = (A - sp.diags(A.diagonal())).tocsr()
    B.eliminate_zeros()
    assert B.multiply(B.T).nnz // 2 == reciprocal
    assert ((B + B.T) > 0).nnz // 2 == undirected
    assert len(g.class_names) == n_classes
    assert g.labels.min() == 0 and g.labels.max() == n_classes - 1


@pytest.mark.parametrize("name", GRAPHS)
def test_adjacency_direction_is_citing_to_cited(name):
    raw = _raw(name)
    assert raw["edge_columns"].tolist() == ["cited", "citing"]
    cited, citing = raw["edges"].T
    A = load_graph(name).adjacency.tocoo()
    got = set(zip(A.row.tolist(), A.col.tolist(), strict=True))
    assert got == set(zip(citing.tolist(), cited.tolist(), strict=True))
    np.testing.assert_array_equal(load_graph(name).node_ids, raw["node_ids"])


def test_class_counts_match_provenance():
    cora = load_graph("cora")
    counts = dict(zip(cora.class_names, np.bincount(cora.labels).tolist(), strict=True))
    assert counts["Neural_Networks"] == 818 and counts["Rule_Learning"] == 180
    assert list(cora.class_names) == sorted(cora.class_names)
    citeseer = load_graph("citeseer")
    assert int(np.sum(citeseer.labels == -1)) == 15
    assert "flach99database" in set(citeseer.node_ids[citeseer.labels == -1].tolist())
    pubmed = load_graph("pubmed")
    assert np.bincount(pubmed.labels).tolist() == [4103, 7875, 7739]


def test_citeseer_content_only_is_the_restriction():
    full = load_graph("citeseer")
    sub = load_graph("citeseer", content_only=True)
    keep = _raw("citeseer")["has_content"]
    np.testing.assert_array_equal(sub.node_ids, full.node_ids[keep])
    np.testing.assert_array_equal(sub.labels, full.labels[keep])
    assert (sub.labels >= 0).all()
    assert (sub.adjacency != full.adjacency[keep][:, keep]).nnz == 0


def test_graph_is_frozen():
    g = load_graph("cora")
    with pytest.raises(dataclasses.FrozenInstanceError):
        g.name = "other"


def test_content_only_must_be_bool():
    with pytest.raises(TypeError, match="content_only"):
        load_graph("cora", content_only="yes")


@pytest.mark.parametrize(
    ("name", "n_words", "nnz"), [("cora", 1433, 49216), ("citeseer", 3703, 105165)]
)
def test_features(name, n_words, nnz):
    for content_only in (False, True):
        X = load_features(name, content_only=content_only)
        g = load_graph(name, content_only=content_only)
        assert sp.isspmatrix_csr(X) and X.dtype == np.float64
        assert X.shape == (g.n_nodes, n_words)
        assert X.nnz == nnz
        np.testing.assert_array_equal(X.data, 1.0)
    oracle = sp.load_npz(DATA_DIR / f"{name}_features.npz")
    assert abs(load_features(name) - oracle).max() == 0


def test_citeseer_feature_rows_of_cited_only_ids_are_empty():
    X = load_features("citeseer")
    keep = _raw("citeseer")["has_content"]
    assert np.diff(X.indptr)[~keep].tolist() == [0] * 15
    assert (np.diff(X.indptr)[keep] > 0).all()


# --------------------------------------------------------------------------- tables


@pytest.mark.parametrize(
    ("name", "shape", "task"),
    [
        ("diabetes", (768, 8), "classification"),
        ("ionosphere", (351, 34), "classification"),
        ("liver", (345, 6), "classification"),
        ("cholesterol", (297, 13), "regression"),
        ("yacht", (308, 6), "regression"),
    ],
)
def test_tables_against_genfromtxt(name, shape, task):
    X, y, got_task = load_table(name)
    assert X.shape == shape and X.dtype == np.float64 and X.flags.c_contiguous
    assert got_task == task
    assert y.dtype == (np.int64 if task == "classification" else np.float64)
    oracle = _genfromtxt(TABLE_FILES[name])
    oracle = oracle[~np.isnan(oracle).any(axis=1)]
    np.testing.assert_array_equal(X, oracle[:, :-1])
    np.testing.assert_array_equal(y, oracle[:, -1])


def test_table_class_balance_matches_provenance():
    assert np.bincount(load_table("diabetes")[1]).tolist() == [500, 268]
    assert np.bincount(load_table("ionosphere")[1]).tolist() == [126, 225]
    y = load_table("liver")[1]
    assert (int(np.sum(y == 1)), int(np.sum(y == 2))) == (145, 200)
    assert np.all(load_table("ionosphere")[0][:, 1] == 0)  # a02 is constant in the original
    y_chol = load_table("cholesterol", missing="keep")[1]
    assert (y_chol.min(), y_chol.max()) == (126, 564)
    y_yacht = load_table("yacht")[1]
    assert (y_yacht.min(), y_yacht.max()) == (0.01, 62.42)


def test_liver_drinks_target():
    X, y, task = load_table("liver", target="drinks")
    raw = _genfromtxt(TABLE_FILES["liver"])
    np.testing.assert_array_equal(X, raw[:, :5])
    np.testing.assert_array_equal(y, (raw[:, 5] > 5).astype(np.int64))
    assert task == "classification" and set(np.unique(y)) == {0, 1}


def test_cholesterol_missing_modes():
    X_keep, y_keep, _ = load_table("cholesterol", missing="keep")
    assert X_keep.shape == (303, 13)
    nan_cols = np.isnan(X_keep).sum(axis=0)
    assert nan_cols[10] == 4 and nan_cols[11] == 2 and nan_cols.sum() == 6  # ca, thal
    X_drop, y_drop, _ = load_table("cholesterol")
    rows = ~np.isnan(X_keep).any(axis=1)
    np.testing.assert_array_equal(X_drop, X_keep[rows])
    np.testing.assert_array_equal(y_drop, y_keep[rows])
    with pytest.raises(DatasetError, match=r"cholesterol\.csv\.gz.*6 row"):
        load_table("cholesterol", missing="raise")
    # files without missing values are unaffected by missing="raise"
    np.testing.assert_array_equal(load_table("yacht", missing="raise")[0], load_table("yacht")[0])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"name": "liver", "target": "age"}, "target"),
        ({"name": "yacht", "target": "drinks"}, "target"),
        ({"name": "yacht", "missing": "impute"}, "missing"),
    ],
)
def test_table_bad_options(kwargs, match):
    with pytest.raises(ValueError, match=match):
        load_table(**kwargs)


# --------------------------------------------------------------------------- bad files


def test_missing_file_names_it(tmp_path):
    with pytest.raises(DatasetError, match=r"cora\.npz.*missing"):
        load_graph("cora", data_home=tmp_path)
    with pytest.raises(DatasetError, match=r"yacht_hydrodynamics\.csv\.gz.*missing"):
        load_table("yacht", data_home=tmp_path)
    _copy(tmp_path, "cora.npz")
    with pytest.raises(DatasetError, match=r"cora_features\.npz.*missing"):
        load_features("cora", data_home=tmp_path)


def test_data_home_must_be_a_path():
    with pytest.raises(TypeError, match="data_home"):
        load_graph("cora", data_home=3)


def test_data_home_copy_loads_identically(tmp_path):
    _copy(tmp_path, "citeseer.npz", "citeseer_features.npz")
    a = load_graph("citeseer", data_home=tmp_path)
    b = load_graph("citeseer")
    assert (a.adjacency != b.adjacency).nnz == 0
    assert (load_features("citeseer", data_home=tmp_path) != load_features("citeseer")).nnz == 0


def test_truncated_npz(tmp_path):
    raw = (DATA_DIR / "cora.npz").read_bytes()
    (tmp_path / "cora.npz").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(DatasetError, match=r"cora\.npz.*corrupt or truncated"):
        load_graph("cora", data_home=tmp_path)


def _write_graph(tmp_path, name="cora", **changes):
    arrays = _raw(name)
    arrays.update(changes)
    for key in [k for k, v in changes.items() if v is None]:
        del arrays[key]
    np.savez(tmp_path / f"{name}.npz", **arrays)


def test_pickled_arrays_are_refused(tmp_path):
    ids = _raw("cora")["node_ids"].astype(object)
    _write_graph(tmp_path, node_ids=ids)
    with pytest.raises(DatasetError, match=r"cora\.npz.*pickle"):
        load_graph("cora", data_home=tmp_path)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"edges": None}, r"lacks the array\(s\) \['edges'\]"),
        ({"edges": np.zeros((4, 3), dtype=np.int32)}, r"edges has shape \(4, 3\)"),
        ({"edges": np.zeros(8, dtype=np.int32)}, "'edges' should be a 2-d int array"),
        ({"edges": np.array([[0, 5000]], dtype=np.int32)}, "outside"),
        ({"edges": np.zeros((2, 2), dtype=np.float64)}, "'edges' should be a 2-d int array"),
        ({"edge_columns": np.array(["citing", "cited"])}, "edge_columns"),
        ({"labels": np.zeros(5, dtype=np.int64)}, "labels"),
        ({"labels": np.full(2708, 9, dtype=np.int64)}, r"labels outside \[-1, 7\)"),
        ({"labels": np.full(2708, -1, dtype=np.int64)}, "no label"),
        ({"node_ids": np.array(["1"] * 2708)}, "not unique"),
    ],
)
def test_malformed_graph_file(tmp_path, change, match):
    _write_graph(tmp_path, **change)
    with pytest.raises(DatasetError, match=match) as info:
        load_graph("cora", data_home=tmp_path)
    assert "cora.npz" in str(info.value)


def test_malformed_feature_files(tmp_path):
    _copy(tmp_path, "cora.npz")
    X = sp.load_npz(DATA_DIR / "cora_features.npz")
    sp.save_npz(tmp_path / "cora_features.npz", X[:10])
    with pytest.raises(DatasetError, match=r"cora_features\.npz.*10 rows.*2708 nodes"):
        load_features("cora", data_home=tmp_path)
    np.savez(
        tmp_path / "cora_features.npz",
        format=np.array(b"csr"),
        shape=np.array([2708, 1433]),
        data=X.data,
        indices=X.indices,
        indptr=X.indptr[:-1],
    )
    with pytest.raises(DatasetError, match="indptr"):
        load_features("cora", data_home=tmp_path)
    np.savez(
        tmp_path / "cora_features.npz",
        format=np.array(b"csc"),
        shape=np.array([2708, 1433]),
        data=X.data,
        indices=X.indices,
        indptr=X.indptr,
    )
    with pytest.raises(DatasetError, match="format 'csc'"):
        load_features("cora", data_home=tmp_path)
    bad = X.indices.copy()
    bad[0] = 5000
    np.savez(
        tmp_path / "cora_features.npz",
        format=np.array(b"csr"),
        shape=np.array([2708, 1433]),
        data=X.data,
        indices=bad,
        indptr=X.indptr,
    )
    with pytest.raises(DatasetError, match="column indices outside"):
        load_features("cora", data_home=tmp_path)


def _write_csv(tmp_path, filename, text):
    with gzip.open(tmp_path / filename, "wt") as handle:
        handle.write(text)


YACHT_HEADER = (
    "lcb,prismatic_coeff,length_displacement,beam_draught,length_beam,froude_number,"
    "residuary_resistance\n"
)


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ("-2.3,0.568,4.78,3.99,3.17,0.125\n", r"line 2: 6 fields, expected 7"),
        ("-2.3,0.568,4.78,3.99,3.17,0.125,0.11,9\n", "8 fields, expected 7"),
        ("-2.3,0.568,abc,3.99,3.17,0.125,0.11\n", r"line 2, column 'length_displacement'.*'abc'"),
        ("1,1,1,1,1,1,1\n-2.3,0.568,inf,3.99,3.17,0.125,0.11\n", "line 3.*'inf' is not a finite"),
        ("", "no data rows"),
    ],
)
def test_malformed_csv(tmp_path, body, match):
    _write_csv(tmp_path, "yacht_hydrodynamics.csv.gz", YACHT_HEADER + body)
    with pytest.raises(DatasetError, match=match) as info:
        load_table("yacht", data_home=tmp_path)
    assert "yacht_hydrodynamics.csv.gz" in str(info.value)


def test_csv_wrong_header_and_empty_file(tmp_path):
    _write_csv(tmp_path, "yacht_hydrodynamics.csv.gz", "a,b\n1,2\n")
    with pytest.raises(DatasetError, match="header has 2 columns"):
        load_table("yacht", data_home=tmp_path)
    _write_csv(tmp_path, "yacht_hydrodynamics.csv.gz", "")
    with pytest.raises(DatasetError, match="is empty"):
        load_table("yacht", data_home=tmp_path)


def test_csv_bad_gzip(tmp_path):
    (tmp_path / "ionosphere.csv.gz").write_bytes(b"a01,a02\n1,2\n")  # plain text, not gzip
    with pytest.raises(DatasetError, match=r"ionosphere\.csv\.gz.*not a readable gzipped CSV"):
        load_table("ionosphere", data_home=tmp_path)


@settings(max_examples=30, deadline=None)
@given(fraction=st.floats(0.0, 0.999))
def test_any_truncation_raises_dataset_error(tmp_path_factory, fraction):
    tmp = tmp_path_factory.mktemp("trunc")
    for filename, load in [
        ("citeseer.npz", lambda: load_graph("citeseer", data_home=tmp)),
        ("cholesterol.csv.gz", lambda: load_table("cholesterol", data_home=tmp)),
    ]:
        raw = (DATA_DIR / filename).read_bytes()
        (tmp / filename).write_bytes(raw[: int(fraction * len(raw))])
        with pytest.raises(DatasetError, match=filename.replace(".", r"\.")):
            load()


@settings(max_examples=40, deadline=None)
@given(position=st.floats(0.0, 0.999), bit=st.integers(0, 7))
def test_bit_flip_raises_or_changes_nothing(tmp_path_factory, position, bit):
    """A flipped bit is caught (CRC, parsing, checks) or lands in bytes that carry no data."""
    tmp = tmp_path_factory.mktemp("flip")
    reference_graph = load_graph("cora")
    reference_table = load_table("liver")
    for filename in ("cora.npz", "bupa_liver_disorders.csv.gz"):
        raw = bytearray((DATA_DIR / filename).read_bytes())
        raw[int(position * len(raw))] ^= 1 << bit
        (tmp / filename).write_bytes(bytes(raw))
    try:
        g = load_graph("cora", data_home=tmp)
    except DatasetError as exc:
        assert "cora.npz" in str(exc)
    else:
        assert (g.adjacency != reference_graph.adjacency).nnz == 0
        np.testing.assert_array_equal(g.labels, reference_graph.labels)
        np.testing.assert_array_equal(g.node_ids, reference_graph.node_ids)
    try:
        X, y, _ = load_table("liver", data_home=tmp)
    except DatasetError as exc:
        assert "bupa_liver_disorders.csv.gz" in str(exc)
    else:
        np.testing.assert_array_equal(X, reference_table[0])
        np.testing.assert_array_equal(y, reference_table[1])


def test_feature_graphs_have_features():
    for name in FEATURE_GRAPHS:
        assert load_features(name).shape[0] == load_graph(name).n_nodes
