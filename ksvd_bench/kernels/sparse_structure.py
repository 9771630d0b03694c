"""Checks of a sparse matrix's index arrays, made before compiled code reads through them.

scipy's format conversions and the Numba kernels trust the indices: an index out of range
there is a crash (a segmentation fault), not an error. :func:`checked_csr` is the door every
user sparse matrix passes; :func:`compressed_index_problems` and
:func:`coordinate_index_problems` also check the raw arrays of a file before a matrix is built.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

__all__ = [
    "checked_csr",
    "check_sparse_structure",
    "compressed_index_problems",
    "coordinate_index_problems",
    "sparse_structure_problems",
]


def compressed_index_problems(
    indptr, indices, n_stored, n_major, n_minor, *, exact=False, major="row", minor="column"
):
    """What is wrong with the index arrays of a compressed (CSR/CSC/BSR) matrix, as phrases.

    Reads the arrays once (O(nnz + n_major)) and never writes or copies them.

    Parameters
    ----------
    indptr, indices : numpy.ndarray
        The index pointer (one entry per ``major`` line, plus one) and the ``minor`` indices.
    n_stored : int
        Number of stored entries (blocks, for BSR): the length of the data array.
    n_major, n_minor : int
        Number of ``major`` lines (rows of CSR) and the range ``[0, n_minor)`` of the indices.
    exact : bool, default=False
        Require ``indptr[-1] == n_stored`` (a file must not hold entries that its index pointer
        leaves out); otherwise, as scipy allows, the entries after ``indptr[-1]`` are unused.
    major, minor : str
        Names of the compressed and the indexed dimension, for the messages.

    Returns
    -------
    list of str
        Empty when the structure is sound.
    """
    problems = []
    for label, array in (("indptr", indptr), ("indices", indices)):
        if array.ndim != 1 or array.dtype.kind not in "iu":
            problems.append(
                f"{label} should be a 1-d integer array, got dtype {array.dtype} "
                f"with shape {array.shape}"
            )
    if problems:
        return problems
    if indptr.size != n_major + 1:
        return [
            f"indptr has length {indptr.size}, expected {n_major + 1} (one more than the "
            f"number of {major}s)"
        ]
    if indices.size != n_stored:
        problems.append(f"indices ({indices.size}) and data ({n_stored}) differ in length")
    if indptr[0] != 0:
        problems.append(f"indptr starts at {int(indptr[0])}, expected 0")
    steps = np.flatnonzero(indptr[1:] < indptr[:-1])
    if steps.size:
        problems.append(
            f"indptr decreases ({steps.size} {major}(s) of negative length, the "
            f"first is {major} {int(steps[0])})"
        )
    end = int(indptr[-1])
    if end > indices.size or (exact and end != indices.size):
        problems.append(f"indptr ends at {end}, but {indices.size} entries are stored")
    outside = _out_of_range(minor, indices[: max(0, min(end, indices.size))], n_minor)
    return problems + ([outside] if outside else [])


def _out_of_range(what, indices, size):
    """The phrase for ``indices`` (named ``what``) outside ``[0, size)``, or None."""
    if not indices.size:
        return None
    low, high = int(indices.min()), int(indices.max())
    if low < 0 or high >= size:
        return f"{what} indices outside [0, {size}) (smallest {low}, largest {high})"
    return None


def coordinate_index_problems(row, col, n_stored, shape):
    """What is wrong with the index arrays of a COO matrix of ``shape``, as phrases."""
    problems = []
    for label, array, size in (("row", row, shape[0]), ("col", col, shape[1])):
        if array.ndim != 1 or array.dtype.kind not in "iu":
            problems.append(
                f"{label} indices should be a 1-d integer array, got dtype "
                f"{array.dtype} with shape {array.shape}"
            )
        elif array.size != n_stored:
            problems.append(
                f"{label} indices ({array.size}) and data ({n_stored}) differ in length"
            )
        elif outside := _out_of_range(label, array, size):
            problems.append(outside)
    return problems


def sparse_structure_problems(X):
    """What is wrong with the index structure of the scipy sparse matrix ``X``, as phrases.

    Checks the formats whose conversion to CSR runs compiled code over the index arrays (CSR,
    CSC, BSR, COO) with scipy's own rules (``check_format(full_check=True)`` without its
    in-place pruning and casting); LIL, DOK and DIA build index arrays in Python and numpy, so
    check the CSR matrix made from them. O(nnz), without copies.

    Returns
    -------
    list of str
        Empty when the structure is sound.
    """
    fmt = X.format
    n_rows, n_cols = X.shape
    if fmt in ("csr", "csc"):
        n_major, n_minor = (n_rows, n_cols) if fmt == "csr" else (n_cols, n_rows)
        names = ("row", "column") if fmt == "csr" else ("column", "row")
        if X.data.ndim != 1:
            return [f"data should be 1-d, got shape {X.data.shape}"]
        return compressed_index_problems(
            X.indptr, X.indices, X.data.shape[0], n_major, n_minor, major=names[0], minor=names[1]
        )
    if fmt == "bsr":
        block_rows, block_cols = X.blocksize
        if X.data.ndim != 3 or n_rows % block_rows or n_cols % block_cols:
            return [f"blocks of data shape {X.data.shape} do not tile the shape {X.shape}"]
        return compressed_index_problems(
            X.indptr,
            X.indices,
            X.data.shape[0],
            n_rows // block_rows,
            n_cols // block_cols,
            major="block row",
            minor="block column",
        )
    if fmt == "coo":
        if X.data.ndim != 1:
            return [f"data should be 1-d, got shape {X.data.shape}"]
        return coordinate_index_problems(X.row, X.col, X.data.shape[0], X.shape)
    return []


def check_sparse_structure(X, name):
    """Raise ValueError naming ``name`` and the defects if ``X`` has a broken index structure."""
    problems = sparse_structure_problems(X)
    if problems:
        raise ValueError(
            f"{name} is a malformed {X.format.upper()} sparse matrix: {'; '.join(problems)}"
        )


def checked_csr(X, name):
    """The sparse matrix ``X`` as CSR (no copy if it is CSR), its index structure checked.

    Checked before the conversion (scipy's compiled conversions trust the indices) and, for
    another format, on the CSR made from it. Raises ValueError naming ``name`` and the defects.
    """
    check_sparse_structure(X, name)
    converted = X.format != "csr"
    X = sp.csr_matrix(X)
    if converted:
        check_sparse_structure(X, name)
    return X
