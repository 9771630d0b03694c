"""Top-r singular triplets of a matrix, by six interchangeable solvers behind one interface.

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
vectors) or any matrix source (see :mod:`solvers._source`). ``G`` must be real: complex
input raises ``ValueError`` (see :func:`svd`).

Error estimates without a reference (:func:`frobenius_gap`, :func:`leave_one_out_error`,
:func:`krylov_leave_one_out_error`, :func:`probe_error`, :func:`truncation_error`) are
public too; ``rsvd`` and ``block_krylov`` put their own, made from their sketch, in
``info["error_estimate"]``.

Every answer reports its cost in ``info["n_passes"]``, whole passes over ``G``: a product
with ``G`` or ``G.T`` (any width) or a two-sided ``sketch`` counts 1, and entries read by
the Nyström methods count ``entries / (N * M)``.
"""

from __future__ import annotations

from ._estimate import (
    GAP_RTOL,
    GAP_RTOL_FLOAT32,
    N_PROBES,
    PROBE_SAFETY,
    frobenius_gap,
    krylov_leave_one_out_error,
    leave_one_out_error,
    probe_error,
    probe_failure_probability,
    probe_fro2_lower,
    sketch_error_estimate,
    truncation_error,
)
from ._records import Certificate
from ._result import SolveInfo, SVDResult, fix_signs
from ._source import (
    DenseSource,
    MatrixSource,
    OperatorSource,
    SparseSource,
    as_source,
    check_index,
    frobenius_of,
    source_to_dense,
)
from .generalized_nystrom import generalized_nystrom
from .krylov import block_krylov
from .nystrom import asym_nystrom, sym_nystrom
from .registry import (
    METHODS,
    OPTIONS,
    SOLVERS,
    SolverSpec,
    check_method_options,
    options_summary,
)
from .rsvd import randomized_range_finder, rsvd
from .tsvd import tsvd
from .validation import check_choice, check_int, check_random_state

__all__ = [
    "METHODS",
    "OPTIONS",
    "SOLVERS",
    "SolverSpec",
    "SVDResult",
    "SolveInfo",
    "Certificate",
    "svd",
    "tsvd",
    "rsvd",
    "block_krylov",
    "generalized_nystrom",
    "sym_nystrom",
    "asym_nystrom",
    "randomized_range_finder",
    "as_source",
    "source_to_dense",
    "MatrixSource",
    "DenseSource",
    "SparseSource",
    "OperatorSource",
    "check_random_state",
    "check_choice",
    "check_int",
    "fix_signs",
    "check_index",
    "frobenius_of",
    # error estimates without a reference (issue 15 §2)
    "GAP_RTOL",
    "GAP_RTOL_FLOAT32",
    "N_PROBES",
    "PROBE_SAFETY",
    "frobenius_gap",
    "leave_one_out_error",
    "krylov_leave_one_out_error",
    "probe_error",
    "probe_failure_probability",
    "probe_fro2_lower",
    "sketch_error_estimate",
    "truncation_error",
]


def svd(G, rank, *, method, random_state=None, **options) -> SVDResult:
    """Top ``rank`` singular triplets of ``G`` by the chosen method.

    Parameters
    ----------
    G : ndarray, sparse matrix, LinearOperator or matrix source of shape (N, M)
        Real entries (bool, integer or floating dtype; computed in float64, or float32 for
        float32 input). Complex G is not supported: it raises ``ValueError`` rather than
        being reduced to its real part. For the SVD of a complex ``G`` use the real matrix
        ``[[G.real, -G.imag], [G.imag, G.real]]``, whose singular values are those of G,
        each twice, or :func:`scipy.sparse.linalg.svds`.
    rank : int
        Number of triplets, ``1 <= rank <= min(N, M)`` (and further limits per method).
    method : {%(methods)s}
        See %(functions)s.
    random_state : None, int or numpy.random.Generator, default=None
        Turned into a Generator once; the same seed gives the same answer.
    **options
        Options of the chosen method, with their defaults (``solvers.SOLVERS[method]``
        declares each solver; see the method's own page for what an option does):

        %(options)s

    Returns
    -------
    SVDResult
        ``U`` (N x rank), ``s`` (rank,) descending, ``V`` (M x rank) and ``info``
        (``method``, ``effort``, ``n_matvec``, ``n_block_entries``, ``n_products``,
        ``n_passes``, ``seconds``, ``reliable`` and method-specific keys, ``entries_read``
        for the Nyström methods; see :class:`SVDResult`). ``info["reliable"]`` is what
        ``solvers.SOLVERS[method].certifies`` says: False always comes with a
        ``RuntimeWarning``, and None means unknown (nothing was proved), never right.

    Raises
    ------
    ValueError
        Unknown method, out-of-range rank or sizes, non-finite entries, unknown choices,
        complex ``G``, a masked array with masked entries, or a matrix source whose
        products or blocks come back with the wrong shape.
    TypeError
        An option that the method does not take (the message names the method it belongs
        to), a missing required option, an argument of the wrong type (``tol=[]``,
        ``rank=2.0``, ...), or a ``G`` that does not hold numbers (object or string dtype).

    Notes
    -----
    Cost in passes over G (``info["n_passes"]``) for a rank-r call:

    %(costs)s

    Norm sampling adds one pass (the squared norms are a function of every entry, whether
    the source computes them or streams its rows). ``info["entries_read"]`` of the Nyström
    methods is ``n_passes * N * M``.
    """
    method = check_method_options(method, options)  # names are case-insensitive
    return SOLVERS[method].function(G, rank, random_state=random_state, **options)


svd.__doc__ = svd.__doc__ % {
    "methods": ", ".join(f'"{name}"' for name in SOLVERS),
    "functions": ", ".join(f":func:`{name}`" for name in SOLVERS),
    "options": options_summary(indent=" " * 8),
    "costs": "\n    ".join(f"* {name}: {spec.cost}" for name, spec in SOLVERS.items()),
}
