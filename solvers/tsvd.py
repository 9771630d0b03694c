"""Truncated SVD by a Krylov eigensolver: :func:`scipy.sparse.linalg.svds` behind the common API."""

from __future__ import annotations

import time

import numpy as np
from scipy.sparse.linalg import LinearOperator, svds

from ._result import SVDResult, finish
from ._source import DenseSource, SparseSource
from ._validation import Tracked, check_args

__all__ = ["tsvd"]


def _float64_operator(checked):
    """A float64 LinearOperator over the source, counting products in a fresh tracker.

    ARPACK in single precision converges poorly and to a looser tolerance, so the solve runs in
    float64. Concrete float32 inputs are converted once (not at every product); lazy float32
    sources are fed float32 blocks and their products are upcast.
    """
    src = checked.source
    base = src.source
    if isinstance(base, DenseSource) and base.dtype != np.float64:
        base = DenseSource(base.G.astype(np.float64))
    elif isinstance(base, SparseSource) and base.dtype != np.float64:
        base = SparseSource(base.csr.astype(np.float64))
    tracker = Tracked(base, src.check_finite)
    in_dtype = np.dtype(base.dtype)
    N, M = tracker.shape

    def matmat(X):
        return np.asarray(tracker.matmat(np.asarray(X, dtype=in_dtype)), dtype=np.float64)

    def rmatmat(Y):
        return np.asarray(tracker.rmatmat(np.asarray(Y, dtype=in_dtype)), dtype=np.float64)

    op = LinearOperator(
        (N, M),
        matvec=lambda x: matmat(x.reshape(M, 1)).ravel(),
        rmatvec=lambda y: rmatmat(y.reshape(N, 1)).ravel(),
        matmat=matmat,
        rmatmat=rmatmat,
        dtype=np.float64,
    )
    return op, tracker


def tsvd(G, rank, *, random_state=None, backend="arpack", tol=0.0, maxiter=None, ncv=None):
    """Top singular triplets by :func:`scipy.sparse.linalg.svds`.

    Parameters
    ----------
    G : ndarray, sparse matrix, LinearOperator or matrix source of shape (N, M)
        Only ``matmat``/``rmatmat`` are used.
    rank : int
        Number of triplets; ``rank < min(N, M)`` for ``"arpack"`` and ``"lobpcg"``.
    random_state : None, int or numpy.random.Generator, default=None
        Seeds the start vector (ARPACK) or block (LOBPCG, PROPACK), so runs repeat exactly.
    backend : {"arpack", "propack", "lobpcg"}, default="arpack"
        The ``solver`` of ``svds``.
    tol : float, default=0.0
        Convergence tolerance passed to ``svds`` (0 means machine precision).
    maxiter : int or None, default=None
        Iteration cap passed to ``svds``.
    ncv : int or None, default=None
        Lanczos basis size (ARPACK only), ``rank < ncv < min(N, M)``;
        None uses ARPACK's ``min(max(2 * rank + 1, 20), min(N, M))``.

    Returns
    -------
    SVDResult
        ``info["effort"]`` is the Lanczos basis size ``ncv`` for ARPACK and the number of
        products with ``G`` or ``G.T`` for the other backends; ``info["backend"]``,
        ``info["tol"]`` and ``info["ncv"]`` are added.

    Notes
    -----
    ``svds`` works on the Gram operator ``G.T @ G`` (or ``G @ G.T``, the smaller one), so
    each iteration costs one product with ``G`` and one with ``G.T``. The solve runs in
    float64 whatever the input (ARPACK in single precision stalls); float32 input gives a
    float32 result cast at the end. ``svds`` returns values in ascending order; they are
    reordered descending here.

    Examples
    --------
    >>> import numpy as np
    >>> from solvers import tsvd
    >>> G = np.random.default_rng(0).standard_normal((60, 40))
    >>> res = tsvd(G, 3, random_state=0)
    >>> np.allclose(res.s, np.linalg.svd(G, compute_uv=False)[:3])
    True
    """
    t0 = time.perf_counter()
    chk = check_args(
        "tsvd", G, rank, random_state, backend=backend, tol=tol, maxiter=maxiter, ncv=ncv
    )
    opts, rank = chk.options, chk.rank
    op, tracker = _float64_operator(chk)
    kmin = min(op.shape)
    kwargs = {"k": rank, "tol": opts["tol"], "maxiter": opts["maxiter"], "rng": chk.rng}
    if opts["backend"] == "arpack":
        kwargs["ncv"] = opts["ncv"]
        kwargs["v0"] = chk.rng.standard_normal(kmin)
    U, s, Vt = svds(op, solver=opts["backend"], **kwargs)
    if opts["backend"] == "arpack":
        # eigsh's default basis size when ncv is None.
        effort = opts["ncv"] if opts["ncv"] is not None else min(max(2 * rank + 1, 20), kmin)
    else:
        effort = tracker.n_matvec
    result: SVDResult = finish(
        U,
        s,
        Vt.T,
        method="tsvd",
        effort=effort,
        tracker=tracker,
        t0=t0,
        dtype=chk.dtype,
        backend=opts["backend"],
        tol=opts["tol"],
        ncv=effort if opts["backend"] == "arpack" else None,
    )
    return result
