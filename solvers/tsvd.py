"""Truncated SVD by a Krylov eigensolver: :func:`scipy.sparse.linalg.svds` behind the common API.

Three things happen around ``svds``:

* **A source's own exact path.** A matrix source may offer the optional protocol member
  ``exact_svd(rank, *, random_state=None, tol=0.0, maxiter=None, ncv=None)``, returning an
  exact top-``rank`` SVD (an object that unpacks as ``U, s, V``, optionally with an ``info``
  dict). With the default ARPACK backend, :func:`tsvd` calls it instead of running ARPACK on
  the source's products (``ksvd_bench``'s structured kernel source does: an exact compression
  and its own one-vector products). ``info["exact_path"]`` says which path ran.
* **Scale.** ARPACK works on the Gram operator ``G^T G``, whose entries underflow for
  ``|G| < 1e-154`` and overflow for large ones. Concrete inputs are scaled by a power of two
  (exact: no rounding changes) when their largest entry is far from 1.
* **Zero matrices** get ``s = 0`` and orthonormal vectors, as :func:`~solvers.rsvd` gives,
  instead of ARPACK's "Starting vector is zero" error.
"""

from __future__ import annotations

import math
import re
import time
import warnings

import numpy as np
from scipy import linalg
from scipy.sparse.linalg import ArpackError, ArpackNoConvergence, LinearOperator, svds

from ._result import SVDResult, finish
from ._source import DenseSource, OperatorSource, SparseSource
from .scaling import SAFE_EXPONENT, power_of_two_scale
from .validation import BACKENDS, Tracked, check_args, check_choice, check_int, check_real

__all__ = ["tsvd"]

#: What scipy's ``lobpcg`` warns when it stops short of ``tol`` (at ``maxiter``, or broken down).
_LOBPCG_SHORT = r"(?s).*not reaching the requested tolerance"

#: LOBPCG's iteration cap when ``maxiter`` is None (scipy's is 20). Measured on standard
#: normal float32 operators (60 x 40 to 1000 x 700, rank 5 and 10): 20 iterations left
#: triplet residuals up to 3e-3 s_1, 50 reached 6e-5 s_1 or better (float64: 1e-6 at
#: 50, 3e-9 at 100).
LOBPCG_MAXITER = 100


def _operator(checked, scale=1.0, work_dtype=np.float64):
    """A LinearOperator over ``scale * G`` in ``work_dtype``, counting products in a fresh tracker.

    ARPACK in single precision converges poorly and to a looser tolerance, so the solve runs in
    float64. Concrete float32 inputs are converted once (not at every product). A
    LinearOperator gets the solver's float64 vectors as they are: rounding them to its float32
    dtype first would make every product float32-accurate, and PROPACK at ``tol=0`` then never
    converges. Other lazy float32 sources are fed float32 blocks and their products are upcast.
    ``scale`` is a power of two, so scaling is exact. ``work_dtype=float32`` (PROPACK's
    fallback) runs the solver in single precision, as SciPy does for float32 operators.
    """
    src = checked.source
    base = src.source
    if isinstance(base, DenseSource) and base.dtype != np.float64:
        base = DenseSource(base.G.astype(np.float64))
    elif isinstance(base, SparseSource) and base.dtype != np.float64:
        base = SparseSource(base.csr.astype(np.float64))
    tracker = Tracked(base, src.check_finite)
    in_dtype = np.float64 if isinstance(base, OperatorSource) else np.dtype(base.dtype)
    N, M = tracker.shape

    def matmat(X):
        out = np.asarray(tracker.matmat(np.asarray(X, dtype=in_dtype)), dtype=work_dtype)
        return out * scale if scale != 1.0 else out

    def rmatmat(Y):
        out = np.asarray(tracker.rmatmat(np.asarray(Y, dtype=in_dtype)), dtype=work_dtype)
        return out * scale if scale != 1.0 else out

    op = LinearOperator(
        (N, M),
        matvec=lambda x: matmat(x.reshape(M, 1)).ravel(),
        rmatvec=lambda y: rmatmat(y.reshape(N, 1)).ravel(),
        matmat=matmat,
        rmatmat=rmatmat,
        dtype=work_dtype,
    )
    return op, tracker


def _orthonormal(n, k, rng):
    """``k`` random orthonormal columns of length ``n`` (the vectors of a zero matrix)."""
    Q, R = np.linalg.qr(rng.standard_normal((n, k)))
    return Q * np.where(np.diag(R) < 0, -1.0, 1.0)


def _zero_answer(shape, rank, rng):
    """Singular triplets of the zero matrix: ``s = 0``, any orthonormal ``U`` and ``V``."""
    return _orthonormal(shape[0], rank, rng), np.zeros(rank), _orthonormal(shape[1], rank, rng)


def _default_ncv(rank, kmin):
    """eigsh's default Lanczos basis size when ``ncv`` is None."""
    return min(max(2 * rank + 1, 20), kmin)


def _run_svds(op, rank, opts, rng, dtype=np.float64):
    kwargs = {"k": rank, "tol": opts["tol"], "maxiter": opts["maxiter"], "rng": rng}
    if opts["backend"] == "arpack":
        kwargs["ncv"] = opts["ncv"]
        kwargs["v0"] = rng.standard_normal(min(op.shape))
    lobpcg = opts["backend"] == "lobpcg"
    if lobpcg and opts["maxiter"] is None:
        kwargs["maxiter"] = LOBPCG_MAXITER
    try:
        with warnings.catch_warnings(record=True) as caught:
            # LOBPCG reports a solve that stopped short only by this warning, and returns its
            # unconverged block as if it were the answer: recorded here and judged below.
            warnings.filterwarnings("always", message=_LOBPCG_SHORT, category=UserWarning)
            U, s, Vt = svds(op, solver=opts["backend"], **kwargs)
    except ArpackNoConvergence as exc:
        raise _no_convergence(opts, exc) from exc
    except np.linalg.LinAlgError as exc:
        if opts["maxiter"] is None or "converge" not in str(exc):
            raise
        raise _no_convergence(opts, exc) from exc
    short = [w for w in caught if _is_lobpcg_short(w)]
    for w in caught:  # everything else is the caller's to see
        if not _is_lobpcg_short(w):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    V = Vt.T
    if short:
        residual, allowed = _lobpcg_residual(op, U, s, V, dtype)
        if opts["tol"] > 0 or not residual <= allowed:
            why = " ".join(str(short[-1].message).split())
            if opts["tol"] == 0:
                why += (
                    f"; the triplet residual {residual:.3g} is above sqrt(eps) s_1 = {allowed:.3g}"
                    f" ({np.dtype(dtype).name})"
                )
            raise _no_convergence(opts, why)
    return U, s, V


def _is_lobpcg_short(w):
    return issubclass(w.category, UserWarning) and re.match(_LOBPCG_SHORT, str(w.message))


def _lobpcg_residual(op, U, s, V, dtype):
    """``(max_i max(||G v_i - s_i u_i||, ||G^T u_i - s_i v_i||), sqrt(eps(dtype)) s_1)``.

    The test of a ``tol=0`` LOBPCG solve (two products, counted). LOBPCG works on the Gram
    operator, whose eigenvectors a solve in ``dtype`` determines to about ``sqrt(eps)``
    (the Gram squares the values, so its residual of order ``eps s_1^2`` is a residual of
    order ``sqrt(eps) s_1`` for the triplets); its own test at ``tol=0`` asks for an exact
    zero and never passes. A triplet residual within ``sqrt(eps) s_1`` puts every value
    within that of a singular value of ``G`` (Weyl), which is all the dtype allows.
    """
    s = np.asarray(s, dtype=np.float64)
    left = np.linalg.norm(np.asarray(op.matmat(V)) - U * s, axis=0)
    right = np.linalg.norm(np.asarray(op.rmatmat(U)) - V * s, axis=0)
    residual = float(np.max(np.maximum(left, right), initial=0.0))
    top = float(np.max(np.abs(s), initial=0.0))
    return residual, float(np.sqrt(np.finfo(dtype).eps)) * top


def _no_convergence(opts, exc):
    """The error for a solve that ran out of iterations, naming ``maxiter`` (and ``tol``)."""
    cap = "its default cap" if opts["maxiter"] is None else f"maxiter={opts['maxiter']}"
    return RuntimeError(
        f"tsvd: backend={opts['backend']!r} did not converge to tol={opts['tol']} within "
        f"{cap} iterations ({exc}); raise maxiter (None uses the backend's default), loosen "
        "tol, or use method='block_krylov'/'rsvd'"
    )


def _full_rank(chk):
    """All ``min(N, M)`` triplets: G formed by one product with the identity, then LAPACK.

    A Krylov solver asked for the whole spectrum gains nothing over a dense SVD, and
    PROPACK's Lanczos bidiagonalisation breaks down when G is rank-deficient (a centred
    kernel is), so the full-rank case never goes to ``svds``.
    """
    src = chk.source
    N, M = src.shape
    if M <= N:
        dense = np.asarray(src.matmat(np.eye(M, dtype=chk.dtype)), dtype=np.float64)
    else:
        dense = np.asarray(src.rmatmat(np.eye(N, dtype=chk.dtype)), dtype=np.float64).T
    U, s, Vt = linalg.svd(dense, full_matrices=False, check_finite=False)
    return U, s, Vt.T


def _safe_magnitude(s):
    """Whether the largest value found is finite and within ``2^+-SAFE_EXPONENT``."""
    x = float(np.max(np.abs(s)))
    return bool(np.isfinite(x)) and x > 0 and abs(math.frexp(x)[1]) <= SAFE_EXPONENT


def _gram_vanished(exc):
    return isinstance(exc, ArpackError) and "Starting vector is zero" in str(exc)


def _solve_lazy(chk, rng):
    """``svds`` on a lazy source, recovering when the Gram operator underflows or overflows.

    ARPACK stops with "Starting vector is zero" when ``G^T G v`` vanishes, PROPACK returns
    zero vectors and LOBPCG wrong values: ``G`` is zero, or so small that the squares of its
    entries underflow. Entries above about ``1e154`` make ``G^T G v`` overflow, which the
    finiteness check of the products reports. Whenever that happens or the values found are
    far from 1, one product with random vectors decides: a zero ``G`` gets the zero answer,
    any other is solved again scaled by a power of two (and gets the zero answer if ARPACK
    still finds ``G^T G v = 0``: ``G`` is then zero up to the rounding of its products).
    PROPACK on a float32 source whose products are only float32-accurate (an operator that
    rounds its input) does not converge in double precision: it is run again in single
    precision, as SciPy runs it.
    """
    op, tracker = _operator(chk)
    try:
        U, s, V = _run_svds(op, chk.rank, chk.options, rng, chk.dtype)
        if _safe_magnitude(s):
            return U, s, V, tracker, 1.0
        failure = None
    except np.linalg.LinAlgError:
        if chk.options["backend"] != "propack" or chk.dtype != np.float32:
            raise
        op, single = _operator(chk, work_dtype=np.float32)
        U, s, V = _run_svds(op, chk.rank, chk.options, rng, chk.dtype)
        single.n_matvec += tracker.n_matvec  # the double-precision attempt counts too
        single.n_products += tracker.n_products
        return U, s, V, single, 1.0
    except (ArpackError, ValueError) as exc:
        # ValueError: a product came back non-finite (overflow of G^T G v, or a bad G).
        if isinstance(exc, ArpackError) and not _gram_vanished(exc):
            raise
        failure = exc
    N, M = op.shape
    probe = op.matmat(rng.standard_normal((M, min(M, 4))))  # raises if G itself is not finite
    amax = float(np.max(np.abs(probe)))
    if amax == 0.0:
        return (*_zero_answer((N, M), chk.rank, rng), tracker, 1.0)
    scale = math.ldexp(1.0, -math.frexp(amax)[1])
    if scale == 1.0 and failure is not None and not _gram_vanished(failure):
        raise failure
    op, scaled = _operator(chk, scale)
    scaled.n_matvec += tracker.n_matvec  # the first attempt and the probe count too
    scaled.n_products += tracker.n_products
    try:
        U, s, V = _run_svds(op, chk.rank, chk.options, rng, chk.dtype)
    except ArpackError as exc:
        if not _gram_vanished(exc):
            raise
        # Products of unit size still give G^T G v = 0: G is zero up to the rounding of its
        # own products (a centred kernel of identical points, say).
        return (*_zero_answer((N, M), chk.rank, rng), scaled, 1.0)
    return U, s, V, scaled, scale


def _solve(chk, rng):
    """``(U, s, V, tracker, scale)`` with ``s`` already divided by ``scale``."""
    amax = chk.amax  # measured by check_args, which leaves tsvd's G unscaled
    if amax is None:
        U, s, V, tracker, scale = _solve_lazy(chk, rng)
    else:
        if amax == 0.0:
            U, s, V = _zero_answer(chk.source.shape, chk.rank, rng)
            return U, s, V, Tracked(chk.source.source, False), 1.0
        scale = power_of_two_scale(amax)
        op, tracker = _operator(chk, scale)
        U, s, V = _run_svds(op, chk.rank, chk.options, rng, chk.dtype)
    return U, np.asarray(s) / scale, V, tracker, scale


def _exact_from_source(exact_svd, chk):
    """Call the source's ``exact_svd`` and check what it returns."""
    opts = chk.options
    res = exact_svd(
        chk.rank, random_state=chk.rng, tol=opts["tol"], maxiter=opts["maxiter"], ncv=opts["ncv"]
    )
    U, s, V = (np.asarray(a) for a in res)
    N, M = chk.source.shape
    want = {"U": (N, chk.rank), "s": (chk.rank,), "V": (M, chk.rank)}
    for name, arr in zip(want, (U, s, V), strict=True):
        if arr.shape != want[name]:
            raise ValueError(
                f"G.exact_svd(rank={chk.rank}) returned {name} of shape {arr.shape}, "
                f"expected {want[name]}"
            )
    return U, s, V, dict(getattr(res, "info", None) or {})


def tsvd(G, rank, *, random_state=None, backend="arpack", tol=0.0, maxiter=None, ncv=None):
    """Top singular triplets by :func:`scipy.sparse.linalg.svds`, or by the source's exact path.

    Parameters
    ----------
    G : ndarray, sparse matrix, LinearOperator or matrix source of shape (N, M)
        Only ``matmat``/``rmatmat`` are used, or the optional member ``exact_svd`` (below).
    rank : int
        Number of triplets; ``rank < min(N, M)`` for ``"arpack"`` and ``"lobpcg"``.
    random_state : None, int or numpy.random.Generator, default=None
        Seeds the start vector (ARPACK) or block (LOBPCG, PROPACK), so runs repeat exactly.
    backend : {"arpack", "propack", "lobpcg"}, default="arpack"
        The ``solver`` of ``svds``.
    tol : float, default=0.0
        Convergence tolerance passed to ``svds`` (0 means machine precision). LOBPCG at 0
        follows the accuracy of ``G``'s dtype instead: it runs to its cap and accepts the
        block when every triplet residual ``max(||G v_i - s_i u_i||, ||G^T u_i - s_i v_i||)``
        is at most ``sqrt(eps) s_1`` (LOBPCG works on the Gram operator, which squares the
        values; two more products, counted).
    maxiter : int or None, default=None
        Iteration cap passed to ``svds``; None is the backend's default, for LOBPCG
        ``LOBPCG_MAXITER`` (100; scipy's 20 leaves float32 operators short). A solve that does
        not converge within it raises ``RuntimeError`` naming ``maxiter`` (not ARPACK's own
        exception, nor LOBPCG's warning over an unconverged answer; LOBPCG also stops so when
        its block breaks down, e.g. on a matrix of rank close to ``rank``).
    ncv : int or None, default=None
        Lanczos basis size (ARPACK only), ``rank < ncv < min(N, M)``;
        None uses ARPACK's ``min(max(2 * rank + 1, 20), min(N, M))``.

    Returns
    -------
    SVDResult
        ``info["effort"]`` is the Lanczos basis size ``ncv`` for ARPACK and the number of
        products with ``G`` or ``G.T`` for the other backends; ``info["backend"]``,
        ``info["tol"]``, ``info["ncv"]`` and ``info["exact_path"]`` (``"svds"``,
        ``"source"`` or ``"dense"``) are added. On the source's exact path ``info["n_matvec"]``,
        ``info["n_products"]`` and ``info["n_passes"]`` are the source's own counts (vectors
        multiplied and product calls on the operator it solved, which may be an exact
        compression of ``G``: each such call costs at most one product with ``G``), and
        ``info["source_info"]`` holds the rest of what it reported.

    Notes
    -----
    ``svds`` works on the Gram operator ``G.T @ G`` (or ``G @ G.T``, the smaller one), so
    each iteration costs one product with ``G`` and one with ``G.T``. The solve runs in
    float64 whatever the input (ARPACK in single precision stalls); float32 input gives a
    float32 result cast at the end. ``svds`` returns values in ascending order; they are
    reordered descending here.

    *Exact path.* With ``backend="arpack"``, a source (not an array or LinearOperator) that
    has a method ``exact_svd(rank, *, random_state, tol, maxiter, ncv)`` is asked for the
    answer instead. The method must return the exact top-``rank`` triplets to ARPACK's
    tolerance ``tol`` (it may use any algorithm, e.g. ARPACK on an exactly compressed
    operator), as an object that unpacks as ``U, s, V`` (shapes checked) and may carry an
    ``info`` dict with ``n_matvec`` and ``n_passes``. Other backends always run ``svds``.

    *Full rank.* ``rank = min(N, M)`` (allowed with ``backend="propack"``) asks for the
    whole spectrum: G is formed by one product with the identity (``min(N, M)`` vectors,
    one pass) and decomposed by LAPACK, ``info["exact_path"] = "dense"``. (PROPACK itself
    breaks down there on a rank-deficient G, a centred kernel for one.)

    *Zero and tiny matrices.* A zero ``G`` gives ``s = 0`` and orthonormal ``U``, ``V``
    (every backend). Dense and sparse inputs whose largest entry is outside
    ``[2^-200, 2^200]`` are solved scaled by a power of two; for lazy sources, when ARPACK
    finds the Gram operator exactly zero, one product with random vectors decides between
    a zero answer and a scaled solve (counted in ``n_matvec``).

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
        "tsvd",
        G,
        rank,
        random_state,
        _validate,
        rescale=False,
        backend=backend,
        tol=tol,
        maxiter=maxiter,
        ncv=ncv,
    )
    rank = chk.rank
    # the options as _validate checked them, by name from here on
    backend = chk.options["backend"]
    ncv = chk.options["ncv"]
    tol = chk.options["tol"]
    kmin = min(chk.source.shape)
    arpack = backend == "arpack"
    ncv_used = (ncv or _default_ncv(rank, kmin)) if arpack else None
    exact_svd = getattr(chk.source.source, "exact_svd", None) if arpack else None
    if exact_svd is not None:
        U, s, V, src_info = _exact_from_source(exact_svd, chk)
        result: SVDResult = finish(
            U,
            s,
            V,
            method="tsvd",
            effort=ncv_used,
            tracker=chk.source,
            t0=t0,
            dtype=chk.dtype,
            backend="arpack",
            tol=tol,
            ncv=ncv_used,
            exact_path="source",
            source_info=src_info,
        )
        # The products ran inside the source, past the tracker: report its own counts.
        n_products = int(src_info.get("n_passes", 0))
        result.info.update(
            n_matvec=int(src_info.get("n_matvec", 0)),
            n_products=n_products,
            n_passes=float(n_products),
        )
        return result

    if rank == kmin:  # only PROPACK is allowed here (see _validate)
        (U, s, V), tracker, scale, path = _full_rank(chk), chk.source, 1.0, "dense"
    else:
        U, s, V, tracker, scale = _solve(chk, chk.rng)
        path = "svds"
    effort = ncv_used if arpack else tracker.n_matvec
    return finish(
        U,
        s,
        V,
        method="tsvd",
        effort=effort,
        tracker=tracker,
        t0=t0,
        dtype=chk.dtype,
        backend=backend,
        tol=tol,
        ncv=ncv_used,
        exact_path=path,
        scale=scale,
    )


def _validate(opts, rank, shape):
    """Options of :func:`tsvd` (called by ``check_args`` after the common checks)."""
    kmax = min(shape)
    opts["backend"] = backend = check_choice("backend", opts["backend"], BACKENDS)
    opts["tol"] = check_real("tol", opts["tol"], 0.0)
    if opts["maxiter"] is not None:
        opts["maxiter"] = check_int("maxiter", opts["maxiter"], 1)
    if backend != "propack" and rank >= kmax:
        raise ValueError(
            f"rank must be < min(N, M) = {kmax} for backend={backend!r} "
            f"(got rank={rank}); use backend='propack' or a dense SVD"
        )
    if opts["ncv"] is not None:
        if backend != "arpack":
            raise ValueError(f"ncv applies only to backend='arpack', not {backend!r}")
        opts["ncv"] = check_int(
            "ncv", opts["ncv"], rank + 1, kmax - 1, high_text=f"min(N, M) - 1 = {kmax - 1}"
        )
    return opts
