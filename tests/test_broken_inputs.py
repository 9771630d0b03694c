"""A user's broken files and sparse matrices are refused before any compiled code runs.

A sparse matrix whose index arrays point outside its shape (or whose ``indptr`` decreases)
passes ``scipy.sparse.load_npz`` and scipy's cheap format check, and then makes scipy's format
conversions or the Numba kernels read and write outside the arrays: a segmentation fault, not
an error. A CSV whose first data row had one bad cell lost that row as a "header".
"""

import numpy as np
import pytest
import scipy.sparse as sp

from ksvd_bench.cli import main
from ksvd_bench.datasets import DatasetError
from ksvd_bench.datasets._files import read_user_matrix
from ksvd_bench.kernels import kernel_source, paper_gamma
from ksvd_bench.kernels.matrix import check_data
from ksvd_bench.kernels.sparse_structure import sparse_structure_problems
from ksvd_bench.race.problems import problem_from_file


def _csr_arrays(n=6):
    """The arrays of a valid n x n CSR matrix with two entries per row."""
    indptr = np.arange(0, 2 * n + 1, 2)
    indices = np.column_stack([np.arange(n), (np.arange(n) + 1) % n]).ravel()
    indices = np.sort(indices.reshape(n, 2), axis=1).ravel()
    data = np.arange(1.0, 2 * n + 1)
    return data, indices, indptr


def _save(path, fmt, shape, **arrays):
    np.savez(path, format=np.array(fmt.encode()), shape=np.array(shape), **arrays)
    return path


# (name, fmt, array changes, phrase that names the defect)
BAD_FILES = [
    ("column-too-large", "csr", {"indices": (3, 10**6)}, r"column indices outside \[0, 6\)"),
    ("column-negative", "csr", {"indices": (0, -1)}, r"column indices outside .*smallest -1"),
    ("indptr-decreasing", "csr", {"indptr": (2, 1)}, "indptr decreases"),
    ("indptr-not-from-0", "csr", {"indptr": (0, 1)}, "indptr starts at 1"),
    ("indptr-short-end", "csr", {"indptr": (6, 10)}, "indptr ends at 10, but 12 entries"),
    ("indptr-beyond-end", "csr", {"indptr": (6, 14)}, "indptr ends at 14, but 12 entries"),
    ("row-too-large-csc", "csc", {"indices": (5, 6)}, r"row indices outside \[0, 6\)"),
]


@pytest.mark.parametrize(
    ("name", "fmt", "change", "defect"), BAD_FILES, ids=[case[0] for case in BAD_FILES]
)
def test_sparse_file_with_broken_indices_is_refused(tmp_path, name, fmt, change, defect):
    data, indices, indptr = _csr_arrays()
    arrays = {"data": data, "indices": indices.copy(), "indptr": indptr.copy()}
    ((key, (where, value)),) = change.items()
    arrays[key][where] = value
    path = _save(tmp_path / f"{name}.npz", fmt, [6, 6], **arrays)
    with pytest.raises(DatasetError, match=defect) as info:
        read_user_matrix(path, problem="mine")
    message = str(info.value)
    assert str(path) in message and "problem 'mine'" in message
    assert f"malformed {fmt.upper()} sparse matrix" in message


def test_other_broken_sparse_files_are_refused(tmp_path):
    data, indices, indptr = _csr_arrays()
    cases = [
        (
            _save(
                tmp_path / "short-indptr.npz",
                "csr",
                [6, 6],
                data=data,
                indices=indices,
                indptr=indptr[:-1],
            ),
            "indptr has length 6, expected 7",
        ),
        (
            _save(
                tmp_path / "float-indices.npz",
                "csr",
                [6, 6],
                data=data,
                indices=indices.astype(float),
                indptr=indptr,
            ),
            "indices should be a 1-d integer",
        ),
        (
            _save(
                tmp_path / "lengths.npz",
                "csr",
                [6, 6],
                data=data[:-1],
                indices=indices,
                indptr=indptr,
            ),
            r"indices \(12\) and data \(11\) differ",
        ),
        (
            _save(
                tmp_path / "coo.npz",
                "coo",
                [3, 3],
                data=np.ones(2),
                row=np.array([0, 7]),
                col=np.array([0, 1]),
            ),
            r"COO sparse matrix: row indices outside \[0, 3\)",
        ),
        (
            _save(
                tmp_path / "coo-neg.npz",
                "coo",
                [3, 3],
                data=np.ones(2),
                row=np.array([0, 1]),
                col=np.array([-2, 1]),
            ),
            r"col indices outside .*smallest -2",
        ),
        (
            _save(
                tmp_path / "bsr.npz",
                "bsr",
                [4, 4],
                data=np.ones((2, 2, 2)),
                indices=np.array([0, 5]),
                indptr=np.array([0, 1, 2]),
            ),
            r"BSR sparse matrix: block column indices outside \[0, 2\)",
        ),
        (
            _save(
                tmp_path / "bsr-tiles.npz",
                "bsr",
                [5, 4],
                data=np.ones((2, 2, 2)),
                indices=np.array([0, 1]),
                indptr=np.array([0, 1, 2]),
            ),
            "do not tile",
        ),
        (
            _save(tmp_path / "dia.npz", "dia", [6, 6], data=data, indices=indices, indptr=indptr),
            "format 'dia'",
        ),
        (
            _save(
                tmp_path / "shape.npz", "csr", [6, -6], data=data, indices=indices, indptr=indptr
            ),
            "invalid shape",
        ),
    ]
    for path, defect in cases:
        with pytest.raises(DatasetError, match=defect) as info:
            read_user_matrix(path, problem="mine")
        assert str(path) in str(info.value)


@pytest.mark.parametrize("fmt", ["csr", "csc", "bsr", "coo"])
def test_sound_sparse_files_of_every_format_read_as_canonical_csr(tmp_path, fmt):
    rng = np.random.default_rng(1)
    A = rng.normal(size=(6, 8)) * (rng.random((6, 8)) < 0.4)
    path = tmp_path / f"ok-{fmt}.npz"
    sp.save_npz(
        path, sp.csr_matrix(A).asformat(fmt) if fmt != "bsr" else sp.bsr_matrix(A, blocksize=(2, 2))
    )
    M = read_user_matrix(path, problem="p")
    assert sp.isspmatrix_csr(M) and M.dtype == np.float64 and M.has_canonical_format
    np.testing.assert_array_equal(M.toarray(), A)


def test_duplicates_and_unsorted_indices_are_summed_as_scipy_reads_them(tmp_path):
    # row 0: entries (0, 2) twice and (0, 0) after it; row 1: (1, 1)
    data, indices, indptr = (
        np.array([1.0, 2.0, 4.0, 8.0]),
        np.array([2, 2, 0, 1]),
        np.array([0, 3, 4]),
    )
    path = _save(tmp_path / "dups.npz", "csr", [2, 3], data=data, indices=indices, indptr=indptr)
    M = read_user_matrix(path, problem="p")
    assert M.has_canonical_format and M.nnz == 3
    np.testing.assert_array_equal(M.toarray(), [[4.0, 0.0, 3.0], [0.0, 8.0, 0.0]])
    coo = _save(
        tmp_path / "dups-coo.npz", "coo", [2, 3], data=data, row=np.array([0, 0, 0, 1]), col=indices
    )
    np.testing.assert_array_equal(read_user_matrix(coo, problem="p").toarray(), M.toarray())


def test_problem_from_file_and_cli_refuse_a_broken_sparse_file(tmp_path, capsys):
    data, indices, indptr = _csr_arrays()
    indices[0] = 10**6
    path = _save(
        tmp_path / "bad_indices.npz", "csr", [6, 6], data=data, indices=indices, indptr=indptr
    )
    with pytest.raises(DatasetError, match="column indices outside"):
        problem_from_file(path, kind="data")
    with pytest.raises(SystemExit) as exc:
        main(
            [
                "compare",
                "--data",
                str(path),
                "--rank",
                "2",
                "--out",
                str(tmp_path / "out"),
                "--no-progress",
            ]
        )
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert str(path) in err and "column indices outside [0, 6)" in err


# ------------------------------------------------------------- in-memory sparse matrices


def _broken_matrices():
    data, indices, indptr = _csr_arrays()
    out = {}
    X = sp.csr_matrix((data, indices, indptr), shape=(6, 6))
    X.indices[3] = 10**6
    out["csr-column"] = (X, r"CSR sparse matrix: column indices outside \[0, 6\)")
    X = sp.csr_matrix((data, indices, indptr), shape=(6, 6))
    X.indptr[2] = 1
    out["csr-indptr"] = (X, "indptr decreases")
    X = sp.csc_matrix((data, indices, indptr), shape=(6, 6))
    X.indices[0] = -3
    out["csc-row"] = (X, r"CSC sparse matrix: row indices outside .*smallest -3")
    X = sp.coo_matrix(np.eye(4))
    X.row[1] = 9
    out["coo-row"] = (X, r"COO sparse matrix: row indices outside \[0, 4\)")
    X = sp.bsr_matrix(np.eye(4), blocksize=(2, 2))
    X.indices[0] = 7
    out["bsr-block"] = (X, "BSR sparse matrix: block column indices outside")
    X = sp.lil_matrix(np.eye(4))
    X.rows[1] = [7]  # LIL builds its CSR in Python: caught on the CSR made from it
    out["lil-column"] = (X, r"CSR sparse matrix: column indices outside \[0, 4\)")
    X = sp.csr_array((data, indices, indptr), shape=(6, 6))
    X.indices[1] = 6
    out["csr-array"] = (X, r"column indices outside \[0, 6\)")
    return out


BROKEN = _broken_matrices()


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_check_data_refuses_a_broken_sparse_matrix(case):
    X, defect = BROKEN[case]
    with pytest.raises(ValueError, match=f"X is a malformed .*{defect}"):
        check_data(X, "X")
    with pytest.raises(ValueError, match=defect):
        kernel_source(X, "sne", gamma=1.0)
    with pytest.raises(ValueError, match=defect):
        paper_gamma(X)


def test_check_data_keeps_a_sound_csr_without_copying():
    data, indices, indptr = _csr_arrays()
    X = sp.csr_matrix((data, indices, indptr), shape=(6, 6))
    assert sparse_structure_problems(X) == []
    out = check_data(X, "X")
    assert np.shares_memory(out.data, X.data) and np.shares_memory(out.indices, X.indices)


def test_check_data_ignores_entries_past_indptr_as_scipy_does():
    # scipy allows stored arrays longer than indptr[-1] (check_format prunes them): not a defect
    data, indices, indptr = _csr_arrays()
    X = sp.csr_matrix((data, indices, indptr), shape=(6, 6))
    X.indptr = indptr.copy()
    X.indptr[-1] = 10
    assert sparse_structure_problems(X) == []
    out = check_data(X, "X")
    expected = sp.csr_matrix((data[:10], indices[:10], X.indptr), shape=(6, 6)).toarray()
    np.testing.assert_array_equal(out.toarray(), expected)


# ------------------------------------------------------------------------------ CSV files


@pytest.mark.parametrize(
    ("text", "cell"), [("1,abc,3\n4,5,6\n7,8,9\n", "'abc'"), ("1,,3\n4,5,6\n7,8,9\n", "''")]
)
def test_csv_first_line_mixing_numbers_and_text_is_refused(tmp_path, text, cell):
    path = tmp_path / "mixed.csv"
    path.write_text(text)
    with pytest.raises(
        DatasetError, match=f"line 1, column 2: {cell} is not a real number"
    ) as info:
        read_user_matrix(path, problem="mine")
    assert str(path) in str(info.value)


@pytest.mark.parametrize("header", ["", "a,b,c\n", ",b,c\n"])
def test_csv_with_excel_byte_order_mark_keeps_every_row(tmp_path, header):
    path = tmp_path / "excel.csv"
    path.write_text(header + "1,2,3\n4,5,6\n7,8,9\n", encoding="utf-8-sig")
    assert path.read_bytes().startswith(b"\xef\xbb\xbf")
    A = read_user_matrix(path, problem="p")
    np.testing.assert_array_equal(A, [[1, 2, 3], [4, 5, 6], [7, 8, 9]])


def test_csv_errors_name_the_line_of_the_file(tmp_path):
    path = tmp_path / "gaps.csv"
    path.write_text("x,y\n\n1,2\n3,oops\n")
    with pytest.raises(DatasetError, match="line 4, column 2: 'oops' is not a real number"):
        read_user_matrix(path, problem="p")
    path.write_text("x,y\n1,2\n\n3\n")
    with pytest.raises(
        DatasetError,
        match=r"line 4 has 1 fields, line 2 \(the first data row\)"
        r" has 2",
    ):
        read_user_matrix(path, problem="p")
