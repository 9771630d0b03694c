"""Randomized SVD (Halko, Martinsson & Tropp 2011) using only products with G and G.T."""

from __future__ import annotations

import math
import time

import numpy as np
from scipy import linalg

from ._certificate import certify, fused_known, fused_probes, known_fro2
from ._check import final_reliable
from ._estimate import GAP_RTOL, GAP_RTOL_FLOAT32, leave_one_out_error, sketch_error_estimate
from ._result import SVDResult, finish
from ._source import as_source
from .validation import NORMALIZERS, check_args, check_choice, check_int, check_random_state

__all__ = ["rsvd", "randomized_range_finder"]

#: What the certificate's warning suggests (see :func:`certify_answer`).
ADVICE = (
    "raise n_iter or n_oversamples (or use block_krylov); where s_r ~ s_(r+1) no effort "
    "certifies the top-r subspace: ask for a rank at a gap of the spectrum"
)


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


def permuted_lu_factor(Y, *, return_upper=False):
    """``P @ L`` of the partial-pivoting LU ``Y = P L U`` of a tall ``Y`` (n x k, n >= k).

    The same matrix as ``scipy.linalg.lu(Y, permute_l=True)[0]``, bit for bit, but built in
    place from LAPACK's ``getrf`` output, where ``lu`` forms L and the permutation as
    separate arrays and multiplies them out: it costs what ``lu_factor`` does, 2.6x less
    than ``lu`` on a 1e6 x 40 float64 block at one BLAS thread
    (``benchmarks/scripts/bench_pass_efficient.py``). Entries of L are at most 1 in
    magnitude and its pivot rows form a unit triangle, so the result is a
    well-conditioned basis of ``range(Y)``: cheaper than QR between power iterations.
    With ``return_upper=True`` the triangular ``U`` is returned too (``P L = Y U^{-1}``).
    """
    k = Y.shape[1]
    getrf = linalg.get_lapack_funcs("getrf", (Y,))
    L, piv, info = getrf(Y)  # a Fortran-ordered copy; Y itself is untouched
    if info < 0:  # pragma: no cover - only for an illegal argument to LAPACK
        raise ValueError(f"LAPACK getrf failed with info={info}")
    top = L[:k]
    upper = np.triu(top) if return_upper else None
    top[np.triu_indices(k, 1)] = 0  # U lives in the upper triangle of the top k x k block
    top[np.diag_indices(k)] = 1
    # getrf swapped row i with row piv[i] for i = 0, 1, ...: P L undoes them in reverse.
    for i in range(k - 1, -1, -1):
        j = piv[i]
        if j != i:
            L[[i, j]] = L[[j, i]]
    return (L, upper) if return_upper else L


def _normalize(Y, normalizer, factors=None):
    """``Y U^{-1}`` with orthonormal (QR) or unit-triangular (LU) columns; ``U`` is appended
    to ``factors`` (for the leave-one-out estimate, which must undo the mixing)."""
    if normalizer == "LU":
        Q, U = permuted_lu_factor(Y, return_upper=True)
    elif normalizer == "QR":
        Q, U = linalg.qr(Y, mode="economic", check_finite=False)
    else:
        return Y
    if factors is not None:
        factors.append(U)
    return Q


def _range_finder(source, size, n_iter, normalizer, rng, dtype, record=None):
    """Orthonormal Q (N x size) with range(Q) ~ range(G): Algorithm 4.4 of Halko et al.

    ``record`` (a dict) receives what the leave-one-out estimate needs, at no extra
    product: ``"G_Omega"`` (the first product ``G Omega``), ``"Y"`` (the last product, whose
    QR gives ``Q``) and ``"factors"`` (the triangular factors of the re-normalisations).
    """
    Q = rng.standard_normal((source.shape[1], size), dtype=dtype)
    factors = []
    G_Omega = None
    for _ in range(n_iter):
        Y = np.asarray(source.matmat(Q), dtype=dtype)
        if G_Omega is None and record is not None:
            G_Omega = Y  # never written to: the normalisers copy
        Q = _normalize(Y, normalizer, factors)
        Q = _normalize(np.asarray(source.rmatmat(Q), dtype=dtype), normalizer, factors)
    Y = np.asarray(source.matmat(Q), dtype=dtype)
    if record is not None:
        record.update(Y=Y, G_Omega=Y if G_Omega is None else G_Omega, factors=factors)
    return linalg.qr(Y, mode="economic", check_finite=False)[0]


def error_estimate_info(tracked, s, rank, dtype, *, loo, exact):
    """``info`` keys of the solver's own error estimate (see :func:`rsvd`, Notes)."""
    fro2 = known_fro2(tracked)
    rtol = GAP_RTOL_FLOAT32 if np.dtype(dtype) == np.float32 else GAP_RTOL
    estimate, kind = sketch_error_estimate(s, rank, fro2=fro2, loo=loo, exact=exact, rtol=rtol)
    info = {} if fro2 is None else {"fro2": fro2}
    if kind is not None:
        info.update(error_estimate=estimate, error_estimate_kind=kind)
    return info


def certify_answer(method, src, U, s, V, rng, dtype, check_passes, *, transposed, known=None):
    """``info`` keys of the product certificate of an answer ``(U, s, V)`` of ``work``.

    ``U``, ``V`` are swapped back when ``work`` is ``G.T`` (:func:`_orient`); ``check_passes``
    passes of :func:`solvers._certificate.certify` then bound the answer's values, its
    missed directions and its subspace (Wedin). Returns ``reliable``, ``lower_bounds``,
    ``check_passes`` and ``certificate`` (see :func:`rsvd`, Notes); ``reliable`` is None
    (unknown) when ``check_passes`` is 0. ``known``: the fused probes of the solve's last
    pass (:func:`solvers._certificate.fused_known`).
    """
    Ug, Vg = (V, U) if transposed else (U, V)
    lower, reliable, cert = certify(
        method, src, Ug, s, Vg, rng, dtype, check_passes, 0, ADVICE, known=known
    )
    reliable = final_reliable(reliable, cert)  # None where no pass ran: nothing was checked
    return {
        "reliable": reliable,
        "check_passes": int(cert["check_passes"]),
        "lower_bounds": None if lower is None else lower.astype(dtype),
        "certificate": cert,
    }


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
    size = check_int("size", size, 1, src.shape[1], high_text=f"M = {src.shape[1]}")
    n_iter = check_int("n_iter", n_iter, 0)
    norm = check_choice("power_iteration_normalizer", power_iteration_normalizer, NORMALIZERS)
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
    check_passes=2,
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
    check_passes : int, default=2
        Passes over ``G`` spent on the certificate (``info["reliable"]``; see *Certificate*
        in Notes), counted in ``n_passes``; the solve's last pass already carries its first
        probes, so one pass gives two products of the probe chain. Each further pass
        sharpens the bound on the norm outside the answer (the j-th root). 0 turns it off:
        ``reliable`` is then None (unknown: nothing was checked).

    Returns
    -------
    SVDResult
        ``info["effort"]`` is ``n_oversamples``; ``info`` also has ``n_iter``,
        ``power_iteration_normalizer``, ``n_random`` (sketch width), ``transposed``, and
        where it could be made ``error_estimate`` (the estimate of ``||G - U S V^T||_F``,
        absolute) with ``error_estimate_kind`` (``"exact"``, ``"gap"`` or ``"loo"``), and
        ``fro2`` (``||G||_F^2``) where the source knows it; ``reliable``, ``lower_bounds``,
        ``check_passes`` and ``certificate`` (what was checked, what it proved, what it
        cost; see :func:`solvers._certificate.certify`).

    Notes
    -----
    Cost: ``2 * n_iter + 2`` passes over ``G`` (products of ``n_random`` vectors with ``G``
    or ``G.T``) plus ``check_passes`` for the certificate, and ``O((N + M) n_random^2)``
    dense work. Like scikit-learn, a wide matrix (N < M) is handled
    through its transpose, so the sketch always lives in the smaller dimension. Float32
    input is computed and returned in float32. Agrees with
    :func:`sklearn.utils.extmath.randomized_svd` (same algorithm; random draws differ).

    *Error estimate* (no extra product). With ``Q`` the basis and ``B = Q^T G`` (singular
    values ``s``), ``||G - U S V^T||_F^2 = ||G||_F^2 - sum(s[:rank]^2)``: the Frobenius gap,
    used where the source knows ``||G||_F`` (a ``frobenius_norm()`` member: the dense and
    sparse adapters, the lazy kernel sources after their set-up pass) and the gap is
    resolved (above ``1e-4 ||G||_F``, 3% in float32; kind ``"gap"``). Otherwise the
    leave-one-out estimator of Epperly & Tropp (2023) on the sketch
    (:func:`solvers.leave_one_out_error`, which undoes the re-normalisations of the power
    iterations by triangular solves), extended from the ``n_random``-dimensional basis to
    the rank-``rank`` answer by :func:`solvers.truncation_error` (kind ``"loo"``). A sketch
    as wide as ``G`` is tall gives the exact truncation error (``"exact"``). ``U S V^T =
    U U^T G`` unless ``transposed`` (then it is ``G V V^T``, and the estimate bounds
    ``||G - U U^T G||_F`` from above).

    *Certificate* (:func:`solvers._certificate.certify`). The solve's last pass carries 20
    Gaussian probes ``W`` beside ``Q`` (``G^T [Q, W]``: no pass of its own), which start a
    probe chain ``D^T W`` with ``D = (I - U U^T) G (I - V V^T)``. Each of the
    ``check_passes`` passes then multiplies ``[V, chain]`` (or ``[U, chain]``, alternating),
    plus ``rank + 15`` orthonormal power-iteration starts where the source knows
    ``||G||_F``. It measures the residuals ``||(I - U U^T) G V||_2`` and ``||U^T G (I - V
    V^T)||_2`` exactly (the second from the solve's own last pass), lower bounds ``l_i <=
    sigma_i(G)``, a lower bound on ``||D||_2`` and the smallest of two upper bounds on it:
    the power-probe bound ``(||D^(j) W||_2 / c)^(1/j)`` on the chain (``j`` = check_passes
    + 1 products; fails with probability at most 1e-6, the constant under the ``j``-th root)
    and, where ``||G||_F`` is known, the deterministic Frobenius split
    (``info["certificate"]["upper_kind"]``, ``["upper_failure"]``). ``reliable`` is True
    only when Wedin's (or Davis & Kahan's) theorem then certifies ``sin theta <= 0.1`` for
    both top-``rank`` subspaces and Weyl's inequality every value within ``0.1
    sigma_1(G)``, no value lies 10% below a lower bound and no direction outside the answer
    carries more than ``1.1 s_rank``. Where ``s_rank`` is not certifiably above ``||D||`` (a
    cluster or a flat tail at ``s_rank``: the top-``rank`` subspace is ill-defined or a few
    passes cannot resolve it) the answer is unreliable, with a warning that says why, and
    ``info["certificate"]["failed"]`` is ``["uncertified"]`` (no evidence against it; the
    driver's stops then judge it by their own measure). On the issue-32 sweep
    (``benchmarks/recorded/certificates/grown.md``) no wrong answer was certified; of the
    right ones with ``s_r / s_(r+1) >= 1.5``, 2.4% were not (rsvd and block_krylov).

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
        _validate,
        n_oversamples=n_oversamples,
        n_iter=n_iter,
        power_iteration_normalizer=power_iteration_normalizer,
        check_passes=check_passes,
    )
    rank, src, dtype = chk.rank, chk.source, chk.dtype
    # the options as _validate checked them, by name from here on
    n_oversamples = chk.options["n_oversamples"]
    n_iter = chk.options["n_iter"]
    power_iteration_normalizer = chk.options["power_iteration_normalizer"]
    check_passes = chk.options["check_passes"]
    work, size, transposed = _orient(src, rank, n_oversamples)
    sketch = {}
    Q = _range_finder(
        work,
        size,
        n_iter,
        power_iteration_normalizer,
        chk.rng,
        dtype,
        record=sketch,
    )
    # the certificate's probes ride along in the last pass (fused: no pass of their own)
    W = fused_probes(work.shape[0], chk.rng, check_passes)
    P = np.asarray(work.rmatmat(np.hstack([Q, W.astype(dtype)])), dtype=dtype)
    B = P[:, :size].T
    Uh, s, Vt = linalg.svd(B, full_matrices=False, check_finite=False, lapack_driver="gesdd")
    U = Q @ Uh[:, :rank]
    V = Vt[:rank].T
    known = fused_known(P[:, :size] @ Uh[:, :rank], P[:, size:], W, transposed)
    # seconds include the estimate: it is part of what the method returns
    estimate = error_estimate_info(
        src,
        s,
        rank,
        dtype,
        exact=size == work.shape[0],
        loo=lambda: (
            leave_one_out_error(
                sketch["Y"],
                sketch["G_Omega"],
                factors=sketch["factors"],
                # un-normalised powers lose directions of G to rounding: no estimate then
                rank_deficient="nan"
                if power_iteration_normalizer == "none" and n_iter > 0
                else "drop",
            )
            if size >= 2
            else math.nan
        ),
    )
    checked = certify_answer(
        "rsvd",
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
        method="rsvd",
        effort=n_oversamples,
        tracker=src,
        t0=t0,
        dtype=dtype,
        n_iter=n_iter,
        power_iteration_normalizer=power_iteration_normalizer,
        n_random=size,
        transposed=transposed,
        **estimate,
        **checked,
    )
    return result


def _validate(opts, rank, shape):
    """Options of :func:`rsvd` (called by ``check_args`` after the common checks)."""
    opts["n_oversamples"] = check_int("n_oversamples", opts["n_oversamples"], 0)
    n_iter = opts["n_iter"]
    if isinstance(n_iter, str):
        if n_iter != "auto":
            raise ValueError(f"n_iter must be a non-negative integer or 'auto', got {n_iter!r}")
        # scikit-learn's rule: more power iterations when the rank is a small fraction.
        n_iter = 7 if rank < 0.1 * min(shape) else 4
    opts["n_iter"] = check_int("n_iter", n_iter, 0)
    norm = check_choice(
        "power_iteration_normalizer", opts["power_iteration_normalizer"], NORMALIZERS
    )
    if norm == "auto":
        norm = "none" if opts["n_iter"] <= 2 else "LU"
    opts["power_iteration_normalizer"] = norm
    opts["check_passes"] = check_int("check_passes", opts["check_passes"], 0)
    return opts
