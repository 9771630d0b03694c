"""A user's own problems: ``compare --data/--points/--matrix`` and their Python entry points
(issue 19, section 2). Every input kind, and every kind of bad file, refused before any work."""

import argparse

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from ksvd_bench.datasets import DatasetError
from ksvd_bench.datasets._files import read_user_matrix
from ksvd_bench.kernels import kernel_matrix, ksvd_kernel
from ksvd_bench.race import problems as problems_module
from ksvd_bench.race.commands import add_problem_arguments, problems_from_args
from ksvd_bench.race.problems import (
    krylov_reference,
    points_gamma,
    problem_from_file,
    problem_from_points,
)


def _data(seed=0, shape=(40, 40)):
    rng = np.random.default_rng(seed)
    return rng.random(shape)


def _points(seed=0, n=60, d=3):
    return np.random.default_rng(seed).normal(size=(n, d))


# ----------------------------------------------------------------------------- input kinds


@pytest.mark.parametrize("suffix", [".npy", ".npz", ".sparse.npz", ".mtx", ".csv"])
def test_data_file_of_every_format_gives_the_kernel_of_its_matrix(tmp_path, suffix):
    A = _data()
    A[A < 0.5] = 0.0  # some zeros, so the sparse formats hold a real sparse matrix
    path = tmp_path / f"web{suffix}"
    if suffix == ".npy":
        np.save(path, A)
    elif suffix == ".npz":
        np.savez(path, anything=A)
    elif suffix == ".sparse.npz":
        sp.save_npz(path, sp.csr_matrix(A))
    elif suffix == ".mtx":
        scipy.io.mmwrite(str(path), sp.coo_matrix(A))
    else:
        np.savetxt(path, A, delimiter=",", header=",".join(f"f{j}" for j in range(40)), comments="")
    problem = problem_from_file(path, kind="data", kernel="sne")
    assert problem.name == "web"  # the file's stem
    assert problem.source == str(path)
    expected = ksvd_kernel(
        sp.csr_matrix(A) if "sparse" in suffix or suffix == ".mtx" else A,
        "sne",
        gamma=problem.gamma,
        center=True,
    )
    np.testing.assert_allclose(problem.G, expected, rtol=1e-12, atol=1e-14)


def test_non_square_data_gets_the_default_compat(tmp_path):
    path = tmp_path / "table.npy"
    np.save(path, _data(shape=(50, 8)))
    problem = problem_from_file(path, kind="data")
    assert problem.shape == (50, 8)
    assert problem.params["compat"] == "pca"


@pytest.mark.parametrize("sparse", [False, True])
def test_matrix_file_is_raced_as_given(tmp_path, sparse):
    G = _data(1, (30, 20))
    path = tmp_path / "gram.npz"
    if sparse:
        sp.save_npz(path, sp.csr_matrix(G))
    else:
        np.savez(path, G=G)
    problem = problem_from_file(path, kind="matrix")
    assert problem.name == "gram" and problem.kernel is None and not problem.is_lazy
    np.testing.assert_array_equal(problem.G, G)


def test_sparse_matrix_over_the_memory_limit_is_refused(tmp_path):
    path = tmp_path / "big.npz"
    sp.save_npz(path, sp.random(300, 300, density=0.01, random_state=0, format="csr"))
    with pytest.raises(DatasetError, match=r"'big'.*over the memory limit"):
        problem_from_file(path, kind="matrix", memory_limit=1000)


def test_points_one_file_is_used_twice_and_two_files_give_k_of_x_and_z(tmp_path):
    X, Z = _points(0), _points(1, n=45)
    np.save(tmp_path / "x.npy", X)
    np.save(tmp_path / "z.npy", Z)
    one = problem_from_file(tmp_path / "x.npy", kind="points")
    assert one.name == "x" and one.shape == (60, 60)
    np.testing.assert_allclose(
        one.G, kernel_matrix(X, X, "sne", gamma=points_gamma(X, X)), rtol=1e-12
    )
    two = problem_from_file([tmp_path / "x.npy", tmp_path / "z.npy"], kind="points")
    assert two.shape == (60, 45) and two.points is not None and not two.is_lazy
    np.testing.assert_allclose(two.G, kernel_matrix(X, Z, "sne", gamma=two.gamma), rtol=1e-12)
    # the joint PSD kernel that rpcholesky needs is there
    assert callable(getattr(two.lazy_source(), "joint_psd", None))


def test_points_over_the_memory_limit_are_lazy_with_a_block_krylov_reference():
    X, Z = _points(2, n=120, d=4), _points(3, n=100, d=4)
    problem = problem_from_points(X, Z, name="pts", memory_limit=1000.0)
    assert problem.is_lazy and not isinstance(problem.G, np.ndarray)
    assert "block Krylov" in problem.reference_note
    G = kernel_matrix(X, Z, "sne", gamma=problem.gamma)
    # what compare reads of a lazy problem equals the dense kernel
    np.testing.assert_allclose(problem.corner(16), G[:16, :16], rtol=1e-12)
    assert problem.norm_fro() == pytest.approx(np.linalg.norm(G), rel=1e-12)
    ref = problem.lazy_reference(5)
    s = np.linalg.svd(G, compute_uv=False)
    np.testing.assert_allclose(ref.s[:5], s[:5], rtol=1e-9)
    assert ref.info["method"] == "block_krylov" and ref.info["estimated_error"] <= 1e-10


def test_krylov_reference_is_cached_by_definition(tmp_path):
    X = _points(4, n=80, d=3)
    problem = problem_from_points(X, name="pts", memory_limit=1.0)
    first = krylov_reference(problem.G, 4, cache_dir=tmp_path, key=problem.definition)
    again = krylov_reference(problem.G, 4, cache_dir=tmp_path, key=problem.definition)
    assert not first.info["cached"] and again.info["cached"]
    np.testing.assert_array_equal(first.s, again.s)


# ----------------------------------------------------------------------------- bad files


def _write_bad(tmp_path, case):
    if case == "missing":
        return tmp_path / "gone.npy", "missing"
    if case == "corrupt":
        path = tmp_path / "broken.npy"
        path.write_bytes(b"\x93NUMPY garbage that is no header")
        return path, "not a readable"
    if case == "truncated":
        path = tmp_path / "cut.npz"
        np.savez(path, A=_data())
        path.write_bytes(path.read_bytes()[:100])
        return path, "not a readable"
    if case == "pickle":
        path = tmp_path / "objects.npy"
        np.save(path, np.array([{"a": 1}], dtype=object), allow_pickle=True)
        return path, "holds pickled data .*: pickled arrays are refused"
    if case == "pickle-npz":
        path = tmp_path / "objects.npz"
        np.savez(path, A=np.array([{"a": 1}], dtype=object))
        return path, "pickled arrays are refused"
    if case == "directory":
        path = tmp_path / "folder.npy"
        path.mkdir()
        return path, "is a directory"
    if case == "decimal-comma-csv":
        path = tmp_path / "euro.csv"
        path.write_text("1,5;2\n3;4,25\n")
        return path, "line 1, column 1: '1,5' is not a real number .a decimal comma"
    if case == "space-csv":
        path = tmp_path / "spaced.csv"
        path.write_text("1 2 3\n4 5 6\n")
        return path, "line 1, column 1: .* .numbers separated by spaces"
    if case == "empty":
        path = tmp_path / "nothing.npy"
        np.save(path, np.zeros((0, 5)))
        return path, "empty"
    if case == "empty-csv":
        path = tmp_path / "blank.csv"
        path.write_text("")
        return path, "empty"
    if case == "nan":
        path = tmp_path / "holes.npy"
        A = _data()
        A[3, 4] = np.nan
        np.save(path, A)
        return path, "NaN"
    if case == "nan-csv":
        path = tmp_path / "holes.csv"
        path.write_text("1,2\n3,nan\n")
        return path, "NaN"
    if case == "complex":
        path = tmp_path / "waves.npy"
        np.save(path, _data() + 1j)
        return path, "complex"
    if case == "complex-mtx":
        path = tmp_path / "waves.mtx"
        scipy.io.mmwrite(str(path), sp.coo_matrix(np.eye(3) * (1 + 1j)))
        return path, "complex"
    if case == "wrong-shape":
        path = tmp_path / "line.npy"
        np.save(path, np.arange(5.0))
        return path, "2-d"
    if case == "many-arrays":
        path = tmp_path / "two.npz"
        np.savez(path, A=_data(), B=_data())
        return path, "expected one array"
    if case == "ragged-csv":
        path = tmp_path / "ragged.csv"
        path.write_text("1,2,3\n4,5\n")
        return path, "fields"
    if case == "text-csv":
        path = tmp_path / "words.csv"
        path.write_text("a,b\n1,2\n3,x\n")
        return path, "not a real number"
    if case == "suffix":
        path = tmp_path / "matrix.txt"
        path.write_text("1 2\n3 4\n")
        return path, "unknown suffix"
    raise AssertionError(case)


BAD = (
    "missing",
    "corrupt",
    "truncated",
    "pickle",
    "pickle-npz",
    "directory",
    "empty",
    "empty-csv",
    "nan",
    "nan-csv",
    "complex",
    "complex-mtx",
    "wrong-shape",
    "many-arrays",
    "ragged-csv",
    "text-csv",
    "decimal-comma-csv",
    "space-csv",
    "suffix",
)


@pytest.mark.parametrize("case", BAD)
@pytest.mark.parametrize("kind", ["data", "matrix", "points"])
def test_bad_file_is_refused_naming_the_file_and_the_problem(tmp_path, case, kind):
    path, why = _write_bad(tmp_path, case)
    with pytest.raises(DatasetError, match=why) as info:
        problem_from_file(path, kind=kind)
    message = str(info.value)
    assert str(path) in message
    assert f"problem {path.name.split('.')[0]!r}" in message


def test_reader_returns_checked_float64(tmp_path):
    path = tmp_path / "ints.csv"
    path.write_text("1,2\n3,4\n")
    A = read_user_matrix(path, problem="p")
    assert A.dtype == np.float64 and A.flags.c_contiguous
    np.testing.assert_array_equal(A, [[1, 2], [3, 4]])


@pytest.mark.parametrize("delimiter", [";", "\t"])
@pytest.mark.parametrize("header", [False, True])
def test_semicolon_and_tab_separated_csv_is_read(tmp_path, delimiter, header):
    """Issue 33: line 1 of "1;2;3" silently became a header, and the error named line 2."""
    path = tmp_path / "table.csv"
    lines = ([delimiter.join(["a", "b", "c"])] if header else []) + [
        delimiter.join(["1", "2", "3.5"]),
        delimiter.join(["4", "-5e-3", "6"]),
    ]
    path.write_text("\n".join(lines) + "\n")
    A = read_user_matrix(path, problem="p")
    np.testing.assert_array_equal(A, [[1, 2, 3.5], [4, -5e-3, 6]])


def test_three_point_files_are_refused(tmp_path):
    for name in "xyz":
        np.save(tmp_path / f"{name}.npy", _points(0))
    with pytest.raises(DatasetError, match=r"problem 'x': --points takes one or two files"):
        problem_from_file([tmp_path / f"{n}.npy" for n in "xyz"], kind="points")


def test_points_of_different_dimensions_are_refused(tmp_path):
    np.save(tmp_path / "x.npy", _points(0, d=3))
    np.save(tmp_path / "z.npy", _points(1, d=4))
    with pytest.raises(DatasetError, match=r"problem 'x'.*x\.npy.*z\.npy.*3 and 4 features"):
        problem_from_file([tmp_path / "x.npy", tmp_path / "z.npy"], kind="points")
    with pytest.raises(ValueError, match="same number of features"):
        problem_from_points(_points(0, d=3), _points(1, d=4), name="p")


# ----------------------------------------------------------------------------- the flags


def _parser():
    p = argparse.ArgumentParser()
    p.add_argument("--dataset", nargs="+", default=[])
    p.add_argument("--kernel", default="sne")
    p.add_argument("--center", action=argparse.BooleanOptionalAction, default=True)
    add_problem_arguments(p)
    return p


def test_flags_are_repeatable_and_mixable(tmp_path):
    np.save(tmp_path / "a.npy", _data(0))
    np.save(tmp_path / "b.npy", _data(1, (30, 30)))
    np.save(tmp_path / "x.npy", _points(0))
    np.save(tmp_path / "z.npy", _points(1, n=50))
    np.save(tmp_path / "g.npy", _data(2, (25, 20)))
    args = _parser().parse_args(
        [
            "--dataset",
            "cora",
            "--data",
            str(tmp_path / "a.npy"),
            "--data",
            str(tmp_path / "b.npy"),
            "--points",
            str(tmp_path / "x.npy"),
            str(tmp_path / "z.npy"),
            "--points",
            str(tmp_path / "z.npy"),
            "--matrix",
            str(tmp_path / "g.npy"),
            "--memory-limit",
            "1",
        ]
    )
    got = problems_from_args(args)
    assert [p.name for p in got] == ["a", "b", "x", "z", "g"]
    assert [p.shape for p in got] == [(40, 40), (30, 30), (60, 50), (50, 50), (25, 20)]
    assert got[2].points is not None and got[2].params["center"] is False
    assert got[0].params["center"] is True


def test_bad_file_stops_everything_before_any_kernel_is_built(tmp_path, monkeypatch):
    np.save(tmp_path / "good.npy", _data(0))
    bad, _ = _write_bad(tmp_path, "nan")
    built = []
    monkeypatch.setattr(
        problems_module, "problem_from_data", lambda *a, **k: built.append(k["name"])
    )
    args = _parser().parse_args(["--data", str(tmp_path / "good.npy"), "--matrix", str(bad)])
    with pytest.raises(DatasetError, match="holes"):
        problems_from_args(args)
    assert built == []


@pytest.mark.parametrize(
    ("kind", "files", "shape"),
    [
        ("--data", [(30, 8)], "30x8"),
        ("--points", [(12, 3), (40, 3)], "12x40"),
        ("--matrix", [(25, 20)], "25x20"),
    ],
)
def test_a_rank_larger_than_the_matrix_is_refused_before_the_kernel_is_built(
    tmp_path, monkeypatch, capsys, kind, files, shape
):
    """Issue 33: ``compare --rank`` above min(N, M) of a user's G took 12 s to refuse."""
    from ksvd_bench.cli import main

    def no_kernel(*args, **kwargs):
        raise AssertionError("a kernel was built before --rank was checked")

    for builder in ("problem_from_data", "problem_from_points", "_given_matrix"):
        monkeypatch.setattr(problems_module, builder, no_kernel)
    paths = []
    for i, size in enumerate(files):
        paths.append(str(tmp_path / f"p{i}.npy"))
        np.save(paths[-1], _data(i, size))
    with pytest.raises(SystemExit) as info:
        main(["compare", kind, *paths, "--rank", "21", "--out", str(tmp_path / "out")])
    assert info.value.code == 2
    first = capsys.readouterr().err.splitlines()[0]
    n = min(int(v) for v in shape.split("x"))
    assert f"--rank must be at most min(N, M) = {n} of its kernel matrix ({shape})" in first


def test_two_problems_with_one_name_are_refused(tmp_path):
    (tmp_path / "d").mkdir()
    np.save(tmp_path / "a.npy", _data(0))
    np.save(tmp_path / "d" / "a.npy", _data(1))
    args = _parser().parse_args(
        ["--data", str(tmp_path / "a.npy"), "--matrix", str(tmp_path / "d" / "a.npy")]
    )
    with pytest.raises(DatasetError, match="two problems are named 'a'"):
        problems_from_args(args)


# ----------------------------------------------------------------------------- the command


def test_compare_races_a_lazy_points_file_with_every_method_named(tmp_path):
    """``compare --points``: a lazy problem (over --memory-limit), rpcholesky included, rows
    that say their reference is block Krylov."""
    import json

    from ksvd_bench.cli import main

    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(c, 0.05, size=(25, 3)) for c in range(4)])
    np.save(tmp_path / "clusters.npy", X)
    out = tmp_path / "out"
    assert (
        main(
            [
                "compare",
                "--points",
                str(tmp_path / "clusters.npy"),
                "--memory-limit",
                "1e-6",
                "--rank",
                "4",
                "--methods",
                "rsvd",
                "asym_nystrom_rpcholesky",
                "--seeds",
                "1",
                "--eps",
                "0.1",
                "--measures",
                "uniform",
                "--no-residual",
                "--gamma",
                "1.0",
                "--out",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    record = json.loads((out / "compare.json").read_text())
    rows = record["rows"]
    assert {r["dataset"] for r in rows} == {"clusters"}  # no cora beside it
    assert {r["method"] for r in rows} == {"rsvd", "asym_nystrom_rpcholesky"}
    # issue 33: a point-set G is uncentred, and the record says so (it said center True)
    assert record["meta"]["center"] is False
    assert record["meta"]["problems"]["clusters"]["center"] is False
    assert record["meta"]["problems"]["clusters"]["gamma"] == 1.0
    assert record["meta"]["ignored_flags"] == {}
    assert all(r["stop"] == "reference" for r in rows)  # rpcholesky ran: not n/a
    assert all("block Krylov" in r["note"] for r in rows)
    assert all(r["converged"] for r in rows)


def test_flags_a_matrix_problem_does_not_use_are_recorded_as_ignored(tmp_path, capsys):
    """Issue 33: ``--kernel`` and ``--gamma`` with ``--matrix`` changed nothing, yet the record
    kept ``kernel rbf`` and ``center True`` as if applied."""
    import json

    from ksvd_bench.cli import main

    np.save(tmp_path / "gram.npy", _data(2, (30, 20)))
    out = tmp_path / "out"
    argv = ["compare", "--matrix", str(tmp_path / "gram.npy"), "--kernel", "rbf", "--gam", "2"]
    argv += ["--rank", "2", "--methods", "tsvd", "--seeds", "1", "--eps", "0.1"]
    argv += ["--measures", "uniform", "--no-residual", "--out", str(out), "--no-progress"]
    assert main(argv) == 0
    meta = json.loads((out / "compare.json").read_text())["meta"]
    assert sorted(meta["ignored_flags"]) == ["--gamma", "--kernel"]
    assert "--data" in meta["ignored_flags"]["--gamma"]
    assert meta["kernel"] is None and meta["center"] is False
    assert meta["problems"]["gram"] == {
        "source": str(tmp_path / "gram.npy"),
        "kernel": None,
        "gamma": None,
        "center": False,
    }
    err = capsys.readouterr().err
    assert "ksvd-bench compare: ignored --kernel: applies to" in err


def test_compare_refuses_a_bad_file_with_a_usage_error(tmp_path, capsys):
    from ksvd_bench.cli import main

    path, _ = _write_bad(tmp_path, "complex")
    with pytest.raises(SystemExit) as info:
        main(["compare", "--data", str(path), "--out", str(tmp_path / "out"), "--no-progress"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "problem 'waves'" in err and str(path) in err and "complex" in err
