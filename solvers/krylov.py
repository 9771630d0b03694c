"""Randomized block Krylov SVD (Musco & Musco 2015) using only products with G and G.T."""

from __future__ import annotations

import time

import numpy as np
from scipy import linalg

from ._certificate import fused_known, fused_probes
from ._estimate import krylov_leave_one_out_error
from ._result import SVDResult
from .rsvd import _finish_oriented, _orient, certify_answer, error_estimate_info
from .validation import check_args, check_int

__all__ = ["block_krylov"]


def _orthonormalize_against(Z, basis, rng):
    """Orthonormal columns spanning ``Z``'s part orthogonal to the orthonormal ``basis``.

    Block classical Gram-Schmidt with Householder QR, repeated until a projection leaves
    its input almost whole ("twice is enough", Kahan-Parlett): every ``|R_jj|`` at least
    half the norm of its column before the projection, so the QR amplified no rounding
    error. A column that was all inside ``span(basis)`` (an exactly low-rank G, a zero G)
    leaves only rounding noise; it is replaced by a fresh Gaussian column, which the next
    pass orthogonalises (Householder QR of noise would return the same unit vectors every
    time). New directions can only enlarge the search space.
    """
    if basis is None or basis.shape[1] == 0:
        return linalg.qr(Z, mode="economic", check_finite=False)[0]
    noise = 100 * np.finfo(Z.dtype).eps
    for attempt in range(5):
        before = np.linalg.norm(Z, axis=0)
        Z = Z - basis @ (basis.T @ Z)
        Z, R = linalg.qr(Z, mode="economic", check_finite=False)
        kept = np.abs(np.diag(R)) / np.where(before > 0, before, 1)
        if kept.min() >= 0.5:
            break
        lost = kept < noise
        if lost.any() and attempt < 3:
            Z[:, lost] = rng.standard_normal((Z.shape[0], int(lost.sum())), dtype=Z.dtype)
    return Z


def _krylov_basis(work, block_size, n_iter, rng, dtype, record=None):
    """Orthonormal basis Q of the block Krylov space of ``work^T work`` and ``work @ Q``.

    The space is ``span[Omega, (A^T A) Omega, ..., (A^T A)^q Omega]`` for a Gaussian
    ``Omega`` (M x block_size), built block by block with each new block orthonormalised
    against all earlier ones. The products ``A @ Q_i`` made on the way are kept, so
    ``A @ Q`` costs only one extra product for the last block: ``2 q + 1`` passes in all.
    The basis stops growing when it fills ``R^M``. ``record`` (a dict) receives what the
    leave-one-out estimate needs: ``"C0"`` (``Q^T Omega``) and ``"H"`` (``Q^T Z_k`` for the
    products ``Z_k = A^T A Q_k``, block after block; small dense work, no product).
    """
    N, M = work.shape
    size = min((n_iter + 1) * block_size, M)
    # Fortran order: every block is a contiguous column slice, filled in place (no hstack).
    Q = np.empty((M, size), dtype=dtype, order="F")
    AQ = np.empty((N, size), dtype=dtype, order="F")
    Omega = rng.standard_normal((M, block_size), dtype=dtype)
    Q[:, :block_size] = _orthonormalize_against(Omega, None, rng)
    H = [] if record is not None else None
    start, stop = 0, block_size
    while True:
        AQ[:, start:stop] = work.matmat(Q[:, start:stop])
        if stop == size:
            break
        Z = np.asarray(work.rmatmat(AQ[:, start:stop]), dtype=dtype)
        start, stop = stop, min(stop + block_size, size)
        Q[:, start:stop] = _orthonormalize_against(Z[:, : stop - start], Q[:, :start], rng)
        if H is not None:
            # Z lies in span(Q[:, :stop]) (the new block holds its part outside the others)
            H.append(np.asarray(Q[:, :stop].T @ Z, dtype=np.float64))
    if record is not None:
        Hm = np.zeros((size, len(H) * block_size))
        for k, Hk in enumerate(H):
            Hm[: Hk.shape[0], k * block_size : (k + 1) * block_size] = Hk[:, :block_size]
        C0 = np.zeros((size, block_size))
        C0[:block_size] = Q[:, :block_size].T @ Omega
        record.update(C0=C0, H=Hm)
    return Q, AQ


def block_krylov(G, rank, *, random_state=None, n_oversamples=10, n_iter=4, check_passes=2):
    """Randomized block Krylov SVD (Musco & Musco 2015, Algorithm 2).

    Parameters
    ----------
    G : ndarray, sparse matrix, LinearOperator or matrix source of shape (N, M)
        Only ``matmat``/``rmatmat`` are used, so lazy sources (kernels never formed) work.
    rank : int
        Number of triplets, ``1 <= rank <= min(N, M)``.
    random_state : None, int or numpy.random.Generator, default=None
        Seeds the Gaussian start block.
    n_oversamples : int, default=10
        Extra columns per block: the block size is ``b = min(rank + n_oversamples, min(N, M))``.
    n_iter : int, default=4
        Krylov depth q: the basis has ``q + 1`` blocks, ``(q + 1) b`` vectors (at most
        ``min(N, M)``).
    check_passes : int, default=2
        Passes over ``G`` spent on the certificate (``info["reliable"]``), counted in
        ``n_passes``; the same as :func:`rsvd`'s (its Notes, *Certificate*). 0 turns it
        off: ``reliable`` is then None (unknown: nothing was checked).

    Returns
    -------
    SVDResult
        ``info["effort"]`` is ``n_iter`` (the depth: each step adds one block and two passes);
        ``info`` also has ``n_iter``, ``n_oversamples``, ``block_size``, ``basis_size``,
        ``transposed`` and, as for :func:`rsvd`, ``error_estimate`` (of
        ``||G - U S V^T||_F``, absolute), ``error_estimate_kind`` and ``fro2``, and
        ``reliable``, ``lower_bounds``, ``check_passes`` and ``certificate``.

    Notes
    -----
    With ``A = G`` (or ``G.T`` when ``N < M``, so that the start block lives in the smaller
    dimension, as in :func:`rsvd`) and a Gaussian M x b block ``Omega``, this is Algorithm 2
    of Musco & Musco: the Krylov space

        ``K = [A Omega, (A A^T) A Omega, ..., (A A^T)^q A Omega]``

    is spanned by ``A Q`` where ``Q`` is an orthonormal basis of the right-side space
    ``[Omega, (A^T A) Omega, ..., (A^T A)^q Omega]``, built block by block (each new block
    orthonormalised against the earlier ones: block Gram-Schmidt twice, then Householder QR).
    ``Z``, an orthonormal basis of ``K``, is the QR factor of ``A Q``; the answer is the
    Rayleigh-Ritz projection ``Z Z^T A``: the SVD ``Z^T A = U_B S W^T`` gives ``U = Z U_B``,
    ``V = W``.

    Guarantees, for the same random start as :func:`rsvd`:

    * ``K`` contains the space ``range(A (A^T A)^q Omega)`` that :func:`rsvd` with
      ``n_iter = q`` projects on, at the same cost (``2 q + 2`` passes), so by the
      interlacing of singular values under projection
      ``sigma_i(rsvd) <= sigma_i(block_krylov) <= sigma_i(G)`` for every ``i``: the values
      are never above the truth and never below those of RSVD at equal passes, and the
      error ``||A - Z Z^T A||`` of the whole basis is never larger than RSVD's. At
      ``q = 0`` the method *is* RSVD without power iterations.
    * Musco & Musco (Theorem 1, stated for block size ``rank``; here ``b = rank +
      n_oversamples``) show that ``q = O(log(N) / sqrt(eps))`` gives, with high
      probability, a rank-r approximation ``Z_r Z_r^T A`` within ``(1 + eps)`` of the best in
      spectral and Frobenius norm and per-vector estimates
      ``|u_i^T A A^T u_i - sigma_i^2| <= eps sigma_{r+1}^2``, against ``O(log(N) / eps)``
      for power iterations.

    Passes over G: ``2 q + 2`` plus ``check_passes`` (``info["n_passes"]``): ``q + 1``
    products with ``A`` build ``A Q`` and ``q`` with ``A^T`` build ``Q`` (``b`` vectors
    each), one with ``A^T`` of all ``(q + 1) b`` columns of ``Z`` forms ``Z^T A``: the same
    as :func:`rsvd` with ``n_iter = q``. When ``Q`` fills ``R^M`` (``(q + 1) b >=
    min(N, M)``) the SVD of ``A Q`` is already exact and the last pass is skipped:
    ``2 j + 1`` passes for the ``j + 1`` blocks built. Storage: ``(q + 1) b`` vectors of
    length N and of length M. Dense work: ``O((N + M) ((q + 1) b)^2)``. Float32 input is
    computed and returned in float32.

    *Error estimate* (no extra product), as for :func:`rsvd`: the Frobenius gap
    ``||G||_F^2 - sum(s[:rank]^2)`` where the source knows ``||G||_F`` and the gap is
    resolved, else the leave-one-out estimator of Epperly & Tropp (2023) for the Krylov
    space (every column built from one start vector left out together;
    :func:`solvers.krylov_leave_one_out_error`, computed in ``Q``'s coordinates from the
    products already made, ``O(q n^2 b)`` per start vector for a basis of ``n``
    columns, thinned past ``LOO_FLOPS``, none past about a thousand columns), extended to
    the rank-``rank`` answer. A basis that fills ``R^M`` gives the exact truncation error.

    References
    ----------
    C. Musco, C. Musco, "Randomized block Krylov methods for stronger and faster approximate
    singular value decomposition", NeurIPS 2015.

    Examples
    --------
    >>> import numpy as np
    >>> from solvers import block_krylov
    >>> rng = np.random.default_rng(0)
    >>> G = rng.standard_normal((80, 5)) @ rng.standard_normal((5, 60))
    >>> res = block_krylov(G, 5, n_iter=2, random_state=0)
    >>> np.allclose(res.s, np.linalg.svd(G, compute_uv=False)[:5]), res.info["n_passes"]
    (True, 8.0)
    """
    t0 = time.perf_counter()
    chk = check_args(
        "block_krylov",
        G,
        rank,
        random_state,
        _validate,
        n_oversamples=n_oversamples,
        n_iter=n_iter,
        check_passes=check_passes,
    )
    rank, src, dtype = chk.rank, chk.source, chk.dtype
    # the options as _validate checked them, by name from here on
    n_oversamples = chk.options["n_oversamples"]
    n_iter = chk.options["n_iter"]
    check_passes = chk.options["check_passes"]
    work, block_size, transposed = _orient(src, rank, n_oversamples)
    sketch = {}
    Q, AQ = _krylov_basis(work, block_size, n_iter, chk.rng, dtype, record=sketch)
    filled = Q.shape[1] == work.shape[1]
    if filled:
        # Q fills R^M: A Q Q^T = A, so the SVD of A Q is exact and needs no further pass.
        U, s, Wt = linalg.svd(AQ, full_matrices=False, check_finite=False, lapack_driver="gesdd")
        U, V = U[:, :rank], Q @ Wt[:rank].T
        loo = known = None
    else:
        # Rayleigh-Ritz on the LEFT space K = range(A Q) (Algorithm 2), never on the right
        # space Q itself: at q = 0 that is a random space with no product by A in it.
        Z, R = linalg.qr(AQ, mode="economic", check_finite=False)
        # Z^T A, one more pass, with the certificate's fused probes (see rsvd)
        W = fused_probes(work.shape[0], chk.rng, check_passes)
        P = np.asarray(work.rmatmat(np.hstack([Z, W.astype(dtype)])), dtype=dtype)
        B = P[:, : Z.shape[1]].T
        Ub, s, Wt = linalg.svd(B, full_matrices=False, check_finite=False, lapack_driver="gesdd")
        U, V = Z @ Ub[:, :rank], Wt[:rank].T
        known = fused_known(P[:, : Z.shape[1]] @ Ub[:, :rank], P[:, Z.shape[1] :], W, transposed)
        loo = (
            (lambda: krylov_leave_one_out_error(R, sketch["C0"], sketch["H"]))
            if block_size >= 2
            else None
        )
    estimate = error_estimate_info(src, s, rank, dtype, loo=loo, exact=filled)
    checked = certify_answer(
        "block_krylov",
        src,
        U,
        s[:rank],
        V,
        chk.rng,
        dtype,
        check_passes,
        transposed=transposed,
        known=known,
    )
    result: SVDResult = _finish_oriented(
        U,
        s[:rank],
        V,
        method="block_krylov",
        effort=n_iter,
        tracker=src,
        t0=t0,
        dtype=dtype,
        n_iter=n_iter,
        n_oversamples=n_oversamples,
        block_size=block_size,
        basis_size=Q.shape[1],
        transposed=transposed,
        **estimate,
        **checked,
    )
    return result


def _validate(opts, rank, shape):
    """Options of :func:`block_krylov` (called by ``check_args`` after the common checks)."""
    opts["n_oversamples"] = check_int("n_oversamples", opts["n_oversamples"], 0)
    opts["n_iter"] = check_int("n_iter", opts["n_iter"], 0)
    opts["check_passes"] = check_int("check_passes", opts["check_passes"], 0)
    return opts
