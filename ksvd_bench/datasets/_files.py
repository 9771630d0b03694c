"""Safe reading of the bundled data files.

Every reader here refuses pickles (``allow_pickle=False``), reads the whole file eagerly so that
truncation or a bad checksum surfaces at load time, and checks the keys, dtypes and shapes it
returns. Any problem raises :class:`DatasetError` naming the file and what is wrong.

:func:`read_user_matrix` reads a user's own matrix (``compare --data/--points/--matrix``):
``.npy``, ``.npz`` (one array, or a sparse matrix saved by ``scipy.sparse.save_npz``),
MatrixMarket ``.mtx`` and ``.csv``, with the same refusals (missing, corrupt, empty, not 2-d,
complex, not numbers, NaN/Inf), each naming the file and the problem it was meant for.
"""

from __future__ import annotations

import csv
import gzip
import math
import os
from pathlib import Path

import numpy as np
import scipy.sparse as sp

__all__ = ["DATA_DIR", "DatasetError", "USER_FORMATS", "data_path", "read_csv_gz", "read_npz",
           "read_sparse_npz", "read_user_matrix"]

#: directory of the files shipped with the package (see ``data/PROVENANCE.md``)
DATA_DIR = Path(__file__).resolve().parent / "data"

# Reading a damaged archive can fail almost anywhere (zip directory, CRC, npy header parsing,
# decompression, decoding); every such failure means the file is unusable, so all of them are
# reported as DatasetError naming the file.
_READ_ERRORS = (Exception,)


class DatasetError(ValueError):
    """A bundled (or user-supplied) dataset file is missing, unreadable or malformed."""


def data_path(filename, data_home=None):
    """Return the path of ``filename`` in ``data_home`` (default: the bundled data directory).

    Parameters
    ----------
    filename : str
        File name, e.g. ``"cora.npz"``.
    data_home : str or os.PathLike, optional
        Directory to read from instead of the package's ``data/`` directory.

    Raises
    ------
    DatasetError
        If the file does not exist.
    """
    if data_home is None:
        directory = DATA_DIR
    else:
        if not isinstance(data_home, (str, os.PathLike)):
            raise TypeError(
                f"data_home must be a path (str or os.PathLike) or None, "
                f"got {type(data_home).__name__}"
            )
        directory = Path(data_home)
    path = directory / filename
    if not path.is_file():
        raise DatasetError(f"dataset file {str(path)!r} is missing")
    return path


def _kind_ok(array, kind):
    if kind == "int":
        return np.issubdtype(array.dtype, np.integer)
    if kind == "float":
        return np.issubdtype(array.dtype, np.floating)
    if kind == "number":
        return np.issubdtype(array.dtype, np.number) and not np.issubdtype(
            array.dtype, np.complexfloating
        )
    if kind == "bool":
        return array.dtype == np.bool_
    if kind == "str":
        return array.dtype.kind in "US"
    raise AssertionError(f"unknown dtype kind {kind!r}")  # programming error, not user input


def read_npz(path, spec):
    """Read the arrays named in ``spec`` from an ``.npz`` file, without pickle.

    Parameters
    ----------
    path : pathlib.Path
        The file.
    spec : dict
        ``key -> (kind, ndim)`` with kind one of ``"int"``, ``"float"``, ``"number"``,
        ``"bool"``, ``"str"``. Keys absent from ``spec`` are ignored; every key in ``spec``
        must be present with that kind and number of dimensions.

    Returns
    -------
    dict of numpy.ndarray
    """
    try:
        with np.load(path, allow_pickle=False) as archive:
            present = set(archive.files)
            missing = [key for key in spec if key not in present]
            if missing:
                raise DatasetError(
                    f"dataset file {str(path)!r} lacks the array(s) {missing}; "
                    f"it holds {sorted(present)}"
                )
            arrays = {key: archive[key] for key in spec}
    except DatasetError:
        raise
    except _READ_ERRORS as exc:
        raise DatasetError(
            f"dataset file {str(path)!r} is not a readable .npz archive without pickle "
            f"(corrupt or truncated?): {type(exc).__name__}: {exc}"
        ) from exc
    for key, (kind, ndim) in spec.items():
        array = arrays[key]
        if array.ndim != ndim or not _kind_ok(array, kind):
            raise DatasetError(
                f"dataset file {str(path)!r}: array {key!r} should be a {ndim}-d {kind} array, "
                f"got dtype {array.dtype} with shape {array.shape}"
            )
    return arrays


def read_sparse_npz(path):
    """Read a CSR matrix saved by ``scipy.sparse.save_npz``, without pickle, checking it.

    Returns
    -------
    scipy.sparse.csr_matrix
        float64 CSR matrix with sorted indices and finite values.
    """
    arrays = read_npz(
        path,
        {
            "format": ("str", 0),
            "shape": ("int", 1),
            "data": ("number", 1),
            "indices": ("int", 1),
            "indptr": ("int", 1),
        },
    )
    fmt = arrays["format"].item()
    if isinstance(fmt, bytes):
        fmt = fmt.decode("ascii", errors="replace")
    if fmt != "csr":
        raise DatasetError(f"dataset file {str(path)!r}: expected a CSR matrix, got format {fmt!r}")
    shape = arrays["shape"]
    if shape.shape != (2,) or np.any(shape < 0):
        raise DatasetError(f"dataset file {str(path)!r}: invalid matrix shape {shape.tolist()}")
    n_rows, n_cols = (int(v) for v in shape)
    data, indices, indptr = arrays["data"], arrays["indices"], arrays["indptr"]
    problems = []
    if indptr.shape != (n_rows + 1,):
        problems.append(f"indptr has length {indptr.size}, expected {n_rows + 1}")
    elif indptr[0] != 0 or np.any(np.diff(indptr) < 0) or indptr[-1] != data.size:
        problems.append("indptr is not a non-decreasing sequence from 0 to nnz")
    if indices.shape != data.shape:
        problems.append(f"indices ({indices.size}) and data ({data.size}) differ in length")
    elif indices.size and (indices.min() < 0 or indices.max() >= n_cols):
        problems.append(f"column indices outside [0, {n_cols})")
    if not problems and not np.all(np.isfinite(data)):
        problems.append("non-finite values")
    if problems:
        raise DatasetError(
            f"dataset file {str(path)!r}: malformed CSR matrix: {'; '.join(problems)}"
        )
    matrix = sp.csr_matrix(
        (data.astype(np.float64), indices.astype(np.int32), indptr.astype(np.int32)),
        shape=(n_rows, n_cols),
    )
    matrix.sort_indices()
    return matrix


def read_csv_gz(path, columns):
    """Read a gzipped CSV with a header into a float64 array; empty fields become NaN.

    Parameters
    ----------
    path : pathlib.Path
        The ``.csv.gz`` file.
    columns : tuple of str
        The expected header, in order.

    Returns
    -------
    numpy.ndarray
        float64 array of shape ``(n_rows, len(columns))``; NaN marks an empty field (the only
        way a missing value is written in the bundled files).

    Raises
    ------
    DatasetError
        Bad gzip stream, wrong header, wrong number of fields on a line, a cell that is not a
        finite number, or no data rows.
    """
    rows = []
    try:
        with gzip.open(path, "rt", encoding="utf-8", newline="") as handle:
            reader = csv.reader(handle)
            header = next(reader, None)
            if header is None:
                raise DatasetError(f"dataset file {str(path)!r} is empty")
            header = [name.strip() for name in header]
            if tuple(header) != tuple(columns):
                raise DatasetError(
                    f"dataset file {str(path)!r}: header has {len(header)} columns {header}, "
                    f"expected {len(columns)} columns {list(columns)}"
                )
            for record in reader:
                if not record:  # blank line (e.g. a trailing newline pair)
                    continue
                if len(record) != len(columns):
                    raise DatasetError(
                        f"dataset file {str(path)!r}, line {reader.line_num}: "
                        f"{len(record)} fields, expected {len(columns)}"
                    )
                rows.append((reader.line_num, record))
    except DatasetError:
        raise
    except _READ_ERRORS as exc:
        raise DatasetError(
            f"dataset file {str(path)!r} is not a readable gzipped CSV "
            f"(corrupt or truncated?): {type(exc).__name__}: {exc}"
        ) from exc
    if not rows:
        raise DatasetError(f"dataset file {str(path)!r} has a header but no data rows")
    out = np.empty((len(rows), len(columns)), dtype=np.float64)
    for i, (line, record) in enumerate(rows):
        for j, cell in enumerate(record):
            cell = cell.strip()
            if cell == "":
                out[i, j] = np.nan
                continue
            try:
                value = float(cell)
            except ValueError:
                value = math.nan
                ok = False
            else:
                ok = math.isfinite(value)
            if not ok:
                raise DatasetError(
                    f"dataset file {str(path)!r}, line {line}, column {columns[j]!r}: "
                    f"{cell!r} is not a finite number"
                )
            out[i, j] = value
    return out


# ---------------------------------------------------------------------------------------------
# a user's own matrix
# ---------------------------------------------------------------------------------------------

#: file suffixes :func:`read_user_matrix` reads
USER_FORMATS = (".npy", ".npz", ".mtx", ".csv")


def _user_npz(path):
    """The one array of an ``.npz``, or the sparse matrix ``scipy.sparse.save_npz`` wrote."""
    with np.load(path, allow_pickle=False) as archive:
        names = list(archive.files)
        if {"format", "shape", "data", "indices", "indptr"} <= set(names) or (
                {"format", "shape", "row", "col", "data"} <= set(names)):
            return sp.load_npz(path)  # allow_pickle=False inside
        if len(names) != 1:
            raise DatasetError(f"holds {len(names)} arrays {sorted(names)}; expected one array "
                               f"or a scipy sparse matrix (scipy.sparse.save_npz)")
        return archive[names[0]]


def _user_csv(path):
    """A numeric table; a first line that is not numbers is taken as a header."""
    rows = []
    with open(path, encoding="utf-8", newline="") as handle:
        for record in csv.reader(handle):
            if record and any(cell.strip() for cell in record):
                rows.append((len(rows), [cell.strip() for cell in record]))
    if rows:
        try:
            [float(c) for c in rows[0][1]]
        except ValueError:
            rows = rows[1:]  # a header line
    if not rows:
        return np.empty((0, 0))
    width = len(rows[0][1])
    out = np.empty((len(rows), width), dtype=np.float64)
    for i, (_, record) in enumerate(rows):
        if len(record) != width:
            raise DatasetError(f"data row {i + 1} has {len(record)} fields, the first has {width}")
        for j, cell in enumerate(record):
            try:
                out[i, j] = float(cell)
            except ValueError:
                raise DatasetError(f"data row {i + 1}, column {j + 1}: {cell!r} is not a real "
                                   f"number") from None
    return out


def _read_any(path):
    suffix = path.suffix.lower()
    if suffix == ".npy":
        return np.load(path, allow_pickle=False)
    if suffix == ".npz":
        return _user_npz(path)
    if suffix == ".mtx":
        import scipy.io

        return scipy.io.mmread(str(path))
    return _user_csv(path)


def _check_user_values(values, what):
    """Refuse what is not real finite numbers (``values``: a dense array or sparse data)."""
    dtype = values.dtype
    if np.issubdtype(dtype, np.complexfloating):
        raise DatasetError(f"holds complex numbers (dtype {dtype}); {what} must be real")
    if not (np.issubdtype(dtype, np.number) or dtype == np.bool_):
        raise DatasetError(f"does not hold numbers (dtype {dtype})")
    if np.issubdtype(dtype, np.floating):
        bad = int(values.size - np.count_nonzero(np.isfinite(values)))
        if bad:
            raise DatasetError(f"holds {bad} NaN or infinite value(s); {what} must be finite")


def read_user_matrix(path, *, problem, what="a matrix"):
    """Read and check a user's matrix file: dense float64 array or float64 CSR matrix.

    Parameters
    ----------
    path : str or os.PathLike
        ``.npy``, ``.npz`` (one array, or a sparse matrix from ``scipy.sparse.save_npz``),
        ``.mtx`` (MatrixMarket, through ``scipy.io.mmread``) or ``.csv`` (numbers; a first
        line that is not numbers is a header).
    problem : str
        Name of the problem the file is for (named in every error).
    what : str, default="a matrix"
        What the file should hold, for the messages (e.g. ``"the data matrix A"``).

    Returns
    -------
    numpy.ndarray or scipy.sparse.csr_matrix
        2-d, float64, at least one row and one column, every value finite. Dense input stays
        dense (C-contiguous), sparse input stays sparse (sorted indices).

    Raises
    ------
    DatasetError
        The file is missing, has an unknown suffix, cannot be read (corrupt, truncated, a
        pickle), is empty, is not 2-d, holds complex numbers, non-numbers, NaN or Inf. The
        message names the file and the problem.
    """
    path = Path(path)
    prefix = f"problem {problem!r}: file {str(path)!r}"
    if not path.is_file():
        raise DatasetError(f"{prefix} is missing (no such file)")
    if path.suffix.lower() not in USER_FORMATS:
        raise DatasetError(f"{prefix} has the unknown suffix {path.suffix!r}; expected one of "
                           f"{', '.join(USER_FORMATS)}")
    try:
        matrix = _read_any(path)
        if sp.issparse(matrix):
            matrix = sp.csr_matrix(matrix)
            _check_user_values(matrix.data, what)
        else:
            matrix = np.asarray(matrix)
            _check_user_values(matrix, what)
    except DatasetError as exc:
        raise DatasetError(f"{prefix}: {exc}") from None
    except _READ_ERRORS as exc:
        raise DatasetError(f"{prefix} is not a readable {path.suffix} file (corrupt or "
                           f"truncated?): {type(exc).__name__}: {exc}") from exc
    if matrix.ndim != 2:
        raise DatasetError(f"{prefix} holds an array of shape {matrix.shape}; {what} must be "
                           f"2-d")
    if 0 in matrix.shape:
        raise DatasetError(f"{prefix} is empty (shape {matrix.shape[0]}x{matrix.shape[1]})")
    if sp.issparse(matrix):
        matrix = matrix.astype(np.float64)
        matrix.sort_indices()
        return matrix
    return np.ascontiguousarray(matrix, dtype=np.float64)
