"""Dense kernel matrices ``G_ij = k(x_i, z_j)`` between two point sets, and centring."""

from __future__ import annotations

import math
import numbers

import numpy as np
import scipy.sparse as sp

from . import leaves as nb
from .ordered import count_nonfinite, dense_cross
from .ordered import one_blas_thread as _one_blas_thread
from .params import check_gamma, check_kernel, softmax_gamma
from .sparse_structure import checked_csr

__all__ = ["kernel_matrix", "center_matrix"]

#: the kernels with a gamma, by their Numba code (the others: "linear", "poly")
_KIND = {"rbf": nb.RBF, "sne": nb.SNE, "t": nb.T, "softmax": nb.SOFTMAX}
#: rows of one cross-product chunk of the fused dense builder: FUSED_CHUNK_BYTES of float64
#: and at most 1/FUSED_MIN_CHUNKS of the rows, within [FUSED_MIN_ROWS, FUSED_MAX_ROWS] (sizes
#: only, never the thread count). BLAS packs all of Z for every chunk, so chunks of a few rows
#: re-read Z every few rows: measured at N = M = 12000, d = 64 (one thread, G preallocated),
#: 10-row chunks (the old 1 MiB) cost 2.5 s, 128 rows 1.1 s, 256 rows 1.0 s
FUSED_CHUNK_BYTES = 32 << 20
FUSED_MIN_CHUNKS = 16
FUSED_MIN_ROWS = 16
FUSED_MAX_ROWS = 256
#: data whose largest |entry| lies within 2**+-SCALE_FREE_LOG2 is used as it is (float64
#: storage; float32: within 2**+-SCALE_FREE_LOG2_F32, so that |x|^2 and x.z stay far below
#: the float32 maximum, 2**128)
SCALE_FREE_LOG2 = 64
SCALE_FREE_LOG2_F32 = 32
#: largest accepted log2(data magnitude / gamma) in float64 arithmetic: with data scaled to
#: magnitude <= 1, a squared distance (<= 4 d) times (magnitude / gamma)^2 <= 2**930 stays far
#: from overflow
MAX_LOG2_RATIO = 465
#: float32 arithmetic (the tiles of a float32 lazy source): ``1 / gamma^2`` and every
#: ``|x - z|^2 / gamma^2`` must stay below 2**MAX_LOG2_EXPONENT_F32, so that they and the
#: smallest "t" value, ``1 / (1 + |x - z|^2 / gamma^2)``, are normal float32 numbers
MAX_LOG2_EXPONENT_F32 = 126


# --------------------------------------------------------------------------- validation
def _resolve_dtype(dtype, *arrays):
    """Output dtype: ``dtype`` if given, else float32 when every input is float32, else float64."""
    if dtype is not None:
        dtype = np.dtype(dtype)
        if dtype not in (np.float32, np.float64):
            raise ValueError(f"dtype must be float32, float64 or None, got {dtype}")
        return dtype
    if all(a.dtype == np.float32 for a in arrays):
        return np.dtype(np.float32)
    return np.dtype(np.float64)


def check_data(X, name, *, dtype=None):
    """Return ``X`` as a 2-d float ndarray or CSR matrix, checked non-empty and finite.

    A sparse ``X`` must have a sound index structure (:func:`.sparse_structure.checked_csr`).

    ``dtype=None`` keeps float32/float64 and turns anything else into float64.
    """
    if sp.issparse(X):
        if X.ndim != 2:
            raise ValueError(f"{name} must be 2-d, got ndim={X.ndim}")
        if not (np.issubdtype(X.dtype, np.number) or X.dtype == np.bool_) or np.issubdtype(
            X.dtype, np.complexfloating
        ):
            raise TypeError(f"{name} must hold real numbers, got dtype {X.dtype}")
        X = checked_csr(X, name)  # scipy's and the kernels' compiled loops trust the indices
        if dtype is None:
            dtype = X.dtype if X.dtype in (np.float32, np.float64) else np.float64
        X = X.astype(dtype, copy=False)
        if not X.has_canonical_format:
            # squared norms are read from the stored entries: duplicates must be summed first
            X = X.copy()
            X.sum_duplicates()
        data = X.data
    else:
        if isinstance(X, np.ma.MaskedArray) and np.ma.getmaskarray(X).any():
            raise TypeError(
                f"{name} is a masked array with {int(np.ma.count_masked(X))} masked entries; "
                f"a kernel has no notion of missing values and would read the hidden data: "
                f"fill them ({name}.filled(value)) or drop those rows first"
            )
        if isinstance(X, (str, bytes)) or X is None:
            raise TypeError(f"{name} must be an array or a scipy sparse matrix, got {type(X)}")
        X = np.asarray(X)
        if (
            X.dtype == object
            or not (np.issubdtype(X.dtype, np.number) or X.dtype == np.bool_)
            or np.issubdtype(X.dtype, np.complexfloating)
        ):
            raise TypeError(f"{name} must hold real numbers, got dtype {X.dtype}")
        if X.ndim != 2:
            raise ValueError(f"{name} must be 2-d, got ndim={X.ndim}")
        if dtype is None:
            dtype = X.dtype if X.dtype in (np.float32, np.float64) else np.float64
        X = np.ascontiguousarray(X, dtype=dtype)
        data = X
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"{name} is empty: shape {X.shape}")
    if not np.all(np.isfinite(data)):
        raise ValueError(f"{name} contains NaN or Inf")
    return X


def check_degree(degree):
    if isinstance(degree, bool) or not isinstance(degree, numbers.Real):
        raise TypeError(f"degree must be a real number >= 1, got {type(degree).__name__}")
    if not np.isfinite(degree) or degree < 1:
        raise ValueError(f"degree must be >= 1, got {degree}")
    return float(degree)


def check_coef0(coef0):
    if isinstance(coef0, bool) or not isinstance(coef0, numbers.Real):
        raise TypeError(f"coef0 must be a real number, got {type(coef0).__name__}")
    if not np.isfinite(coef0):
        raise ValueError(f"coef0 must be finite, got {coef0}")
    return float(coef0)


def _row_norms_sparse(X):
    d = X.data.astype(np.float64)
    out = np.zeros(X.shape[0])
    nz = np.diff(X.indptr) > 0
    if d.size:
        out[nz] = np.add.reduceat(d * d, X.indptr[:-1][nz])
    return out


def squared_norms(X):
    """Squared row norms in float64 (sparse: from the stored entries only)."""
    if sp.issparse(X):
        return _row_norms_sparse(X)
    Xf = X.astype(np.float64, copy=False)
    return np.einsum("ij,ij->i", Xf, Xf)


def cross(X, Z, dtype):
    """``X @ Z.T``: a CSR matrix (sorted indices) if both are sparse, else a dense C array."""
    if sp.issparse(X) and sp.issparse(Z):
        C = (X @ Z.T).tocsr()
        C.sort_indices()
        return C
    if sp.issparse(Z):
        return np.ascontiguousarray(np.asarray(Z @ np.asarray(X, dtype=dtype).T).T, dtype=dtype)
    if sp.issparse(X):
        return np.ascontiguousarray(np.asarray(X @ np.asarray(Z, dtype=dtype).T), dtype=dtype)
    X = np.ascontiguousarray(X, dtype=dtype)
    Z = np.ascontiguousarray(Z, dtype=dtype)
    C = np.empty((X.shape[0], Z.shape[0]), dtype=dtype)
    # numpy's multithreaded GEMM would round differently for each BLAS thread count
    with _one_blas_thread():
        dense_cross(X, Z.T, _chunk_rows(X.shape[0], Z.shape[0]), C)
    return C


def _chunk_rows(n, m):
    """Rows of one chunk of a dense cross product (see ``FUSED_CHUNK_BYTES``)."""
    return max(
        FUSED_MIN_ROWS, min(FUSED_MAX_ROWS, FUSED_CHUNK_BYTES // (8 * m), -(-n // FUSED_MIN_CHUNKS))
    )


def evaluate(X, Z, kernel, inv_g2, degree, coef0, dtype, xx=None, zz=None):
    """Uncentred kernel matrix plus per-row (shift, scale) for the distance kernels.

    Internal work horse of :func:`kernel_matrix`: inputs are already validated and, for
    the distance kernels, scaled by :func:`scale_for_bandwidth` (``inv_g2`` is
    ``1 / gamma^2`` on that scale). Returns ``(G, shift, scale)``; ``shift``/``scale`` are
    None for "linear"/"poly".
    """
    n, m = X.shape[0], Z.shape[0]
    if kernel in _KIND and not sp.issparse(X) and not sp.issparse(Z):
        X = np.ascontiguousarray(X, dtype=dtype)
        Z = np.asarray(Z, dtype=dtype)
        xx = squared_norms(X).astype(dtype) if xx is None else xx
        zz = squared_norms(Z).astype(dtype) if zz is None else zz
        G = np.empty((n, m), dtype=dtype)
        shift = np.empty(n, dtype=np.float64)
        scale = np.empty(n, dtype=np.float64)
        with _one_blas_thread():
            nb.dense_fused(
                G, X, Z.T, xx, zz, inv_g2, _KIND[kernel], shift, scale, _chunk_rows(n, m)
            )
        return G, shift, scale
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is reported by the caller
        C = cross(X, Z, dtype)
    if kernel in ("linear", "poly"):
        G = C.toarray().astype(dtype, copy=False) if sp.issparse(C) else C
        G = np.ascontiguousarray(G, dtype=dtype)
        if kernel == "poly":
            nb.poly_inplace(G, dtype.type(coef0), dtype.type(degree))
        return G, None, None
    xx = squared_norms(X).astype(dtype) if xx is None else xx
    zz = squared_norms(Z).astype(dtype) if zz is None else zz
    kind = _KIND[kernel]
    shift = np.empty(n, dtype=np.float64)
    scale = np.empty(n, dtype=np.float64)
    if sp.issparse(C) and kernel in ("sne", "rbf"):
        G = np.empty((n, m), dtype=dtype)
        zorder = np.argsort(zz, kind="stable")
        nb.sparse_exp_rows(
            G,
            C.indptr,
            C.indices,
            C.data.astype(dtype, copy=False),
            xx,
            zz,
            zorder,
            inv_g2,
            kernel == "sne",
            shift,
            scale,
        )
        return G, shift, scale
    G = C.toarray().astype(dtype, copy=False) if sp.issparse(C) else C
    G = np.ascontiguousarray(G, dtype=dtype)
    nb.dense_rows(G, xx, zz, inv_g2, kind, shift, scale)
    return G, shift, scale


def _max_abs(X):
    data = X.data if sp.issparse(X) else X
    return float(np.max(np.abs(data))) if data.size else 0.0


def _times_power_of_two(X, e):
    """``X * 2**e``: exact (no rounding) for every entry that stays a normal number."""
    if sp.issparse(X):
        X = X.copy()
        X.data = np.ldexp(X.data, e).astype(X.dtype, copy=False)
        return X
    return np.ldexp(X, e).astype(X.dtype, copy=False)


def translate_to_mean(X, Z, *, columns_only=False):
    """Dense ``X`` and ``Z`` translated by their common mean, in float64.

    Distances, and so the distance kernels, do not change under a common translation, but
    their rounding does: ``|x|^2 + |z|^2 - 2 x.z`` cancels about ``|x|^2 / |x - z|^2`` of its
    digits, and float32 storage keeps only 7. Points at ``100 + N(0, 1)`` in d = 64 lost
    2.6 of them (kernel values off by 3e-3 relative); about the mean they lose none.
    Sparse input is returned as it is (a translation would make it dense), and so are
    points whose mean or translate would overflow (magnitudes near the float64 maximum).

    ``columns_only`` (softmax) translates ``Z`` alone, by its own mean ``mu``: ``x . (z -
    mu) = x . z - x . mu`` changes each row by a constant, which the row normalisation
    removes, and the cross products (so their rounding) no longer carry ``Z``'s offset.

    Parameters
    ----------
    X, Z : ndarray or CSR matrix
        Validated, finite points with the same number of columns.
    columns_only : bool, default=False
        Translate ``Z`` only, by its own mean (``X`` is returned as it is).

    Returns
    -------
    X, Z : new translated arrays of the input dtypes, or the inputs unchanged
    """
    if sp.issparse(X) or sp.issparse(Z):
        return X, Z
    n, m = (0, 1) if columns_only else (X.shape[0], Z.shape[0])
    with np.errstate(over="ignore", invalid="ignore"):
        # weighted means of each set: neither sum of the (huge) coordinates can overflow
        mu = (m / (n + m)) * Z.mean(axis=0, dtype=np.float64)
        if n:
            mu = mu + (n / (n + m)) * X.mean(axis=0, dtype=np.float64)
        # one translation for both sets, exactly representable in both dtypes (distances
        # must not change); float32 points stay float32 (x - mu is exact near mu)
        mu = mu.astype(np.float32 if np.float32 in (X.dtype, Z.dtype) else np.float64)
        Xt = X if columns_only else X - mu.astype(X.dtype)
        Zt = Z - mu.astype(Z.dtype)
    if not (np.all(np.isfinite(Xt)) and np.all(np.isfinite(Zt))):
        return X, Z
    return Xt, Zt


def scale_for_bandwidth(X, Z, gamma, dtype=np.float64, arithmetic=np.float64, *, inner=False):
    """Points rescaled by a power of two where needed, and ``1 / gamma^2`` on that scale.

    The distance kernels depend on ``|x - z|^2 / gamma^2`` only. Data of extreme magnitude
    (largest ``|entry|`` outside ``2**+-64``; ``2**+-32`` when stored as float32), or a
    ``gamma`` far below it, would overflow ``|x|^2`` or ``1 / gamma^2``; both points are then
    multiplied by ``2**-e`` (exact) so that their largest entry is below 1, and ``gamma`` is
    measured on the same scale.

    Parameters
    ----------
    X, Z : ndarray or CSR matrix
        Validated, finite points.
    gamma : float
        Validated bandwidth (> 0).
    dtype : {float64, float32}, default=float64
        Dtype the points, their squared norms and cross products are stored in.
    arithmetic : {float64, float32}, default=float64
        Dtype of the kernel arithmetic: float32 for the tiles of a float32 lazy source, which
        hold ``1 / gamma^2`` and ``|x - z|^2 / gamma^2`` in float32 (:func:`kernel_matrix`
        works in float64 whatever its output dtype).
    inner : bool, default=False
        The kernel reads ``x . z / gamma`` (softmax) instead of ``|x - z|^2 / gamma^2``: the
        same checks hold with ``gamma`` in place of ``gamma^2`` (``magnitude^2 / gamma`` for
        ``(magnitude / gamma)^2``), and the factor returned is ``2**(2 e) / gamma``.

    Returns
    -------
    X, Z : the (possibly rescaled) points, same types and dtypes
    inv_g2 : float
        ``(2**e / gamma)^2`` with ``e`` the exponent applied (0 when unscaled); with
        ``inner``, ``2**(2 e) / gamma``.

    Raises
    ------
    ValueError
        If ``gamma`` is so small relative to the data that ``(magnitude / gamma)^2`` would
        overflow float64 (the kernel would be a hard nearest-neighbour assignment), or, in
        float32 arithmetic, that ``1 / gamma^2`` or ``|x - z|^2 / gamma^2`` would leave the
        float32 range (use float64 or a larger ``gamma``).
    """
    amax = max(_max_abs(X), _max_abs(Z))
    e = math.frexp(amax)[1] if amax > 0 else 0
    # log2 of magnitude / gamma, the kernel's scale (inner: of magnitude / sqrt(gamma))
    root = 2 if inner else 1
    log2_ratio = e - math.log2(gamma) / root
    free = SCALE_FREE_LOG2 if np.dtype(dtype) == np.float64 else SCALE_FREE_LOG2_F32
    if log2_ratio > MAX_LOG2_RATIO:
        what, hard = ("magnitude^2 / gamma", "argmax")
        if not inner:
            what, hard = ("(magnitude / gamma)^2", "nearest-neighbour")
        least = math.ldexp(1.0, root * (e - MAX_LOG2_RATIO))
        raise ValueError(
            f"gamma={gamma:.3g} is too small for data of magnitude {amax:.3g}: "
            f"{what} overflows float64 (the kernel would be a hard {hard} assignment); "
            f"use gamma >= {least:.3g} or rescale the data"
        )
    if np.dtype(arithmetic) == np.float64:
        unscaled = log2_ratio <= MAX_LOG2_RATIO - free
    else:
        unscaled = -(2 // root) * math.log2(gamma) <= MAX_LOG2_EXPONENT_F32
    if abs(e) <= free and unscaled:
        e = 0
    else:
        X = _times_power_of_two(X, -e)
        Z = _times_power_of_two(Z, -e)
    inv = 1.0 / gamma
    if inner:
        # x.z scales by 2**(-2 e): one power of two and one rounding (1 / gamma)
        inv_g2 = math.ldexp(inv, 2 * e) if math.isfinite(inv) else math.ldexp(1.0, 2 * e) / gamma
    else:
        r = math.ldexp(inv, e) if math.isfinite(inv) else math.ldexp(1.0, e) / gamma
        inv_g2 = r * r
    if np.dtype(arithmetic) == np.float32:
        _check_float32_exponents(X, Z, gamma, amax, inv_g2, inner)
    return X, Z, inv_g2


def prepare_points(X, Z, kernel, gamma, dtype=np.float64, arithmetic=np.float64):
    """The points a kernel with a gamma is evaluated on, and its exponent factor.

    :func:`translate_to_mean` (softmax: ``Z`` alone) then :func:`scale_for_bandwidth`
    (softmax: ``inner``): returns ``(X, Z, inv_g2)``, ``inv_g2`` being ``1 / gamma^2``
    (softmax: ``1 / gamma``) on the scale of the returned points.
    """
    inner = kernel == "softmax"
    X, Z = translate_to_mean(X, Z, columns_only=inner)
    return scale_for_bandwidth(X, Z, gamma, dtype, arithmetic, inner=inner)


def _check_float32_exponents(X, Z, gamma, amax, inv_g2, inner=False):
    """Raise unless ``inv_g2`` and ``|x - z|^2 inv_g2`` (of the scaled points) stay below
    ``2**MAX_LOG2_EXPONENT_F32``; ``|x - z|^2 <= (|x| + |z|)^2`` bounds the distances.

    ``inner`` (softmax, ``inv_g2 = 1 / gamma``): the exponents are differences of cross
    products, ``|x.z - x.z'| <= 2 |x| max |z| <= (|x| + |z|)^2``: the same bound holds."""
    d_max = (
        math.sqrt(float(np.max(squared_norms(X)))) + math.sqrt(float(np.max(squared_norms(Z))))
    ) ** 2
    limit = math.ldexp(1.0, MAX_LOG2_EXPONENT_F32)
    top = max(d_max, 1.0) * inv_g2  # also holds 1 / gamma^2 itself (on the scale) in range
    if top <= limit:
        return
    gamma_min = gamma * (top / limit if inner else math.sqrt(top / limit)) * (1.0 + 1e-6)
    what = "|x.z| / gamma" if inner else "|x - z|^2 / gamma^2"
    raise ValueError(
        f"gamma={gamma:.3g} is too small for data of magnitude {amax:.3g} in float32 "
        f"arithmetic: {what} reaches about {top:.3g}, beyond the float32 range "
        f"(kept below 2^{MAX_LOG2_EXPONENT_F32} = {limit:.3g}); use dtype=float64 or "
        f"gamma >= {gamma_min:.3g}"
    )


def check_finite_kernel(G, kernel, degree):
    """Raise if a "linear"/"poly" kernel matrix (or product) has non-finite entries."""
    if kernel in ("linear", "poly") and count_nonfinite(G):
        what = "x.z" if kernel == "linear" else f"(x.z + coef0)**{degree:g}"
        raise ValueError(
            f"kernel {kernel!r} gives non-finite values: {what} overflows the float range"
            + (
                ""
                if kernel == "linear" or float(degree).is_integer()
                else " or is not real (a non-integer degree of a negative base)"
            )
            + "; rescale X and Z"
            + ("" if kernel == "linear" else " or lower degree")
        )


# --------------------------------------------------------------------------- public API
def check_point_pair(X, Z, kernel, gamma, dtype):
    """Validate the two point sets of a kernel ``k(x_i, z_j)``, its name, gamma and dtype.

    Returns ``(X, Z, kernel, gamma, dtype)`` as :func:`kernel_matrix` uses them: ``X`` and
    ``Z`` checked by :func:`check_data` and with the same number of columns, the canonical
    kernel name and the resolved dtype. ``gamma`` is required for the kernels with a
    bandwidth (rbf, sne, t), defaults to ``sqrt(d)`` for softmax (:func:`softmax_gamma`)
    and is checked whenever given (the others ignore it). For "linear" and "poly" the
    points must also fit in ``dtype`` (they are cast to it unscaled).
    """
    kernel = check_kernel(kernel)
    X = check_data(X, "X")
    Z = check_data(Z, "Z")
    if X.shape[1] != Z.shape[1]:
        raise ValueError(
            f"X and Z must have the same number of features (columns): X has {X.shape[1]}, "
            f"Z has {Z.shape[1]}"
        )
    dtype = _resolve_dtype(dtype, X, Z)
    if kernel == "softmax" and gamma is None:
        gamma = softmax_gamma(X.shape[1])
    if kernel in _KIND:
        if gamma is None:
            raise ValueError(f"gamma is required for kernel {kernel!r}")
    else:
        # the distance kernels rescale the points first; these take them as they are
        _check_cast(X, "X", dtype)
        _check_cast(Z, "Z", dtype)
    if gamma is not None:  # ignored by linear/poly, but refused if bad as everywhere else
        gamma = check_gamma(gamma)
    return X, Z, kernel, gamma, dtype


def _check_cast(X, name, dtype):
    """Raise if the finite points ``X`` overflow when cast to ``dtype`` (float64 to float32)."""
    amax = _max_abs(X)
    with np.errstate(over="ignore"):
        if np.isfinite(amax) and not np.isfinite(np.dtype(dtype).type(amax)):
            raise ValueError(
                f"{name} has entries up to {amax:.3g}, beyond the {np.dtype(dtype)} range "
                f"({np.finfo(dtype).max:.3g}): the points are cast to dtype={np.dtype(dtype)} "
                f"before the kernel is evaluated; use dtype=float64 or rescale {name}"
            )


def kernel_matrix(X, Z, kernel="sne", *, gamma=None, degree=2, coef0=1.0, center=False, dtype=None):
    """Dense kernel matrix ``G[i, j] = k(x_i, z_j)`` between the rows of ``X`` and of ``Z``.

    Parameters
    ----------
    X : array-like or scipy sparse matrix of shape (N, d)
        Row points ``x_i``. Sparse input is never densified.
    Z : array-like or scipy sparse matrix of shape (M, d)
        Column points ``z_j``.
    kernel : {"sne", "rbf", "t", "linear", "poly", "softmax"}, default="sne"
        ``"rbf"``: ``exp(-|x - z|^2 / gamma^2)``; ``"sne"``: the rbf row normalised to sum 1
        over all ``z_j``; ``"t"``: ``(1 + |x - z|^2 / gamma^2)^-1`` normalised per row;
        ``"linear"``: ``x . z``; ``"poly"``: ``(x . z + coef0) ** degree``; ``"softmax"``:
        ``exp(x . z / gamma)`` normalised per row (softmax attention, queries ``X``, keys
        ``Z``).
    gamma : float
        Bandwidth (> 0) of "sne", "rbf" and "t", required for them; temperature of
        "softmax", default ``sqrt(d)`` (scaled dot-product attention); ignored by the others
        (but refused, like everywhere, if not a finite number > 0).
    degree : float, default=2
        Degree (>= 1) of "poly". Values that overflow (or, for a non-integer degree, that
        are not real because ``x.z + coef0 < 0``) raise ``ValueError``.
    coef0 : float, default=1.0
        Offset of "poly".
    center : bool, default=False
        Return ``H_N G H_M`` with ``H_n = I_n - 11^T / n`` (zero row and column means).
    dtype : {None, float32, float64}, default=None
        Output dtype. None gives float32 when both inputs are float32, else float64.

    Returns
    -------
    G : ndarray of shape (N, M)

    Notes
    -----
    Squared distances are ``|x|^2 + |z|^2 - 2 x.z`` with the cross term from the product
    ``X @ Z.T`` (sparse product for two sparse inputs; for two dense inputs BLAS on chunks of
    rows that stay in cache, fused with the kernel so that ``G`` is written once; BLAS is
    held to one thread meanwhile, the Numba threads being the parallel ones); values that
    cancellation makes negative are clipped at 0. For the distance kernels two dense point
    sets are first translated by their common mean (distances do not change, their rounding
    shrinks: float32 points far from the origin keep their accuracy), and data of extreme
    magnitude is scaled by a power of two (exact), so ``|x|^2`` cannot overflow. The
    element-wise work runs in Numba kernels parallel over rows (``prange``) with each row's
    sums computed serially, so the result does not depend on the number of threads. SNE
    rows are shifted by their smallest distance before ``exp`` (log-sum-exp), so they stay
    finite and sum to 1 for any ``gamma > 0``; softmax rows by their largest cross product
    (``x . z / gamma`` of 1e300 is fine), after ``Z`` is translated by its mean (each row
    changes by a constant that the normalisation removes; the cross products lose the
    offset's rounding). For two sparse inputs the exp kernels
    factorise over the structural zeros of ``X @ Z.T`` (one ``exp`` per nonzero, not per
    entry), so building ``G`` costs about as much as writing it. Peak memory: ``G`` plus
    ``X @ Z.T`` when sparse (plus float64 copies of dense points).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).normal(size=(5, 3))
    >>> G = kernel_matrix(X, X, "sne", gamma=1.0)
    >>> np.allclose(G.sum(axis=1), 1.0)
    True
    """
    X, Z, kernel, gamma, dtype = check_point_pair(X, Z, kernel, gamma, dtype)
    degree = check_degree(degree)
    coef0 = check_coef0(coef0)
    if not isinstance(center, (bool, np.bool_)):
        raise TypeError(f"center must be a bool, got {type(center).__name__}")
    inv_g2 = None
    if kernel in _KIND:
        X, Z, inv_g2 = prepare_points(X, Z, kernel, gamma, dtype)
    G, _, _ = evaluate(X, Z, kernel, inv_g2, degree, coef0, dtype)
    check_finite_kernel(G, kernel, degree)
    if center:
        _center_inplace(G)
    return G


def _center_inplace(G):
    n, m = G.shape
    rmean = nb.row_sums(G) / m
    cmean = nb.col_sums(G) / n
    gmean = nb.ordered_sum(rmean) / n
    nb.center_inplace(G, rmean.astype(G.dtype), cmean.astype(G.dtype), G.dtype.type(gmean))
    return G


def center_matrix(G):
    """Double centring ``H_N G H_M`` of a dense matrix (``H_n = I_n - 11^T / n``).

    Subtracts the row means and the column means and adds back the grand mean, so every
    row and column of the result has mean zero (up to rounding).

    Parameters
    ----------
    G : array-like of shape (N, M)
        Finite real matrix; float32 stays float32, other dtypes become float64.

    Returns
    -------
    Gc : ndarray of shape (N, M)
        A new array; ``G`` is not modified.
    """
    G = check_data(G, "G")
    if sp.issparse(G):
        raise TypeError("G must be dense: centring makes a sparse matrix dense")
    return _center_inplace(G.copy())
