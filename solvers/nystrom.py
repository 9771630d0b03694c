"""Nyström methods for the top singular triplets: the classic symmetric one and the asymmetric one.

``sym_nystrom`` applies the classic Nyström eigen-approximation (Williams & Seeger 2001) to the
Gram matrix ``G G^T`` and pairs its vectors with ``G``'s right side by a Rayleigh-Ritz step.
``asym_nystrom`` is the asymmetric Nyström method of Tao et al. (2023): it reads only a sample
of rows and columns of ``G`` itself, with the paper's core or an oversampled, stable one
(Park & Nakatsukasa 2024).

Neither clips a value to a bound. Where an answer cannot be trusted (an estimate above what a
lower bound on ``sigma_i(G)`` allows, see :mod:`solvers._check`) it comes back as computed,
with ``info["reliable"] = False`` and a ``RuntimeWarning``.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
from scipy import linalg

from ._certificate import DEFAULT_BUDGET, _basis, certify, fused_known, fused_probes
from ._check import (
    CHECK_FACTOR,
    final_reliable,
    flag_inflated,
    lower_bounds,
    warn_unreliable,
)
from ._estimate import MIN_SAMPLED_ROWS, row_sample_error
from ._result import SVDResult, finish
from .scaling import power_of_two_scale
from .validation import (
    ASYM_CORES,
    ASYM_SAMPLINGS,
    CORES,
    SAMPLINGS,
    check_args,
    check_bool,
    check_choice,
    check_indices,
    check_int,
    check_no_core,
    check_sample_size,
)

__all__ = ["sym_nystrom", "asym_nystrom"]

#: Relative cut-off of the stable core's epsilon-pseudo-inverse (by dtype): sqrt(eps). Core
#: directions below it are what the sample cannot resolve from rounding; beyond the rank, the
#: core also drops directions below the noise its rows show (see "Stable core" in
#: asym_nystrom): inverting those only amplifies the residual of G outside the columns' span.
STABLE_RCOND = {
    "d": float(np.sqrt(np.finfo(np.float64).eps)),
    "f": float(np.sqrt(np.finfo(np.float32).eps)),
}

#: info keys the solver computes itself (a sampler's own counts are already in them)
_OWN_KEYS = frozenset(
    {
        "method",
        "effort",
        "n_matvec",
        "n_block_entries",
        "n_products",
        "n_passes",
        "seconds",
        "reliable",
        "entries_read",
        "row_prob",
        "col_prob",
        "numerical_rank",
    }
)

_ADVICE = (
    "sample more rows/columns (n_samples, n_rows), try another sampling (norm, arp, "
    "rpcholesky), or use a method that multiplies by G ('rsvd', 'block_krylov', 'tsvd')"
)


# ---------------------------------------------------------------------------------------------
# shared helpers
# ---------------------------------------------------------------------------------------------


#: Directions beyond the rank in the certificate's starts (:func:`_sample_starts`): the
#: split bound of its one pass is loose by what ``rank + START_EXTRA`` sampled directions
#: of ``D`` leave out.
START_EXTRA = 15


def _floor(values, size, dtype):
    """Number of values kept by a pinv-style floor: ``v > v_max * size * eps``."""
    if values.size == 0 or values[0] <= 0:
        return 0
    return int(np.count_nonzero(values > values[0] * size * np.finfo(dtype).eps))


def _pad(E, rank, rng):
    """Append ``rank - k`` random unit columns orthogonal to the k columns of ``E``."""
    k = E.shape[1]
    Q = np.linalg.qr(E)[0]
    X = rng.standard_normal((E.shape[0], rank - k)).astype(E.dtype)
    for _ in range(2):  # classical Gram-Schmidt twice is orthogonal to working precision
        X -= Q @ (Q.T @ X)
        X = np.linalg.qr(X)[0]
    return np.hstack([E, X])


def _pad_triplets(U, s, V, rank, rng, what):
    """Fill a rank-deficient answer with zero singular values (and warn)."""
    k = s.size
    warnings.warn(
        f"{what} has numerical rank {k} < rank={rank}; the remaining {rank - k} triplets have "
        "singular value 0 and arbitrary orthonormal vectors (sample more, or lower rank)",
        RuntimeWarning,
        stacklevel=3,
    )
    return _pad(U, rank, rng), np.concatenate([s, np.zeros(rank - k, s.dtype)]), _pad(V, rank, rng)


def _orth_rank_r(E, F, d):
    """Exact SVD of ``E diag(d) F^T`` (E: N x k, F: M x k) through QR and a k x k core."""
    Qe, Re = linalg.qr(E, mode="economic")
    Qf, Rf = linalg.qr(F, mode="economic")
    a, s, bt = linalg.svd((Re * d) @ Rf.T)
    return Qe @ a, s, Qf @ bt.T


def _normalized(E):
    n = np.linalg.norm(E, axis=0)
    n[n == 0] = 1
    return E / n


def _entries_read(src):
    """Entries of G read so far: ``N * M`` per product plus the entries of rows/cols/blocks."""
    N, M = src.shape
    return int(src.n_products) * N * M + int(src.n_block_entries)


def _finish(U, s, V, method, src, t0, dtype, opts, sizes, extra, numerical_rank, reliable):
    """:func:`finish` with the info both Nyström methods report (effort = ``n_samples``)."""
    result: SVDResult = finish(
        U,
        s,
        V,
        method=method,
        effort=opts["n_samples"],
        tracker=src,
        t0=t0,
        dtype=dtype,
        reliable=reliable,
        sampling=opts["sampling"],
        orthogonalize=opts["orthogonalize"],
        core=opts["core"],
        **sizes,
        **extra,
        numerical_rank=numerical_rank,
        entries_read=_entries_read(src),
    )
    return result


def _check_values(method, s, lower, how, shape, dtype, stacklevel=4):
    """``reliable`` for values ``s`` against lower bounds ``lower``, warning when False."""
    bad = flag_inflated(s, lower, shape, dtype)
    if bad.size:
        warn_unreliable(method, s, lower, bad, how, _ADVICE, stacklevel=stacklevel)
    return not bad.size


def _check_norm_bound(method, src, s, dtype):
    """``reliable``: False (with a warning) when ``s_1`` exceeds the source's ``norm_bound()``."""
    if not hasattr(src, "norm_bound") or s.size == 0:
        return True
    bound = src.norm_bound()
    if s[0] <= bound * (1 + np.sqrt(np.finfo(dtype).eps)):
        return True
    warnings.warn(
        f"{method}: the estimate s_1 = {s[0]:.3g} exceeds the bound {bound:.3g} on ||G||_2 "
        f"(G.norm_bound()): the answer cannot be trusted (info['reliable'] = False). "
        f"To fix, {_ADVICE}",
        RuntimeWarning,
        stacklevel=4,
    )
    return False


# ---------------------------------------------------------------------------------------------
# classic (symmetric) Nyström on the Gram matrix
# ---------------------------------------------------------------------------------------------


def _gram_nystrom(C, idx, n_total, rank, orthogonalize, core, dtype):
    """Nyström eigen-approximation of a PSD matrix K from its sampled columns C = K[:, idx].

    Returns eigenvectors (n_total x k), eigenvalues (k,) with k = min(rank, kept) and the
    number ``kept`` of eigenvalues of W that survive the floor.
    Raw (Williams & Seeger): W = K[idx, idx] = Q diag(lam) Q^T, eigenvalues (n_total / n) lam,
    eigenvectors C Q diag(1/lam) normalised. Orthogonalised: the exact eigen-decomposition of
    the Nyström approximation C W_r^+ C^T = E diag(lam_r) E^T with E = C Q_r / lam_r
    (``core="rank"``), or of C W^+ C^T truncated to rank (``core="full"``).
    """
    n = idx.size
    W = C[idx]
    lam, Q = linalg.eigh((W + W.T) / 2)
    lam, Q = lam[::-1], Q[:, ::-1]
    kept = _floor(lam, n, dtype)
    k = kept if (orthogonalize and core == "full") else min(rank, kept)
    E = C @ (Q[:, :k] / lam[:k])
    if orthogonalize:
        U, vals, _ = _orth_rank_r(E, E, lam[:k])
        U, vals = U[:, :rank], vals[:rank]
    else:
        U, vals = _normalized(E), lam[:k] * (n_total / n)
    return U, np.maximum(vals, 0), kept


def sym_nystrom(
    G,
    rank,
    *,
    random_state=None,
    n_samples=None,
    sampling="uniform",
    orthogonalize=True,
    core="rank",
    check_passes=2,
):
    """Classic Nyström (Williams & Seeger) on ``G G^T`` for U, then V and s from ``G^T U``.

    Parameters
    ----------
    G : ndarray, sparse matrix, LinearOperator or matrix source of shape (N, M)
    rank : int
        Number of triplets, ``1 <= rank <= min(n_samples, N)``.
    random_state : None, int or numpy.random.Generator, default=None
        Seeds the sample.
    n_samples : int
        Columns sampled from ``G G^T`` (N x N), ``rank <= n_samples <= max(N, M)``
        (required); ``min(n_samples, N)`` are used, so ``n_samples >= N`` samples it
        completely and the answer is exact.
    sampling : {"uniform", "norm"}, default="uniform"
        Uniform without replacement, or by the Gram diagonal (squared row norms of ``G``),
        which costs one pass over ``G`` (counted in ``n_passes``).
    orthogonalize : bool, default=True
        True: exact eigenvectors of the Nyström approximation, then a Rayleigh-Ritz step
        (below). False: the textbook extension ``C Q diag(1/lambda)`` normalised, values
        ``sqrt((N/n) lambda)``, and ``V`` the normalised columns of ``G^T U``.
    core : {"rank", "full"}, default="rank"
        With ``orthogonalize=True``: approximate ``K = G G^T`` by ``C W_r^+ C^T`` (the top-r
        part of the core) or by ``C W^+ C^T`` (the whole floored pseudo-inverse, then
        truncated to rank: exact as soon as the sample spans ``K``'s range).
    check_passes : int, default=2
        Passes over ``G`` spent on the certificate (``info["reliable"]``), counted in
        ``n_passes``: the one of :func:`rsvd` (its Notes, *Certificate*: values, missed
        directions and the subspace by Wedin's theorem). 0 turns it off (the free check of
        ``orthogonalize=False`` still runs).

    Returns
    -------
    SVDResult
        ``info["effort"]`` is ``n_samples``; ``info`` also has ``row_indices``,
        ``col_indices`` (None: no column sample), ``s_nystrom`` (``sqrt`` of the Nyström
        eigenvalue estimates of ``G G^T``), ``numerical_rank``, ``entries_read``,
        ``reliable``, ``lower_bounds``, ``check_passes`` and ``certificate``.

    Notes
    -----
    Columns of ``K = G G^T`` are formed as ``K[:, idx] = G @ G[idx, :].T`` (``rows`` then
    ``matmat``), never ``K`` itself; the Nyström eigenvectors ``U_0`` of ``K`` follow. The
    right side is not a second, independent eigenproblem: two eigensolvers choose their
    bases of a repeated singular value independently, and no pairing of the two sets can
    then reproduce ``G`` (a rotation comes back as the identity). Instead one product
    ``B = G^T U_0`` and the SVD ``U_0^T G = B^T = A S W^T`` (a Rayleigh-Ritz step on the
    left space) give ``U = U_0 A``, ``s = S``, ``V = W``: paired by construction, values
    ``s_i <= sigma_i(G)`` (interlacing) and never below the Nyström estimates
    (``C W^+ C^T <= K``), exact whenever ``U_0`` spans an invariant subspace of ``G G^T``
    (the full sample, ties included).

    With ``orthogonalize=False`` the textbook values ``sqrt((N/n) lambda)`` are returned
    unchanged; when one of them exceeds ``CHECK_FACTOR`` times its lower bound
    ``sigma_i(G^T Q_U)`` (free: ``B`` is at hand) the answer is marked unreliable and a
    ``RuntimeWarning`` says so.

    Cost: ``2`` products with ``G`` or ``G.T`` (``O(N M n)`` flops) plus ``n M`` entries
    (``1 + 1 + n / N`` passes; norm sampling adds one; the certificate ``check_passes``) and
    ``O(N n^2 + M n rank)`` dense work.
    Per sample it is far dearer than :func:`asym_nystrom`, which never multiplies.

    References
    ----------
    C. K. I. Williams, M. Seeger, "Using the Nyström method to speed up kernel machines",
    NIPS 13, 2001.
    """
    t0 = time.perf_counter()
    chk = check_args(
        "sym_nystrom",
        G,
        rank,
        random_state,
        _validate_sym,
        n_samples=n_samples,
        sampling=sampling,
        orthogonalize=orthogonalize,
        core=core,
        check_passes=check_passes,
    )
    # start-up: the sampling package (5 ms, like select_rows_cols below) loads on first use
    from .sampling.basic import sample_indices

    opts, rank, src, dtype, rng = chk.options, chk.rank, chk.source, chk.dtype, chk.rng
    # the options as _validate checked them, by name from here on
    n_samples = chk.options["n_samples"]
    sampling = chk.options["sampling"]
    orthogonalize = chk.options["orthogonalize"]
    core = chk.options["core"]
    check_passes = chk.options["check_passes"]
    N, M = src.shape
    n = min(n_samples, N)
    weights = src.norms_sq()[0] if sampling == "norm" else None  # one pass
    ridx = sample_indices(N, n, weights, rng)
    R = np.asarray(src.rows(ridx), dtype=dtype)
    # The Gram block squares G's magnitude: a tiny or huge lazy G (check_args rescales only
    # concrete ones) is brought near 1 first, exactly.
    unit = power_of_two_scale(float(np.max(np.abs(R), initial=0.0)))
    R = R * unit if unit != 1.0 else R
    CU = np.asarray(src.matmat(np.ascontiguousarray(R.T)), dtype=dtype)
    CU = CU * unit if unit != 1.0 else CU
    U0, lam, kept = _gram_nystrom(CU, ridx, N, rank, orthogonalize, core, dtype)
    s_nys = np.sqrt(lam) / unit
    # G^T U0: the pairing product, with the certificate's fused probes (see rsvd)
    probes = fused_probes(N, rng, check_passes)
    B = np.asarray(src.rmatmat(np.hstack([U0, probes.astype(U0.dtype)])), dtype=dtype)
    B, GtW = B[:, : U0.shape[1]], B[:, U0.shape[1] :]
    reliable = True
    if orthogonalize:
        # Rayleigh-Ritz on span(U0): exact triplets of U0 U0^T G, paired by construction.
        W, s, At = linalg.svd(B, full_matrices=False)
        keep = min(rank, _floor(s, max(B.shape), dtype))
        U, s, V = U0 @ At[:keep].T, s[:keep], W[:, :keep]
        known = fused_known(B @ At[:keep].T, GtW, probes, False)
    else:
        U, s = U0, s_nys
        V = _normalized(B)
        Ru = linalg.qr(U0, mode="r")[0][: U0.shape[1]]
        with np.errstate(all="ignore"):  # G^T Q_U = B R_U^-1, orthonormal Q_U: interlacing
            GtQ = linalg.solve_triangular(Ru, B.T, trans="T", check_finite=False).T
        lower = lower_bounds(np.nan_to_num(GtQ, nan=0.0, posinf=0.0, neginf=0.0), s.size)
        reliable = _check_values(
            "sym_nystrom", s, lower, "from G^T U, the pairing product", (N, M), dtype
        )
        known = fused_known(B, GtW, probes, False)
    if s.size < rank:
        U, s, V = _pad_triplets(U, s, V, rank, rng, "A sampled Gram block")
        known = None  # the padded columns were not in the pairing product
    s_nys = np.pad(s_nys, (0, max(0, rank - s_nys.size)))[:rank]
    lower, certified, cert = certify(
        "sym_nystrom", src, U, s, V, rng, dtype, check_passes, 0, _ADVICE, known=known
    )
    if not reliable:  # the raw values' own check found them inflated: evidence
        cert["failed"] = sorted(set(cert["failed"]) | {"values"})
    reliable = final_reliable(reliable and certified, cert)
    extra = {
        "row_indices": ridx,
        "col_indices": None,
        "s_nystrom": s_nys.astype(dtype),
        "lower_bounds": None if lower is None else lower.astype(dtype),
        "check_passes": int(cert["check_passes"]),
        "certificate": cert,
    }
    return _finish(
        U,
        s,
        V,
        "sym_nystrom",
        src,
        t0,
        dtype,
        opts,
        {"n_samples": n_samples},
        extra,
        kept,
        reliable,
    )


def _validate_sym(opts, rank, shape):
    """Options of :func:`sym_nystrom` (called by ``check_args`` after the common checks)."""
    N, M = shape
    opts["sampling"] = check_choice("sampling", opts["sampling"], SAMPLINGS)
    opts["orthogonalize"] = check_bool("orthogonalize", opts["orthogonalize"])
    opts["core"] = check_choice("core", opts["core"], CORES)
    if opts["core"] == "full" and not opts["orthogonalize"]:
        raise ValueError("core='full' needs orthogonalize=True (the raw extension is rank-r)")
    if opts["n_samples"] is None:
        raise TypeError("n_samples is required for method 'sym_nystrom'")
    n = check_int(
        "n_samples", opts["n_samples"], 1, max(N, M), high_text=f"max(N, M) = {max(N, M)}"
    )
    opts["n_samples"] = n
    check_sample_size(rank, {"n_samples": n})
    opts["check_passes"] = check_int("check_passes", opts["check_passes"], 0)
    return opts


# ---------------------------------------------------------------------------------------------
# asymmetric Nyström (the paper's method, and the stable core)
# ---------------------------------------------------------------------------------------------


def asym_nystrom(
    G,
    rank,
    *,
    random_state=None,
    n_samples=None,
    n_rows=None,
    sampling="uniform",
    row_indices=None,
    col_indices=None,
    orthogonalize=True,
    core=None,
    check_passes=1,
    certificate_budget=None,
):
    """Asymmetric Nyström method (Tao et al. 2023) for the top singular triplets of ``G``.

    Parameters
    ----------
    G : ndarray, sparse matrix, LinearOperator or matrix source of shape (N, M)
        ``rows(idx)`` and ``cols(idx)`` build the answer; products are used only by the
        a-posteriori check (``check_passes``) and by ``sampling="arp"``'s sketch.
    rank : int
        Number of triplets, ``1 <= rank <= min(n_rows, n_samples)``.
    random_state : None, int or numpy.random.Generator, default=None
        Seeds the sample and the check.
    n_samples : int or None
        Number m of sampled columns (for ``"rpcholesky"``: pivots), ``<= M``; required
        unless ``col_indices`` is given.
    n_rows : int or None, default=None
        Number n of sampled rows, ``<= N``; None means ``min(2 m, N)`` for
        ``core="stable"`` (the oversampling it needs) and ``min(m, N)`` for ``"paper"``.
    sampling : {"uniform", "norm", "arp", "rpcholesky", "aca"}, default="uniform"
        How rows and columns are chosen. ``"uniform"``: without replacement. ``"norm"``:
        without replacement with probabilities proportional to squared row/column norms,
        which costs one pass over ``G`` (from the source's ``row_norms_sq()``/
        ``col_norms_sq()`` or by streaming its rows; counted in ``n_passes`` and
        ``entries_read`` either way). ``"arp"`` (adaptive randomized pivoting on a one-pass
        sketch), ``"aca"`` (adaptive cross approximation) and ``"rpcholesky"`` (randomly
        pivoted Cholesky on the joint PSD kernel of a lazy point source; it returns the
        triplets of its own factorisation, ``core`` does not apply) are documented in
        :mod:`solvers.sampling`.
    row_indices, col_indices : array_like of int or None, default=None
        The sample itself (distinct indices); overrides sampling for that side.
    orthogonalize : bool, default=True
        ``core="paper"`` only: the exact SVD of the paper's Nyström approximation (True) or
        the paper's raw extension (False). ``core="stable"`` needs True.
    core : {"stable", "paper"} or None, default=None
        None means ``"stable"``, or ``"paper"`` with ``orthogonalize=False`` (the raw
        extension is the paper's). ``"stable"``: the oversampled CUR
        ``C (G[I, J])^+_eps R`` of Park & Nakatsukasa, computed through an SVD of the
        sampled columns. ``"paper"``: eq. (10) of Tao et al.
        on the block's top ``rank`` triplets, as the paper's tables used it. See Notes.
    check_passes : int, default=1
        Passes over ``G`` spent on the a-posteriori check (0 turns it off; the free checks
        and the sampled certificate still run, and ``reliable`` is then None at best). Each
        pass (one ``sketch`` call where the source has it) also carries a block power
        iteration on the deflated operator ``(I - U U^T) G (I - V V^T)`` that looks for
        missed directions and bounds the subspace (see *Checks*), started from the
        directions the sample saw outside the answer. One pass certifies most right answers
        at a gap ``s_r / s_(r+1) >= 1.5``; raise it where the spectrum's tail beyond ``s_r``
        is flat (its bound on the deflated norm is loose by the square root of that tail's
        stable rank after one product, its fourth root after two). Counted in
        ``n_passes``/``entries_read``.
    certificate_budget : float or None, default=None
        Entries the sampled certificate (random rows and columns of the residual, see
        *Checks*) may read, as a fraction of the entries the sample itself read; None means
        ``DEFAULT_BUDGET`` (0.1), 0 turns it off. Counted in ``n_passes``/``entries_read``.

    Returns
    -------
    SVDResult
        ``info["effort"]`` is m; ``info`` also has ``n_rows``, ``n_samples``,
        ``row_indices``, ``col_indices``, ``numerical_rank``, ``core_rank`` (directions
        inverted), ``entries_read`` (entries of G read, products and any norm pass
        included), ``reliable``, ``lower_bounds`` (the check's bounds on ``sigma_i(G)``,
        None when it did not run), ``check_passes`` (products it used) and, per core,
        ``oblique_norm`` and ``core_noise`` (stable), ``scale`` and
        ``block_singular_values`` (paper), and ``certificate`` (what was checked and what it
        cost: ``check_passes``, ``deflated`` (the power iteration's lower bound on the
        deflated norm), ``miss_probability`` (the bound on missing a direction twice the
        threshold), ``threshold`` and ``sampled`` (see
        :func:`solvers._certificate.sampled_certificate`; None when off)).

    Notes
    -----
    Let ``C = G[:, J]`` (N x m), ``R = G[I, :]`` (n x M) and ``W = G[I, J]``.

    *Stable core* (``core="stable"``). Rows are oversampled (``n = 2 m`` by default) and the
    core ``W`` (n x m) is inverted by an epsilon-pseudo-inverse, as Park & Nakatsukasa
    (2024) prescribe: ``G_hat = C W_eps^+ R``. It is computed through the SVD
    ``C = Q_C diag(c) V_C^T`` (floored at ``c_max max(N, m) eps``), never through
    ``C v_i / w_i``: ``W V_C = Q_C[I, :] diag(c) = A diag(w) B^T`` gives
    ``C W_eps^+ = Q_C F A_k^T`` with ``F = diag(c) B_k diag(1 / w_k)``, and the answer is the
    exact SVD of ``G_hat = Q_C (F A_k^T R)``.

    The bound behind the cut-off. With ``E = G - Q_C Q_C^T G`` (what the columns miss; its
    columns ``J`` are zero) and ``E_I = E[I, :]``,
    ``G - G_hat = E + Q_C diag(c) (I - B_k B_k^T) diag(1 / c) Q_C^T G - Q_C F A_k^T E_I``,
    so ``||G - G_hat|| <= ||E|| + ||F|| ||E_I|| + (dropped part)``; keeping every direction
    (``W`` of full column rank) gives the oblique-projection bound
    ``||G - G_hat|| <= (1 + ||Q_C[I, :]^+||) ||E||``. Direction ``i`` of the core adds the
    noise ``||diag(c) b_i|| ||a_i^T E_I|| / w_i`` and reproduces the part ``diag(c) b_i`` of
    the sampled columns exactly (dropping it loses at least ``||diag(c) b_i||``), so it is
    worth inverting only while ``w_i > ||a_i^T E_I||``. The rows show ``E_I`` where the core
    cannot explain them: ``nu = ||A_perp^T R||_2`` (``A_perp`` spans the complement of
    ``range(W)`` among the n sampled rows; ``info["core_noise"]`` is ``nu / ||W||``). Kept: the top
    ``rank`` directions above ``eps = STABLE_RCOND ||W||`` (``sqrt`` of the machine epsilon;
    they are the answer, and dropping one loses a triplet for sure) and every further one
    above ``max(eps, nu / (1.5 g_i))``. A direction of ``W`` that the sampled rows barely
    see (small ``w_i``, large ``c``) is what this removes: with eps alone, ARP's sample at
    m = 60 on the rare-cluster SNE kernel (N = M = 6000, r = 20) inverted one with
    ``||F|| = 272`` and gave subspace error 7.9e-2 where the same rows and columns
    projected optimally (``Q_C Q_C^T G Q_R Q_R^T``) give 1.6e-3; with the noise cut it
    gives 1.6e-3.

    *The noise on the columns' scale.* ``w_i`` is measured on the m sampled columns, ``nu``
    on all M columns of the sampled rows. What direction ``i`` reproduces over all columns
    is about ``g_i w_i``, with ``g_i`` its spread from the sampled columns to all of them,
    so the test is ``g_i w_i > nu / 1.5`` (``nu`` is the largest noise over the complement,
    not that of one direction; the 1.5 keeps the rows' own noise out of the whisper problem
    in the tests, where noise directions spread like signal). ``g_i`` is estimated by
    ``||a_i^T R|| / w_i``,
    capped at the rows' average ``||R||_F / ||G[I, J]||_F`` (a direction whose rows reach
    far beyond that is residual, not signal: the SNE case above) and at least 1.
    Comparing ``w_i`` with ``nu`` itself (``g_i = 1``) dropped core directions that carry
    signal. On ``make_kernel_problem(1200, 1000, rank=20, decay="polynomial",
    coherence=0.9)`` (r = 5, uniform m = 80), where a few sampled rows hold the spikes of
    coherent singular vectors, ``nu`` is 0.003 while ``W``'s 5th to 15th directions (signal:
    ``rho`` is about 0.3) lie between 0.01 and 0.001; the old test kept 5-10 directions,
    and because coherence reorders ``W``'s directions against ``G``'s (a direction whose
    spike was sampled is large in ``W``), those were not ``G``'s top 5: subspace error 1.0,
    30x the best projection of the same rows and columns (0.03). With the rescaled test it
    is 2.2-2.9x over seeds 0-4. The rest is the oblique projection itself: keeping every
    direction gives 2-4x on these samples, since ``||Q_C[I, :]^+||`` is about 10 for
    uniform rows on coherent vectors, and the CUR bound ``(1 + ||Q_C[I, :]^+||) ||E||``
    allows that; the 1.00-1.24x measured on the SNE families (below) is not reachable here
    by any core of these rows.

    When ``C`` spans ``range(G)`` and the rows see every direction of it (a sample that
    spans G), ``E = 0`` and ``nu`` is rounding: the cut-off then drops from ``sqrt(eps)`` to
    the rounding floor, so every singular value the sample determines is returned (a full
    sample matches the SVD to rounding, down to ``s_i / s_1 = 1e-14``). A core of full row
    rank (``n`` at most ``m``) has no complement: ``sqrt(eps)`` alone applies.
    ``s_i(G_hat) <= ||F||_2 sigma_i(G)`` always (``info["oblique_norm"]``); when that norm is
    at most ``CHECK_FACTOR`` (a full row sample, for one) the values are certified for
    free. The paper's failure (inverting singular values of ``W`` that are rounding or
    residual) is what the cut-offs and the oversampling remove.

    *Paper core* (``core="paper"``). With ``W = U_s S_s V_s^T``, eq. (10) of the paper extends
    the block's top ``k = min(rank, kept)`` triplets (tiny block values, ``<= s_max
    max(n, m) eps``, are dropped) to the whole matrix: ``U_ext = C V_k S_k^-1``,
    ``V_ext = R^T U_k S_k^-1``. ``orthogonalize=True`` returns the exact SVD of
    ``C W_k^+ R = U_ext S_k V_ext^T`` (QR of both factors, SVD of a k x k core);
    ``orthogonalize=False`` the raw extension with unit columns and the importance-weighted
    block's singular values: ``D_r W D_c`` with ``D = diag(1 / sqrt(pi))`` for the inclusion
    probabilities ``pi`` of the sample, which is ``sqrt(N M / (n m)) S_s`` under uniform
    sampling (the paper's scaling) and reweights rows and columns drawn by norm. Inverting
    ``S_k`` amplifies what the block did not see: on the centred SNE kernel of a
    300000-node graph (``make_directed_graph(300_000, random_state=0)``, rank 10, 400
    samples) it gives ``s_1`` at 21.6 times the truth, the stable core 13.1 times; both are
    flagged by the checks below, and nothing is clipped.

    *Checks* (:mod:`solvers._certificate`). (1) With ``norm_bound()`` on the source, ``s_1``
    above it is unreliable (and the rest is skipped). (2) ``check_passes`` products
    ``G [V, X]``, ``G^T [U, Y]``, ... (``X``, ``Y``: the top ``rank + START_EXTRA``
    directions of the sampled rows outside ``V`` and of the sampled columns outside ``U``,
    then the deflated iterates) give lower bounds ``l_i <= sigma_i(G)`` (interlacing) and a lower
    bound ``d`` on ``||(I - U U^T) G (I - V V^T)||_2``, which is ``sigma_{r+1}(G)`` for the
    exact answer. Unreliable: any ``s_i > CHECK_FACTOR l_i`` (inflated), any ``l_i > (1 +
    MISS_SLACK) s_i`` (a value 10% below a proven bound), or ``d > (1 + MISS_SLACK) s_r``
    (a direction outside the answer carries more than its r-th value: a top direction is
    missing). The power iteration misses a direction ``t`` times that threshold with
    probability at most ``(0.824 sqrt(M) t^-p)^5`` after ``p`` products (Kuczynski &
    Wozniakowski): one product sees only gross misses, each further one divides the bound
    by ``t``. (3) The sampled certificate, which needs no pass: random rows of ``G (I - V
    V^T)`` and columns of ``(I - U U^T) G`` bound the same deflated norms from below, so
    the same test applies, and a missed cluster holding a fraction ``w`` of the rows is
    caught with probability at least ``1 - (1 - w)^{n_r}``; they also estimate ``||G - U S
    V^T||_F`` (``info["certificate"]["sampled"]``). (4) Once both ``G V`` and ``G^T U`` are
    known (one ``sketch`` pass, else two), the residuals and an upper bound on the deflated
    norm (after one pass: ``||D X||`` and Gaussian probes of the complement of ``X``, the
    split bound, which is sharp where the sample saw the top of ``D``) bound ``sin theta``
    of both subspaces (Wedin, Davis-Kahan, the tangent bound) and every value's error (Weyl);
    above 0.1 (``SUBSPACE_TOL``, ``VALUE_TOL`` times ``sigma_1``), or a gap that cannot be
    certified, is unreliable (:func:`solvers._certificate.triplet_bounds`; the cost and
    guarantee are those of :func:`rsvd`'s *Certificate*). Unreliable answers come back
    unchanged with ``info["reliable"] = False`` and a ``RuntimeWarning``; an answer that
    passes (2) is at most ``CHECK_FACTOR`` (1.5) times above the truth. The free bound
    (``oblique_norm <= CHECK_FACTOR``) certifies values, not directions: the products
    still run.

    Cost: ``n M + N m`` entries (plus the sampler's, see ``info["entries_read"]``), a fraction
    ``m / M + n / N`` of one pass, plus ``check_passes`` passes for the check (one by
    default: at N = M = 10,000, lazy RBF, 200 samples, 1.07 passes in all); dense work
    ``O((N + M) m n)`` for the stable core, ``O(n m^2 + (N + M) m k)`` for the paper's.

    References
    ----------
    Q. Tao, F. Tonin, A. Lambert, Y. Chen, P. Patrinos, J. A. K. Suykens, "Nonlinear SVD with
    asymmetric kernels: feature learning and asymmetric Nyström method", NeurIPS 2023.
    T. Park, Y. Nakatsukasa, "Accuracy and stability of CUR decompositions with
    oversampling", arXiv:2405.06375, 2024.

    Examples
    --------
    >>> import numpy as np
    >>> from solvers import asym_nystrom
    >>> rng = np.random.default_rng(0)
    >>> G = rng.standard_normal((90, 4)) @ rng.standard_normal((4, 70))
    >>> res = asym_nystrom(G, 4, n_samples=10, random_state=0)
    >>> np.allclose(res.s, np.linalg.svd(G, compute_uv=False)[:4]), res.info["reliable"]
    (True, True)
    """
    t0 = time.perf_counter()
    chk = check_args(
        "asym_nystrom",
        G,
        rank,
        random_state,
        _validate_asym,
        n_samples=n_samples,
        n_rows=n_rows,
        sampling=sampling,
        row_indices=row_indices,
        col_indices=col_indices,
        orthogonalize=orthogonalize,
        core=core,
        check_passes=check_passes,
        certificate_budget=certificate_budget,
    )
    opts, rank, src, dtype, rng = chk.options, chk.rank, chk.source, chk.dtype, chk.rng
    # the options as _validate checked them, by name from here on
    n_samples = chk.options["n_samples"]
    n_rows = chk.options["n_rows"]
    sampling = chk.options["sampling"]
    core = chk.options["core"]
    check_passes = chk.options["check_passes"]
    certificate_budget = chk.options["certificate_budget"]
    N, M = src.shape
    m, n = n_samples, n_rows
    extra = {}
    starts = None
    if sampling == "rpcholesky":
        # the factorisation's next triplets seed the certificate's pass (none when it is off)
        more = max(0, min(START_EXTRA + rank, m - rank, min(N, M) - rank)) if check_passes else 0
        U, s, V, numerical_rank, certified, extra = _rpcholesky(src, rank, m, rng, dtype, more)
        starts = extra.pop("_starts", None)
        ridx = cidx = None
    else:
        sel = _select(src, opts, rank, rng)
        ridx, cidx = sel.row_indices, sel.col_indices
        extra.update({k: v for k, v in sel.info.items() if k not in _OWN_KEYS})
        R = sel.rows if sel.rows is not None else src.rows(ridx)
        C = sel.cols if sel.cols is not None else src.cols(cidx)
        R, C = np.asarray(R, dtype=dtype), np.asarray(C, dtype=dtype)
        if core == "stable":
            U, s, V, numerical_rank, certified, more = _stable_core(C, R, ridx, cidx, rank, dtype)
        else:
            U, s, V, numerical_rank, more = _paper_core(C, R, sel, rank, opts, (N, M), dtype)
            certified = False
        extra.update(more)
        if check_passes:
            starts = _sample_starts(C, R, U, V, START_EXTRA + rank)
    row_weights = extra.pop("_row_weights", None)
    if s.size < rank:
        U, s, V = _pad_triplets(U, s, V, rank, rng, "The sample")
    # rpcholesky rows whose normaliser the factors do not resolve are 0 (it warned): unreliable
    reliable = _check_norm_bound("asym_nystrom", src, s, dtype) and not extra.get("unresolved_rows")
    # the sample's own entries (a norm pass and products excluded): the budget's base
    own = int(src.n_block_entries) - (N * M if sampling == "norm" else 0)
    lower, cert = None, {"check_passes": 0, "sampled": None}
    if reliable:
        lower, reliable, cert = certify(
            "asym_nystrom",
            src,
            U,
            s,
            V,
            rng,
            dtype,
            check_passes,
            certificate_budget * own,
            _ADVICE,
            starts=starts,
        )
    cert["certified_values"] = bool(certified)
    if certificate_budget and _rows_alone(src, cert):
        # the sampled certificate could not run (its columns need the set-up pass), but
        # this source's rows can be read without it: estimate the error from rows alone
        floor = min(MIN_SAMPLED_ROWS, N // 16)  # a small G: a budget's share of it
        rows = max(floor, int(certificate_budget * own) // (2 * M))
        cert["sampled_rows"] = row_sample_error(src, U, s, V, rows, rng, weights=row_weights)
        src.n_block_entries += cert["sampled_rows"]["rows"] * M  # the rows' normalisers
    # True only with the product certificate's bounds: the sampled rows and columns, the
    # oblique norm and norm_bound() can say "wrong" or "unknown", never "right"
    reliable = final_reliable(reliable, cert)
    extra.update(
        lower_bounds=None if lower is None else lower.astype(dtype),
        check_passes=int(cert["check_passes"]),
        certificate=cert,
    )
    sizes = {"n_rows": n, "n_samples": m}
    extra = {"row_indices": ridx, "col_indices": cidx, **extra}
    return _finish(
        U, s, V, "asym_nystrom", src, t0, dtype, opts, sizes, extra, numerical_rank, reliable
    )


def _rows_alone(src, cert):
    """Whether the sampled certificate was skipped for the set-up pass while the source
    reads rows without it (``rows_without_setup``, a lazy normalised kernel)."""
    sampled = cert.get("sampled") or {}
    reads = getattr(getattr(src, "source", src), "rows_without_setup", None)
    return bool(sampled.get("skipped")) and callable(reads) and bool(reads())


def _validate_asym(opts, rank, shape):
    """Options of :func:`asym_nystrom` (called by ``check_args`` after the common checks)."""
    N, M = shape
    budget = opts["certificate_budget"]
    budget = DEFAULT_BUDGET if budget is None else budget
    if (
        not isinstance(budget, (int, float, np.integer, np.floating))
        or isinstance(budget, bool)
        or not np.isfinite(budget)
        or budget < 0
    ):
        raise ValueError(f"certificate_budget must be a finite number >= 0, got {budget!r}")
    opts["certificate_budget"] = float(budget)
    opts["sampling"] = check_choice("sampling", opts["sampling"], ASYM_SAMPLINGS)
    opts["orthogonalize"] = check_bool("orthogonalize", opts["orthogonalize"])
    if opts["sampling"] == "rpcholesky":  # no core runs: info["core"] records None
        check_no_core(opts["core"], opts["orthogonalize"])
    elif opts["core"] is None:
        opts["core"] = "stable" if opts["orthogonalize"] else "paper"
    if opts["core"] is not None:
        opts["core"] = check_choice("core", opts["core"], ASYM_CORES)
    opts["check_passes"] = check_int("check_passes", opts["check_passes"], 0)
    if opts["core"] == "stable" and not opts["orthogonalize"]:
        raise ValueError(
            "orthogonalize=False (the paper's raw extension) needs core='paper'; "
            "core='stable' returns the exact SVD of its approximation"
        )
    ridx, cidx = opts["row_indices"], opts["col_indices"]
    if opts["sampling"] == "rpcholesky" and (ridx is not None or cidx is not None):
        raise ValueError(
            "sampling='rpcholesky' chooses its own pivots: row_indices and col_indices must be None"
        )
    if cidx is not None:
        cidx = check_indices("col_indices", cidx, M, "columns")
        if opts["n_samples"] is not None and opts["n_samples"] != cidx.size:
            raise ValueError(
                f"n_samples={opts['n_samples']} does not match len(col_indices)={cidx.size}"
            )
        opts["n_samples"] = int(cidx.size)
    elif opts["n_samples"] is None:
        raise TypeError("n_samples (or col_indices) is required for method 'asym_nystrom'")
    m = check_int("n_samples", opts["n_samples"], 1, M, high_text=f"M = {M}")
    if ridx is not None:
        ridx = check_indices("row_indices", ridx, N, "rows")
        if opts["n_rows"] is not None and opts["n_rows"] != ridx.size:
            raise ValueError(f"n_rows={opts['n_rows']} does not match len(row_indices)={ridx.size}")
        opts["n_rows"] = int(ridx.size)
    elif opts["n_rows"] is None:
        opts["n_rows"] = min((2 if opts["core"] == "stable" else 1) * m, N)
    n = check_int("n_rows", opts["n_rows"], 1, N, high_text=f"N = {N}")
    opts.update(n_samples=m, n_rows=n, row_indices=ridx, col_indices=cidx)
    sizes = {"n_samples": m} if opts["sampling"] == "rpcholesky" else {"n_samples": m, "n_rows": n}
    check_sample_size(rank, sizes)
    return opts


def _select(src, opts, rank, rng):
    """The sample: given indices, uniform/norm (``sampling.basic``) or a pivoting sampler.

    Entries a sampler reads past the counting wrapper (it reports them in
    ``Selection.entries_read``) are added to the wrapper's count, so ``n_passes`` and
    ``entries_read`` hold everything read while choosing, never twice.
    """
    ridx, cidx = opts["row_indices"], opts["col_indices"]
    n, m, sampling = opts["n_rows"], opts["n_samples"], opts["sampling"]
    if sampling in ("uniform", "norm") or (ridx is not None and cidx is not None):
        # start-up: the sampling package (5 ms) loads on first use, as below
        from .sampling.basic import select_basic

        basic = sampling if sampling in ("uniform", "norm") else "uniform"
        return select_basic(src, n, m, sampling=basic, rng=rng, row_indices=ridx, col_indices=cidx)
    from .sampling import select_rows_cols  # imported here: the package is optional

    before = _entries_read(src)
    sel = select_rows_cols(src, n, m, sampling=sampling, rng=rng, rank=rank)
    unseen = int(sel.entries_read) - (_entries_read(src) - before)
    if unseen > 0:
        src.n_block_entries += unseen
    if ridx is not None:  # a given side wins over the sampler's choice
        sel.row_indices, sel.rows = np.asarray(ridx, np.int64), None
    if cidx is not None:
        sel.col_indices, sel.cols = np.asarray(cidx, np.int64), None
    return sel


def _rpcholesky(src, rank, n_pivots, rng, dtype, more=0):
    """``sampling="rpcholesky"``: the triplets of the joint-kernel factorisation; ``more``
    further ones (its next directions) come back as ``info["_starts"]`` for the certificate."""
    from .sampling import rpcholesky_svd  # imported here: the package is optional

    before = _entries_read(src)
    U, s, V, info = rpcholesky_svd(src, rank + more, n_pivots, rng=rng, dtype=dtype)
    if more:
        info["_starts"] = (V[:, rank:], U[:, rank:])
        U, s, V = U[:, :rank], s[:rank], V[:, :rank]
    unseen = int(info.get("entries_read", 0)) - (_entries_read(src) - before)
    if unseen > 0:
        src.n_block_entries += unseen
    info = {k: v for k, v in info.items() if k not in _OWN_KEYS}
    info["_row_weights"] = info.pop("row_residual", None)  # the certificate's, not info's
    # rpcholesky_svd pads past the factor's rank with zero triplets; hand back only the
    # computed ones, so that asym_nystrom pads them itself and warns
    k = int(np.count_nonzero(s > 0))
    U, s, V = np.asarray(U[:, :k], dtype), np.asarray(s[:k], dtype), np.asarray(V[:, :k], dtype)
    return U, s, V, k, False, info


def _sample_starts(C, R, U, V, width):
    """The certificate's first blocks ``(X0, Y0)`` (M x w, N x w) from the sample itself.

    ``X0``: the top ``width`` right singular vectors of the sampled rows outside the answer,
    ``R (I - V V^T)``; ``Y0``: the top left ones of the sampled columns, ``(I - U U^T) C``.
    The directions of ``G`` outside the answer that the sample saw are where a missed
    direction, and most of ``D = (I - U U^T) G (I - V V^T)``, sit: one pass on them bounds
    ``||D||`` by what they leave out (``power_certificate``'s split). Cost: the SVDs of an
    ``N x m`` and an ``n x M`` block, the core's own order. No randomness: the starts are a
    function of the sample, fixed before the certificate draws its probes.
    """
    Cd, Rd = np.asarray(C, np.float64), np.asarray(R, np.float64)
    if not (np.all(np.isfinite(Cd)) and np.all(np.isfinite(Rd))):
        return None  # the certificate's own Gaussian starts, and its products, say so
    # orthonormal bases: the paper's raw extension returns neither orthonormal U nor V
    Qu, Qv = _basis(U)[0], _basis(V)[0]
    Cd = Cd - Qu @ (Qu.T @ Cd)
    Rd = Rd - (Rd @ Qv) @ Qv.T
    return _top_directions(Rd.T, width), _top_directions(Cd, width)


def _top_directions(B, width):
    """The top ``width`` left singular directions of a tall ``B`` (unnormalised: the
    certificate orthonormalises them) from its small Gram matrix: ``p q^2`` flops against
    the SVD's several times that, and a start needs no accuracy."""
    Bs = B / max(float(np.max(np.abs(B), initial=0.0)), np.finfo(np.float64).tiny)
    _, E = linalg.eigh(Bs.T @ Bs, check_finite=False)
    return Bs @ E[:, ::-1][:, : min(width, E.shape[1])]


def _stable_core(C, R, ridx, cidx, rank, dtype):
    """``C (G[I, J])^+_eps R`` and its exact SVD (see "Stable core" in :func:`asym_nystrom`).

    Returns ``U, s, V, numerical_rank, certified, info``: ``certified`` when the oblique
    norm ``||F||`` alone keeps every value within ``CHECK_FACTOR`` of the truth.
    """
    N, m = C.shape
    n = R.shape[0]
    Uc, sc, _ = linalg.svd(C, full_matrices=False)
    kc = _floor(sc, max(N, m), dtype)
    Qc, sc = Uc[:, :kc], sc[:kc]
    if not kc:
        k, rel, F, AR = 0, 0.0, np.zeros((0, 0), dtype), np.zeros((0, R.shape[1]), dtype)
    else:
        # The core in C's basis: W V_C = Q_C[I, :] diag(sc), with W's singular values.
        a, w, bt = linalg.svd(Qc[ridx] * sc)  # a: n x n, its last n - kw columns span
        kw = _floor(w, max(n, kc), dtype)  # the rows' complement of range(W)
        AR = a[:, :kw].T @ R
        noise = _row_noise(R, a[:, kw:])
        # A sample that spans G (the rows show no residual beyond rounding) determines every
        # direction above the floor: the cut-off drops to rounding (the floor ``kw``).
        spans = kw < n and noise <= max(R.shape) * np.finfo(dtype).eps * linalg.norm(R)
        rcond = 0.0 if spans else STABLE_RCOND[np.dtype(dtype).char]
        k_eps = int(np.count_nonzero(w[:kw] > w[0] * rcond))
        # beyond the rank, only directions above the rows' noise as seen on the sampled
        # columns (see "The noise on the columns' scale"); the top ``rank`` are the answer
        # itself (dropping one loses a triplet for sure), down to the eps cut-off
        spread = _spread(R, cidx, AR[:k_eps], w[:k_eps])
        k = max(min(rank, k_eps), int(np.count_nonzero(w[:k_eps] > noise / (1.5 * spread))))
        F = (sc[:, None] * bt[:k].T) / w[:k]  # kc x k, C W_eps^+ = Q_C F a_k^T
        rel = noise / w[0] if w[0] > 0 else (np.inf if noise > 0 else 0.0)
    Z = F @ AR[:k]
    za, s, zbt = linalg.svd(Z, full_matrices=False)
    keep = min(rank, _floor(s, max(Z.shape), dtype))
    oblique = float(linalg.norm(F, 2)) if k else np.inf
    info = {"core_rank": int(k), "oblique_norm": oblique, "core_noise": float(rel)}
    return Qc @ za[:, :keep], s[:keep], zbt[:keep].T, int(kc), oblique <= CHECK_FACTOR, info


def _spread(R, cidx, AR, w):
    """``g_i = min(||a_i^T R|| / w_i, ||R||_F / ||R[:, J]||_F)``, at least 1 (see "The noise
    on the columns' scale" in :func:`asym_nystrom`)."""
    total, seen = float(linalg.norm(R)), float(linalg.norm(R[:, cidx]))
    average = total / seen if seen > 0 else 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        own = np.linalg.norm(AR, axis=1) / w
    return np.maximum(1.0, np.minimum(np.nan_to_num(own, nan=1.0, posinf=average), average))


def _row_noise(R, A_perp, n_iter=8, block=4):
    """``||A_perp^T R||_2``: the sampled rows' part outside ``range(W)``.

    ``A_perp`` (n x (n - kw)) spans the complement of ``range(W)`` among the n sampled rows.
    With more rows than core directions, ``A_perp^T R = A_perp^T E_I`` is the visible part
    of ``E_I = (G - Q_C Q_C^T G)[I]``, what the sampled columns cannot explain, and
    estimates the noise ``||a_i^T E_I||`` that inverting a core direction ``a_i`` lets in;
    0 when there is no complement (eps alone applies). Block power iteration (``n_iter``
    steps on ``block`` vectors, ``4 n_iter block n M`` flops: a fraction of the core's own
    ``n^2 M``) from a fixed start, so the core stays a function of the sample; it never
    overestimates the norm.
    """
    if A_perp.shape[1] == 0:
        return 0.0
    X = np.random.default_rng(0).standard_normal((R.shape[1], min(block, A_perp.shape[1])))
    X = X.astype(R.dtype)
    nu = 0.0
    for _ in range(n_iter):
        Y = linalg.qr(A_perp.T @ (R @ X), mode="economic")[0]
        X = R.T @ (A_perp @ Y)  # B^T Y: its norm is a lower bound on ||B||
        nu = max(nu, float(linalg.norm(X, 2)))
        X = linalg.qr(X, mode="economic")[0]
    return nu


def _paper_core(C, R, sel, rank, opts, shape, dtype):
    """Eq. (10) of Tao et al. on the block's top triplets (see "Paper core")."""
    N, M = shape
    ridx, cidx = sel.row_indices, sel.col_indices
    W = R[:, cidx]  # the block is part of R: no extra read
    n, m = W.shape
    if opts["orthogonalize"]:
        bu, bs, bvt = linalg.svd(W, full_matrices=False)
        kept = _floor(bs, max(n, m), dtype)
        k = min(rank, kept)
        E, F = C @ (bvt[:k].T / bs[:k]), R.T @ (bu[:, :k] / bs[:k])
        U, s, V = _orth_rank_r(E, F, bs[:k])
        U, s, V = U[:, :rank], s[:rank], V[:, :rank]
        info = {
            "scale": float(np.sqrt((N * M) / (n * m))),
            "core_rank": int(k),
            "block_singular_values": bs.astype(dtype),
        }
        return U, s, V, kept, info
    # Raw extension: the importance-weighted block D_r W D_c (uniform: sqrt(NM/(nm)) W).
    dr = 1 / np.sqrt(_probabilities(sel, "row_prob", ridx.size, N))
    dc = 1 / np.sqrt(_probabilities(sel, "col_prob", cidx.size, M))
    Wt = (dr[:, None] * W * dc).astype(dtype)
    bu, bs, bvt = linalg.svd(Wt, full_matrices=False)
    kept = _floor(bs, max(n, m), dtype)
    k = min(rank, kept)
    E = (C * dc) @ (bvt[:k].T / bs[:k])
    F = (R.T * dr) @ (bu[:, :k] / bs[:k])
    block = linalg.svd(W, compute_uv=False)
    info = {
        "scale": float(np.sqrt((N * M) / (n * m))),
        "core_rank": int(k),
        "block_singular_values": block.astype(dtype),
    }
    return _normalized(E), bs[:k], _normalized(F), kept, info


def _probabilities(sel, key, size, total):
    """Inclusion probabilities of the sample (uniform ``size / total`` when not reported)."""
    prob = sel.info.get(key)
    if prob is None:
        return np.full(size, size / total)
    return np.asarray(prob, dtype=np.float64)
