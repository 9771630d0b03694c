"""Names, defaults and parameter checks shared by every kernel builder."""

from __future__ import annotations

import math
import numbers

import numpy as np
import scipy.sparse as sp

from solvers import check_choice
from solvers.scaling import power_of_two_scale

from .sparse_structure import checked_csr

KERNELS = ("sne", "rbf", "t", "linear", "poly", "softmax")
#: kernels whose matrix is exp(-|x - z|^2 / gamma^2) up to row/column scalings
EXP_KERNELS = ("sne", "rbf")
#: the compatibility maps of the paper's Algorithm 2 (a0, a1, a2) and the square case
COMPATS = ("pinv", "pca", "random", None)


def check_kernel(kernel):
    """The kernel's canonical name (case-insensitive, ``solvers.check_choice``)."""
    return check_choice("kernel", kernel, KERNELS)


def structured_kernel_error(kernel):
    """The ``ValueError`` of a kernel the structured source has no form for.

    The structured source (:mod:`ksvd_bench.kernels.structured`) writes
    ``exp(-|x_i - z_j|^2 / gamma^2)`` as row and column scalings of ``1 + expm1(2 (A @ A)_ij /
    gamma^2)``, sparse where ``A @ A`` is: the exp kernels of squared distances only.
    """
    return ValueError(
        f"the structured source needs kernel 'sne' or 'rbf', got {kernel!r}: it factorises "
        f"exp(-|x - z|^2 / gamma^2) through the sparsity of A @ A, and has no form for other "
        f"kernels (softmax's exp(x.z / gamma) included); use structured=False or 'auto' (the "
        f"general lazy source, exact for every kernel)"
    )


def check_dtype(dtype):
    """``dtype`` as a numpy dtype, which must be float32 or float64 (the storage dtypes)."""
    try:
        dtype = np.dtype(dtype)
    except TypeError as exc:
        raise TypeError(f"dtype must be float32 or float64, got {dtype!r}") from exc
    if dtype not in (np.float32, np.float64):
        raise ValueError(f"dtype must be float32 or float64, got {dtype}")
    return dtype


def check_gamma(gamma):
    """Return gamma as a float, or raise if it is not a finite positive number."""
    if isinstance(gamma, bool) or not isinstance(gamma, numbers.Real):
        raise TypeError(f"gamma must be a positive real number, got {type(gamma).__name__}")
    gamma = float(gamma)
    if not np.isfinite(gamma) or gamma <= 0:
        raise ValueError(f"gamma must be finite and > 0, got {gamma}")
    return gamma


def softmax_gamma(n_features, factor=1.0):
    """The default softmax temperature, ``factor * sqrt(d)`` (scaled dot-product attention).

    With entries of unit variance, the logits ``x . z / sqrt(d)`` have unit variance
    whatever ``d``.

    Parameters
    ----------
    n_features : int
        The dimension ``d`` of the points (the queries' and keys' width).
    factor : float, default=1.0
        Multiplier (> 0), as ``bandwidth_factor`` multiplies the paper's bandwidth rule.

    Returns
    -------
    gamma : float

    Examples
    --------
    >>> softmax_gamma(64)
    8.0
    """
    return check_gamma(factor) * float(np.sqrt(n_features))


def paper_gamma(A, bandwidth_factor=1.0):
    """The paper's bandwidth rule ``gamma = bandwidth_factor * sqrt(M * var(A))``.

    ``var(A)`` is the variance of all N*M entries (zeros of a sparse matrix included),
    computed in float64 without densifying a sparse ``A``: in two passes, the mean first, then
    the squared deviations of the stored entries plus ``(N*M - nnz) * mean**2`` for the zeros.
    (The one-pass ``E[A^2] - mean^2`` cancels catastrophically for data far from the origin.)
    Entries of extreme magnitude (largest ``|entry|`` outside ``2^+-SAFE_EXPONENT``) are
    brought near 1 by a power of two first (exact, as the solvers do), so that their squares
    neither overflow (data near ``1e300``) nor underflow (data near ``1e-300``).

    Raises
    ------
    ValueError
        If ``A`` is constant (zero variance), or if the rule's gamma lies beyond the float64
        range (data near its largest value); either way a gamma must be given.
    """
    factor = check_gamma(bandwidth_factor)
    n, m = A.shape
    if sp.issparse(A):
        A = checked_csr(A, "A")
        if not A.has_canonical_format:
            # the deviations are taken entry by entry: duplicates must be summed first
            A = A.copy()
            A.sum_duplicates()
        data = np.asarray(A.data, dtype=np.float64)
    else:
        data = np.asarray(A, dtype=np.float64)
    amax = float(np.max(np.abs(data), initial=0.0))
    unit = power_of_two_scale(amax)
    if unit != 1.0:
        data = data * unit  # exact: a power of two
    if sp.issparse(A):
        total = n * m
        mean = data.sum() / total
        deviation = data - mean
        var = (deviation @ deviation + (total - data.size) * mean**2) / total
    else:
        var = np.var(data)
    var = max(float(var), 0.0)
    if var == 0:
        raise ValueError("cannot apply the paper's bandwidth rule: A has zero variance; pass gamma")
    gamma = factor * float(np.sqrt(m * var)) / unit
    if not math.isfinite(gamma):
        raise ValueError(
            f"cannot apply the paper's bandwidth rule: its gamma, {factor:.3g} * sqrt({m} * "
            f"var(A)), exceeds the float64 range (entries up to {amax:.3g}); pass gamma or "
            f"rescale A"
        )
    return gamma
