"""Safe reading of the bundled data files.

Every reader here refuses pickles (``allow_pickle=False``), reads the whole file eagerly so that
truncation or a bad checksum surfaces at load time, and checks the keys, dtypes and shapes it
returns. Any problem raises :class:`DatasetError` naming the file and what is wrong.

:func:`read_user_matrix` reads a user's own matrix (``compare --data/--points/--matrix``):
``.npy``, ``.npz`` (one array, or a sparse matrix saved by ``scipy.sparse.save_npz``),
MatrixMarket ``.mtx`` and ``.csv`` (comma, semicolon or tab separated), with the same
refusals (missing, a directory, corrupt, pickled, empty, not 2-d, complex, not numbers,
NaN/Inf, a sparse matrix with broken index arrays), each naming the file and the problem it
was meant for.
"""

from __future__ import annotations

import csv
import gzip
import io
import math
import os
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..kernels.sparse_structure import (
    compressed_index_problems,
    coordinate_index_problems,
    sparse_structure_problems,
)

__all__ = [
    "DATA_DIR",
    "DatasetError",
    "USER_FORMATS",
    "data_path",
    "read_csv_gz",
    "read_npz",
    "read_sparse_npz",
    "read_user_matrix",
]

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
    problems = compressed_index_problems(indptr, indices, data.size, n_rows, n_cols, exact=True)
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


#: the arrays ``scipy.sparse.save_npz`` writes for the compressed and the coordinate formats
_COMPRESSED_KEYS = ("format", "shape", "data", "indices", "indptr")
_COORDINATE_KEYS = ("format", "shape", "data", "row", "col")
_COMPRESSED = {"csr": sp.csr_matrix, "csc": sp.csc_matrix, "bsr": sp.bsr_matrix}


def _user_npz(path):
    """The one array of an ``.npz``, or the sparse matrix ``scipy.sparse.save_npz`` wrote."""
    with np.load(path, allow_pickle=False) as archive:
        names = list(archive.files)
        for keys in (_COMPRESSED_KEYS, _COORDINATE_KEYS):
            if set(keys) <= set(names):
                return _sparse_from_arrays({key: archive[key] for key in keys})
        if len(names) != 1:
            raise DatasetError(
                f"holds {len(names)} arrays {sorted(names)}; expected one array "
                f"or a scipy sparse matrix (scipy.sparse.save_npz)"
            )
        return archive[names[0]]


def _refuse_malformed(fmt, problems):
    if problems:
        raise DatasetError(f"holds a malformed {fmt.upper()} sparse matrix: {'; '.join(problems)}")


def _sparse_from_arrays(arrays):
    """The sparse matrix of ``scipy.sparse.save_npz``'s arrays, its index structure checked.

    ``scipy.sparse.load_npz`` checks only lengths: a column index out of range or a decreasing
    ``indptr`` passes and later makes compiled code read or write outside the arrays (a crash).
    Entries that ``indptr`` leaves out are refused too, rather than silently dropped.
    """
    fmt = arrays["format"]
    fmt = fmt.item() if fmt.ndim == 0 and fmt.dtype.kind in "US" else None
    if isinstance(fmt, bytes):
        fmt = fmt.decode("ascii", errors="replace")
    compressed = "indptr" in arrays
    if fmt not in (_COMPRESSED if compressed else ("coo",)):
        expected = "csr, csc or bsr" if compressed else "coo"
        raise DatasetError(
            f"holds a sparse matrix of format {fmt!r} with the arrays "
            f"{sorted(arrays)}; expected {expected}"
        )
    shape, data = arrays["shape"], arrays["data"]
    if shape.shape != (2,) or shape.dtype.kind not in "iu" or np.any(shape < 0):
        raise DatasetError(f"holds a sparse matrix of invalid shape {shape.tolist()}")
    if data.dtype.kind not in "biufc":
        raise DatasetError(f"does not hold numbers (dtype {data.dtype})")
    shape = tuple(int(v) for v in shape)
    if fmt == "coo":
        problems = (
            [f"data should be 1-d, got shape {data.shape}"]
            if data.ndim != 1
            else coordinate_index_problems(arrays["row"], arrays["col"], data.size, shape)
        )
    elif fmt == "bsr":
        blocks = data.shape[1:] if data.ndim == 3 else (0, 0)
        if 0 in blocks or shape[0] % blocks[0] or shape[1] % blocks[1]:
            problems = [f"blocks of data shape {data.shape} do not tile the shape {shape}"]
        else:
            problems = compressed_index_problems(
                arrays["indptr"],
                arrays["indices"],
                data.shape[0],
                shape[0] // blocks[0],
                shape[1] // blocks[1],
                exact=True,
                major="block row",
                minor="block column",
            )
    else:
        n_major, n_minor = shape if fmt == "csr" else shape[::-1]
        names = ("row", "column") if fmt == "csr" else ("column", "row")
        problems = (
            [f"data should be 1-d, got shape {data.shape}"]
            if data.ndim != 1
            else compressed_index_problems(
                arrays["indptr"],
                arrays["indices"],
                data.size,
                n_major,
                n_minor,
                exact=True,
                major=names[0],
                minor=names[1],
            )
        )
    _refuse_malformed(fmt, problems)
    if fmt == "coo":
        return sp.coo_matrix((data, (arrays["row"], arrays["col"])), shape=shape)
    return _COMPRESSED[fmt]((data, arrays["indices"], arrays["indptr"]), shape=shape)


def _parses(cell):
    try:
        float(cell)
    except ValueError:
        return False
    return True


#: what separates the cells of a ``.csv`` file, and its name in the messages
_DELIMITERS = {",": "comma", ";": "semicolon", "\t": "tab"}


def _delimiter(text):
    """The separator of a table: a semicolon or a tab where its first line has one and no
    comma (a semicolon also where commas are decimal marks, as some locales write), else a
    comma. A number never holds a semicolon or a tab, so neither is taken by mistake."""
    first = next((line for line in text.splitlines() if line.strip()), "")
    if ";" in first:
        return ";"
    return "\t" if "\t" in first and "," not in first else ","


def _looks_numeric(cell):
    """A number, or what a person meant as numbers (a decimal comma, numbers separated by
    spaces): such a first line is data to refuse with its reason, never a header to drop."""
    parts = cell.replace(",", ".").split()
    return bool(parts) and all(_parses(part) for part in parts)


def _not_a_number(line, column, cell, delimiter):
    """The error for a cell that is not a number, with the likely cause where one shows."""
    hint = ""
    if "," in cell and _parses(cell.replace(",", ".")):
        hint = " (a decimal comma: write numbers with a decimal point)"
    elif len(cell.split()) > 1 and all(_parses(part) for part in cell.split()):
        hint = " (numbers separated by spaces: separate cells by commas, semicolons or tabs)"
    else:
        other = [name for d, name in _DELIMITERS.items() if d != delimiter and d in cell]
        if other:
            hint = (
                f" (the cells are {_DELIMITERS[delimiter]}-separated; this one holds a {other[0]})"
            )
    return DatasetError(f"line {line}, column {column}: {cell!r} is not a real number{hint}")


def _user_csv(path):
    """A numeric table; a first line none of whose cells is a number is a header.

    Cells are separated by commas, semicolons or tabs (:func:`_delimiter`). A first line
    that mixes numbers and other cells is refused: it is neither a header nor a data row,
    and taking it for a header would silently drop a row. A UTF-8 byte-order mark (as Excel
    writes) is skipped.
    """
    rows = []  # (line number in the file, stripped cells)
    with open(path, encoding="utf-8-sig", newline="") as handle:
        text = handle.read()
    delimiter = _delimiter(text)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    for record in reader:
        if record and any(cell.strip() for cell in record):
            rows.append((reader.line_num, [cell.strip() for cell in record]))
    if rows and not any(_looks_numeric(cell) for cell in rows[0][1]):
        rows = rows[1:]  # a header line
    if not rows:
        return np.empty((0, 0))
    first_line, first = rows[0]
    width = len(first)
    out = np.empty((len(rows), width), dtype=np.float64)
    for i, (line, record) in enumerate(rows):
        if len(record) != width:
            raise DatasetError(
                f"line {line} has {len(record)} fields, line {first_line} (the "
                f"first data row) has {width}"
            )
        for j, cell in enumerate(record):
            try:
                out[i, j] = float(cell)
            except ValueError:
                raise _not_a_number(line, j + 1, cell, delimiter) from None
    return out


def _read_any(path):
    suffix = path.suffix.lower()
    if suffix == ".npy":
        return np.load(path, allow_pickle=False)
    if suffix == ".npz":
        return _user_npz(path)
    if suffix == ".mtx":
        # start-up: scipy.io loads every reader it has (MATLAB, NetCDF, ...); .mtx only
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


def _unreadable(prefix, path, exc):
    return DatasetError(
        f"{prefix} is not a readable {path.suffix} file (corrupt or "
        f"truncated?): {type(exc).__name__}: {exc}"
    )


def read_user_matrix(path, *, problem, what="a matrix"):
    """Read and check a user's matrix file: dense float64 array or float64 CSR matrix.

    Parameters
    ----------
    path : str or os.PathLike
        ``.npy``, ``.npz`` (one array, or a sparse matrix from ``scipy.sparse.save_npz``),
        ``.mtx`` (MatrixMarket, through ``scipy.io.mmread``) or ``.csv`` (numbers separated
        by commas, semicolons or tabs; a first line none of whose cells is a number is a
        header; UTF-8, a byte-order mark allowed).
    problem : str
        Name of the problem the file is for (named in every error).
    what : str, default="a matrix"
        What the file should hold, for the messages (e.g. ``"the data matrix A"``).

    Returns
    -------
    numpy.ndarray or scipy.sparse.csr_matrix
        2-d, float64, at least one row and one column, every value finite. Dense input stays
        dense (C-contiguous), sparse input stays sparse (canonical: sorted indices,
        duplicate entries summed).

    Raises
    ------
    DatasetError
        The file is missing or a directory, has an unknown suffix, cannot be read (corrupt,
        truncated), holds pickled data (refused as such), is empty, is not 2-d, holds
        complex numbers, non-numbers, NaN or Inf, or a sparse matrix whose index arrays are
        broken (indices out of range, a decreasing or short ``indptr``). The message names
        the file and the problem.
    """
    path = Path(path)
    prefix = f"problem {problem!r}: file {str(path)!r}"
    if path.is_dir():
        raise DatasetError(f"{prefix} is a directory; give the file of the matrix")
    if not path.is_file():
        raise DatasetError(f"{prefix} is missing (no such file)")
    if path.suffix.lower() not in USER_FORMATS:
        raise DatasetError(
            f"{prefix} has the unknown suffix {path.suffix!r}; expected one of "
            f"{', '.join(USER_FORMATS)}"
        )
    try:
        matrix = _read_any(path)
        if sp.issparse(matrix):
            # every sparse path (.npz, .mtx) ends in a checked CSR structure: compiled code
            # downstream trusts its indices
            _refuse_malformed(matrix.format, sparse_structure_problems(matrix))
            matrix = sp.csr_matrix(matrix)
            _check_user_values(matrix.data, what)
        else:
            matrix = np.asarray(matrix)
            _check_user_values(matrix, what)
    except DatasetError as exc:
        raise DatasetError(f"{prefix}: {exc}") from None
    except ValueError as exc:
        # numpy's refusal of an object array or a pickle (both need allow_pickle=True)
        if "allow_pickle" not in str(exc):
            raise _unreadable(prefix, path, exc) from exc
        raise DatasetError(
            f"{prefix} holds pickled data (an object array, or a pickle): pickled arrays "
            f"are refused, since loading one can run code; save {what} as a numeric array "
            f"(numpy.save of a float array)"
        ) from None
    except _READ_ERRORS as exc:
        raise _unreadable(prefix, path, exc) from exc
    if matrix.ndim != 2:
        raise DatasetError(f"{prefix} holds an array of shape {matrix.shape}; {what} must be 2-d")
    if 0 in matrix.shape:
        raise DatasetError(f"{prefix} is empty (shape {matrix.shape[0]}x{matrix.shape[1]})")
    if sp.issparse(matrix):
        matrix = matrix.astype(np.float64)
        matrix.sum_duplicates()  # canonical, as scipy reads duplicates: summed, indices sorted
        return matrix
    return np.ascontiguousarray(matrix, dtype=np.float64)
