"""Top-r singular triplets of a matrix, by four interchangeable solvers behind one interface.

>>> import numpy as np
>>> import solvers
>>> G = np.random.default_rng(0).standard_normal((50, 30))
>>> res = solvers.svd(G, 3, method="rsvd", random_state=0, n_oversamples=27)
>>> np.allclose(res.s, np.linalg.svd(G, compute_uv=False)[:3])
True

The package is pure numerics and never imports ``ksvd_bench``: a solver does not know where
``G`` came from. ``G`` may be a numpy array, a scipy sparse matrix, a
:class:`~scipy.sparse.linalg.LinearOperator` (``tsvd`` and ``rsvd`` only use products; the
Nyström methods read rows/columns, which a LinearOperator answers with products with unit
vectors) or any matrix source (see :mod:`solvers._source`).
"""

from __future__ import annotations

from ._result import SVDResult
from ._source import (
    DenseSource,
    MatrixSource,
    OperatorSource,
    SparseSource,
    as_source,
    source_to_dense,
)
from ._validation import METHODS, OPTIONS, check_method_options
from .nystrom import asym_nystrom, sym_nystrom
from .rsvd import randomized_range_finder, rsvd
from .tsvd import tsvd

__all__ = [
    "METHODS",
    "OPTIONS",
    "SVDResult",
    "svd",
    "tsvd",
    "rsvd",
    "sym_nystrom",
    "asym_nystrom",
    "randomized_range_finder",
    "as_source",
    "source_to_dense",
    "MatrixSource",
    "DenseSource",
    "SparseSource",
    "OperatorSource",
]

_FUNCTIONS = {
    "tsvd": tsvd,
    "rsvd": rsvd,
    "sym_nystrom": sym_nystrom,
    "asym_nystrom": asym_nystrom,
}


def svd(G, rank, *, method, random_state=None, **options) -> SVDResult:
    """Top ``rank`` singular triplets of ``G`` by the chosen method.

    Parameters
    ----------
    G : ndarray, sparse matrix, LinearOperator or matrix source of shape (N, M)
    rank : int
        Number of triplets, ``1 <= rank <= min(N, M)`` (and further limits per method).
    method : {"tsvd", "rsvd", "sym_nystrom", "asym_nystrom"}
        See :func:`tsvd`, :func:`rsvd`, :func:`sym_nystrom`, :func:`asym_nystrom`.
    random_state : None, int or numpy.random.Generator, default=None
        Turned into a Generator once; the same seed gives the same answer.
    **options
        Options of the chosen method (``solvers.OPTIONS[method]`` lists them):
        tsvd: ``backend``, ``tol``, ``maxiter``, ``ncv``;
        rsvd: ``n_oversamples``, ``n_iter``, ``power_iteration_normalizer``;
        sym_nystrom: ``n_samples`` (required), ``sampling``, ``orthogonalize``, ``core``;
        asym_nystrom: ``n_samples`` (required unless ``col_indices``), ``n_rows``,
        ``sampling``, ``row_indices``, ``col_indices``, ``orthogonalize``, ``core``.

    Returns
    -------
    SVDResult
        ``U`` (N x rank), ``s`` (rank,) descending, ``V`` (M x rank) and ``info``.

    Raises
    ------
    ValueError
        Unknown method, out-of-range rank or sizes, non-finite entries, unknown choices.
    TypeError
        An option that the method does not take (the message names the method it belongs
        to), a missing required option, or an argument of the wrong type.
    """
    check_method_options(method, options)
    return _FUNCTIONS[method](G, rank, random_state=random_state, **options)
