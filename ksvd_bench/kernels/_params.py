"""Names, defaults and parameter checks shared by every kernel builder."""

from __future__ import annotations

import numbers

import numpy as np
import scipy.sparse as sp

KERNELS = ("sne", "rbf", "t", "linear", "poly")
#: kernels whose matrix is exp(-|x - z|^2 / gamma^2) up to row/column scalings
EXP_KERNELS = ("sne", "rbf")
#: the compatibility maps of the paper's Algorithm 2 (a0, a1, a2) and the square case
COMPATS = ("pinv", "pca", "random", None)


def check_kernel(kernel):
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    return kernel


def check_gamma(gamma):
    """Return gamma as a float, or raise if it is not a finite positive number."""
    if isinstance(gamma, bool) or not isinstance(gamma, numbers.Real):
        raise TypeError(f"gamma must be a positive real number, got {type(gamma).__name__}")
    gamma = float(gamma)
    if not np.isfinite(gamma) or gamma <= 0:
        raise ValueError(f"gamma must be finite and > 0, got {gamma}")
    return gamma


def paper_gamma(A, bandwidth_factor=1.0):
    """The paper's bandwidth rule ``gamma = bandwidth_factor * sqrt(M * var(A))``.

    ``var(A)`` is the variance of all N*M entries (zeros of a sparse matrix included),
    computed without densifying a sparse ``A``.
    """
    factor = check_gamma(bandwidth_factor)
    n, m = A.shape
    if sp.issparse(A):
        A = sp.csr_matrix(A)
        total = n * m
        mean = A.sum() / total
        var = (A.multiply(A)).sum() / total - mean**2
    else:
        var = np.var(np.asarray(A, dtype=np.float64))
    var = max(float(var), 0.0)
    if var == 0:
        raise ValueError("cannot apply the paper's bandwidth rule: A has zero variance; pass gamma")
    return factor * float(np.sqrt(m * var))
