"""Randomized SVD (Halko, Martinsson & Tropp 2011) using only products with G and G.T."""

from __future__ import annotations

import time

import numpy as np
from scipy import linalg

from ._result import SVDResult, finish
from ._source import as_source
from ._validation import NORMALIZERS, _check_choice, _check_int, check_args, check_random_state

__all__ = ["rsvd", "randomized_range_finder"]


class _Transposed:
    """``G.T`` as a source with ``matmat``/``rmatmat`` only (the range finder needs no more)."""

    def __init__(self, source):
        self.source = source
        self.shape = source.shape[::-1]
        self.dtype = source.dtype

    def matmat(self, X):
        return self.source.rmatmat(X)

    def rmatmat(self, Y):
        return self.source.matmat(Y)


def _orient(src, rank, n_oversamples):
    """``(work, width, transposed)``: ``G`` or, when it is wide (``N < M``), ``G.T``.

    A wide matrix is handled through its transpose (as scikit-learn does), so the random
    test vectors and the basis built from them live in the smaller dimension; ``width`` is
    the sketch width ``min(rank + n_oversamples, min(N, M))``. :func:`_finish_oriented`
    turns triplets of ``work`` back into triplets of ``G``.
    """
    N, M = src.shape
    transposed = N < M
    work = _Transposed(src) if transposed else src
    return work, min(rank + n_oversamples, min(N, M)), transposed


def _finish_oriented(U, s, V, *, transposed, **finish_args):
    """:func:`finish` for triplets ``(U, s, V)`` of the ``work`` matrix from :func:`_orient`.

    Swaps ``U`` and ``V`` back when ``work`` was ``G.T``; ``info["transposed"]`` records it.
    """
    if transposed:
        U, V = V, U
    return finish(U, s, V, **finish_args, transposed=transposed)


def permuted_lu_factor(Y):
    """``P @ L`` of the partial-pivoting LU ``Y = P L U`` of a tall ``Y`` (n x k, n >= k).

    The same matrix as ``scipy.linalg.lu(Y, permute_l=True)[0]``, bit for bit, but built in
    place from LAPACK's ``getrf`` output, where ``lu`` forms L and the permutation as
    separate arrays and multiplies them out: it costs what ``lu_factor`` does, 2.6x less
    than ``lu`` on a 1e6 x 40 float64 block at one BLAS thread
    (``benchmarks/scripts/bench_pass_efficient.py``). Entries of L are at most 1 in
    magnitude and its pivot rows form a unit triangle, so the result is a
    well-conditioned basis of ``range(Y)``: cheaper than QR between power iterations.
    """
    k = Y.shape[1]
    getrf = linalg.get_lapack_funcs("getrf", (Y,))
    L, piv, info = getrf(Y)  # a Fortran-ordered copy; Y itself is untouched
    if info < 0:  # pragma: no cover - only for an illegal argument to LAPACK
        raise ValueError(f"LAPACK getrf failed with info={info}")
    top = L[:k]
    top[np.triu_indices(k, 1)] = 0  # U lives in the upper triangle of the top k x k block
    top[np.diag_indices(k)] = 1
    # getrf swapped row i with row piv[i] for i = 0, 1, ...: P L undoes them in reverse.
    for i in range(k - 1, -1, -1):
        j = piv[i]
        if j != i:
            L[[i, j]] = L[[j, i]]
    return L


def _normalize(Y, normalizer):
    if normalizer == "LU":
        return permuted_lu_factor(Y)
    if normalizer == "QR":
        return linalg.qr(Y, mode="economic", check_finite=False)[0]
    return Y


def _range_finder(source, size, n_iter, normalizer, rng, dtype):
    """Orthonormal Q (N x size) with range(Q) ~ range(G): Algorithm 4.4 of Halko et al."""
    Q = rng.standard_normal((source.shape[1], size), dtype=dtype)
    for _ in range(n_iter):
        Q = _normalize(np.asarray(source.matmat(Q), dtype=dtype), normalizer)
        Q = _normalize(np.asarray(source.rmatmat(Q), dtype=dtype), normalizer)
    Y = np.asarray(source.matmat(Q), dtype=dtype)
    return linalg.qr(Y, mode="economic", check_finite=False)[0]


def randomized_range_finder(
    G, size, n_iter, *, power_iteration_normalizer="auto", random_state=None
):
    """Orthonormal basis of an approximate range of ``G`` (Halko et al., Algorithm 4.4).

    Parameters
    ----------
    G : ndarray, sparse matrix, LinearOperator or matrix source of shape (N, M)
        Only ``matmat``/``rmatmat`` are used.
    size : int
        Number of random test vectors, ``1 <= size <= M``.
    n_iter : int
        Number of power iterations (each one product with ``G`` and one with ``G.T``).
    power_iteration_normalizer : {"auto", "QR", "LU", "none"}, default="auto"
        Re-normalisation between power iterations; ``"auto"`` is ``"none"`` for
        ``n_iter <= 2`` and ``"LU"`` otherwise (as scikit-learn).
    random_state : None, int or numpy.random.Generator, default=None

    Returns
    -------
    Q : ndarray of shape (N, min(size, N))
        Orthonormal columns; float32 for float32 ``G``, float64 otherwise.
    """
    src = as_source(G)
    size = _check_int("size", size, 1, src.shape[1], high_text=f"M = {src.shape[1]}")
    n_iter = _check_int("n_iter", n_iter, 0)
    norm = _check_choice("power_iteration_normalizer", power_iteration_normalizer, NORMALIZERS)
    if norm == "auto":
        norm = "none" if n_iter <= 2 else "LU"
    rng = check_random_state(random_state)
    dtype = np.float32 if np.dtype(src.dtype) == np.float32 else np.float64
    return _range_finder(src, size, n_iter, norm, rng, dtype)


def rsvd(
    G,
    rank,
    *,
    random_state=None,
    n_oversamples=10,
    n_iter=4,
    power_iteration_normalizer="auto",
):
    """Randomized SVD of Halko, Martinsson & Tropp with power iterations.

    Parameters
    ----------
    G : ndarray, sparse matrix, LinearOperator or matrix source of shape (N, M)
        Only ``matmat``/``rmatmat`` are used, so lazy sources (kernels never formed) work.
    rank : int
        Number of triplets, ``1 <= rank <= min(N, M)``.
    random_state : None, int or numpy.random.Generator, default=None
        Seeds the Gaussian test matrix.
    n_oversamples : int, default=10
        Extra random vectors; the sketch has ``min(rank + n_oversamples, min(N, M))`` columns.
    n_iter : int or "auto", default=4
        Power iterations; ``"auto"`` is 7 when ``rank < 0.1 * min(N, M)`` and 4 otherwise
        (scikit-learn's rule).
    power_iteration_normalizer : {"auto", "QR", "LU", "none"}, default="auto"
        See :func:`randomized_range_finder`.

    Returns
    -------
    SVDResult
        ``info["effort"]`` is ``n_oversamples``; ``info`` also has ``n_iter``,
        ``power_iteration_normalizer``, ``n_random`` (sketch width) and ``transposed``.

    Notes
    -----
    Cost: ``(2 * n_iter + 2) * n_random`` products with ``G`` or ``G.T`` plus
    ``O((N + M) n_random^2)`` dense work. Like scikit-learn, a wide matrix (N < M) is handled
    through its transpose, so the sketch always lives in the smaller dimension. Float32
    input is computed and returned in float32. Agrees with
    :func:`sklearn.utils.extmath.randomized_svd` (same algorithm; random draws differ).

    References
    ----------
    N. Halko, P.-G. Martinsson, J. A. Tropp, "Finding structure with randomness: probabilistic
    algorithms for constructing approximate matrix decompositions", SIAM Review 53(2), 2011.

    Examples
    --------
    >>> import numpy as np
    >>> from solvers import rsvd
    >>> rng = np.random.default_rng(0)
    >>> G = rng.standard_normal((80, 5)) @ rng.standard_normal((5, 60))
    >>> res = rsvd(G, 5, random_state=0)
    >>> np.allclose(res.s, np.linalg.svd(G, compute_uv=False)[:5])
    True
    """
    t0 = time.perf_counter()
    chk = check_args(
        "rsvd",
        G,
        rank,
        random_state,
        n_oversamples=n_oversamples,
        n_iter=n_iter,
        power_iteration_normalizer=power_iteration_normalizer,
    )
    opts, rank, src, dtype = chk.options, chk.rank, chk.source, chk.dtype
    work, size, transposed = _orient(src, rank, opts["n_oversamples"])
    Q = _range_finder(
        work, size, opts["n_iter"], opts["power_iteration_normalizer"], chk.rng, dtype
    )
    B = np.asarray(work.rmatmat(Q), dtype=dtype).T
    Uh, s, Vt = linalg.svd(B, full_matrices=False, check_finite=False, lapack_driver="gesdd")
    U = Q @ Uh[:, :rank]
    V = Vt[:rank].T
    result: SVDResult = _finish_oriented(
        U,
        s[:rank],
        V,
        method="rsvd",
        effort=opts["n_oversamples"],
        tracker=src,
        t0=t0,
        dtype=dtype,
        n_iter=opts["n_iter"],
        power_iteration_normalizer=opts["power_iteration_normalizer"],
        n_random=size,
        transposed=transposed,
    )
    return result
